package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"parley"
	"parley/purge"
)

// The lifecycle over HTTP, on both stores: a deactivated user is told so
// at login (only with the right password) and their tokens stop working;
// the directory leaves them out unless asked; deleting a workspace answers
// 202 and the purge it starts removes everything.
func TestLifecycleOverHTTP(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			var purger *purge.Purger
			e := newEnvOn(t, d, func(c *Config) {
				c.Rates = parley.LiveRatesOff()
				purger = purge.New(purge.Config{Store: c.Store, Batch: 5, Logger: quietLogger()})
				c.WorkspaceDeleted = purger.Start
			})
			t.Cleanup(purger.Close)
			owner, member := mustAccount(t, e.store, "owner"), mustAccount(t, e.store, "member")
			ws := mustWorkspace(t, e.store, owner)
			mustJoin(t, e.store, ws, owner, member)
			wsPath := "/workspaces/" + ws.ID

			var u parley.User
			e.must(http.StatusOK, "POST", wsPath+"/members/"+member.ID+"/deactivate", owner.Token, nil, &u)
			if !u.Deactivated || u.Name != member.Name {
				t.Fatalf("deactivated = %+v", u)
			}
			if r := e.call("GET", "/me", member.Token, nil); r.Status != http.StatusUnauthorized {
				t.Fatalf("old token: %d", r.Status)
			}
			r := e.call("POST", "/auth/login", "", map[string]string{"email": member.Email, "password": testPassword})
			if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "deactivated") {
				t.Fatalf("login while deactivated: %d %s", r.Status, r.Body)
			}
			r = e.call("POST", "/auth/login", "", map[string]string{"email": member.Email, "password": "wrong password!"})
			if r.Status != http.StatusUnauthorized || strings.Contains(string(r.Body), "deactivated") {
				t.Fatalf("wrong password while deactivated: %d %s", r.Status, r.Body)
			}
			var page parley.UserPage
			e.must(http.StatusOK, "GET", wsPath+"/users", owner.Token, nil, &page)
			if len(page.Users) != 1 || page.Users[0].ID != owner.ID {
				t.Fatalf("directory = %+v", page.Users)
			}
			e.must(http.StatusOK, "GET", wsPath+"/users?include_deactivated=true", owner.Token, nil, &page)
			if len(page.Users) != 2 {
				t.Fatalf("directory with deactivated = %+v", page.Users)
			}
			e.must(http.StatusOK, "POST", wsPath+"/members/"+member.ID+"/reactivate", owner.Token, nil, &u)
			var login struct{ Token string }
			e.must(http.StatusOK, "POST", "/auth/login", "", map[string]string{"email": member.Email, "password": testPassword}, &login)
			member.Token = login.Token

			e.must(http.StatusNoContent, "POST", wsPath+"/owner", owner.Token, map[string]string{"user_id": member.ID}, nil)
			if r := e.call("POST", wsPath+"/owner", owner.Token, map[string]string{}); r.Status != http.StatusBadRequest {
				t.Fatalf("transfer without user_id: %d", r.Status)
			}
			ch := mustChannel(t, e.store, ws, owner, parley.KindPublic)
			for i := 0; i < 20; i++ {
				mustPost(t, e.store, owner, ch, "bye")
			}
			if r := e.call("DELETE", wsPath, owner.Token, nil); r.Status != http.StatusBadRequest {
				t.Fatalf("delete without confirm: %d", r.Status)
			}
			// The old owner is an admin now: not allowed.
			if r := e.call("DELETE", wsPath+"?confirm="+ws.Slug, owner.Token, nil); r.Status != http.StatusForbidden {
				t.Fatalf("delete by an admin: %d", r.Status)
			}
			e.must(http.StatusAccepted, "DELETE", wsPath+"?confirm="+ws.Slug, member.Token, nil, nil)
			if r := e.call("GET", wsPath, member.Token, nil); r.Status != http.StatusNotFound {
				t.Fatalf("deleted workspace: %d", r.Status)
			}
			purger.Wait()
			left, err := e.store.DeletedWorkspaces(context.Background())
			if err != nil || len(left) != 0 {
				t.Fatalf("after the purge, deleted workspaces left: %v %v", left, err)
			}
		})
	}
}
