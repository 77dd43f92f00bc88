package httpapi

import (
	"net/http"
	"testing"
	"time"

	"parley"
)

func TestProfile(t *testing.T) {
	e := newEnv(t)
	a := mustAccount(t, e.store, "ann")
	var u parley.User
	e.must(http.StatusOK, "PATCH", "/me", a.Token, map[string]string{"name": "Ann Lee", "title": "Engineer", "avatar_hash": "abc123"}, &u)
	if u.Name != "Ann Lee" || u.Title != "Engineer" || u.AvatarHash != "abc123" || u.Handle != a.Handle {
		t.Errorf("after PATCH /me: %+v", u)
	}
	e.must(http.StatusBadRequest, "PATCH", "/me", a.Token, map[string]string{"avatar_hash": "not/alnum"}, nil)

	exp := e.clock.Now().Add(time.Hour)
	e.must(http.StatusOK, "PUT", "/me/status", a.Token, map[string]any{"emoji": "palm_tree", "text": "on leave", "expires_at": exp}, &u)
	if u.Status == nil || u.Status.Emoji != "palm_tree" || u.Status.Text != "on leave" || u.Status.ExpiresAt == nil || !u.Status.ExpiresAt.Equal(exp) {
		t.Errorf("after PUT /me/status: %+v", u.Status)
	}
	e.must(http.StatusOK, "GET", "/me", a.Token, nil, &u)
	if u.Status == nil || u.Status.Text != "on leave" {
		t.Errorf("GET /me status %+v", u.Status)
	}
}

func TestUsersBatch(t *testing.T) {
	e := newEnv(t)
	a := mustAccount(t, e.store, "ann")
	b := mustAccount(t, e.store, "bob")
	stranger := mustAccount(t, e.store, "stranger")
	ws := mustWorkspace(t, e.store, a)
	mustJoin(t, e.store, ws, a, b)

	var out struct{ Users []parley.User }
	e.must(http.StatusOK, "POST", "/users/batch", a.Token, map[string][]string{"ids": {b.ID, stranger.ID, "Unosuch"}}, &out)
	if len(out.Users) != 1 || out.Users[0].ID != b.ID {
		t.Fatalf("batch: %+v, want only bob", out.Users)
	}
	if out.Users[0].Email != "" {
		t.Errorf("batch shows another user's email")
	}
	r := e.must(http.StatusOK, "POST", "/users/batch", stranger.Token, map[string][]string{"ids": {a.ID}}, nil)
	if string(r.Body) != "{\"users\":[]}\n" {
		t.Errorf("empty batch body %s, want users: []", r.Body)
	}
	ids := make([]string, parley.MaxBatchUsers+1)
	for i := range ids {
		ids[i] = "U" + uniq()
	}
	e.must(http.StatusBadRequest, "POST", "/users/batch", a.Token, map[string][]string{"ids": ids}, nil)
}

func TestWorkspacesAndInvites(t *testing.T) {
	e := newEnv(t)
	owner := mustAccount(t, e.store, "owner")
	joiner := mustAccount(t, e.store, "joiner")
	other := mustAccount(t, e.store, "other")

	slug := "acme-" + uniq()
	var ws parley.Workspace
	e.must(http.StatusCreated, "POST", "/workspaces", owner.Token, map[string]string{"name": "Acme", "slug": slug}, &ws)
	if ws.ID == "" || ws.Slug != slug || ws.Role != parley.RoleOwner {
		t.Fatalf("created workspace %+v", ws)
	}
	e.must(http.StatusConflict, "POST", "/workspaces", other.Token, map[string]string{"name": "Copy", "slug": slug}, nil)
	e.must(http.StatusBadRequest, "POST", "/workspaces", other.Token, map[string]string{"name": "Bad", "slug": "NO SPACES"}, nil)

	var list struct{ Workspaces []parley.Workspace }
	e.must(http.StatusOK, "GET", "/workspaces", owner.Token, nil, &list)
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != ws.ID {
		t.Errorf("list %+v", list.Workspaces)
	}
	r := e.must(http.StatusOK, "GET", "/workspaces", joiner.Token, nil, nil)
	if string(r.Body) != "{\"workspaces\":[]}\n" {
		t.Errorf("no workspaces: %s", r.Body)
	}
	e.must(http.StatusOK, "GET", "/workspaces/"+ws.ID, owner.Token, nil, nil)
	e.must(http.StatusNotFound, "GET", "/workspaces/"+ws.ID, joiner.Token, nil, nil)

	// Invites: multi-use until max_uses.
	var inv parley.Invite
	e.must(http.StatusCreated, "POST", "/workspaces/"+ws.ID+"/invites", owner.Token, map[string]int{"max_uses": 1, "expires_in_s": 3600}, &inv)
	if inv.Code == "" || inv.WorkspaceID != ws.ID || inv.MaxUses != 1 {
		t.Fatalf("invite %+v", inv)
	}
	var joined parley.Workspace
	e.must(http.StatusOK, "POST", "/invites/"+inv.Code+"/accept", joiner.Token, nil, &joined)
	if joined.ID != ws.ID || joined.Role != parley.RoleMember {
		t.Errorf("accepted %+v", joined)
	}
	e.must(http.StatusNotFound, "POST", "/invites/"+inv.Code+"/accept", other.Token, nil, nil)
	e.must(http.StatusOK, "GET", "/workspaces/"+ws.ID, joiner.Token, nil, nil)

	// An expired invite is gone.
	e.must(http.StatusCreated, "POST", "/workspaces/"+ws.ID+"/invites", owner.Token, map[string]int{"expires_in_s": 60}, &inv)
	e.clock.Advance(2 * time.Minute)
	e.must(http.StatusNotFound, "POST", "/invites/"+inv.Code+"/accept", other.Token, nil, nil)

	// Roles: admins only; not the owner's; only known roles.
	path := "/workspaces/" + ws.ID + "/members/" + joiner.ID + "/role"
	e.must(http.StatusForbidden, "PUT", "/workspaces/"+ws.ID+"/members/"+owner.ID+"/role", joiner.Token, map[string]string{"role": "admin"}, nil)
	e.must(http.StatusBadRequest, "PUT", path, owner.Token, map[string]string{"role": "emperor"}, nil)
	e.must(http.StatusNoContent, "PUT", path, owner.Token, map[string]string{"role": "admin"}, nil)
	e.must(http.StatusOK, "GET", "/workspaces/"+ws.ID, joiner.Token, nil, &joined)
	if joined.Role != parley.RoleAdmin {
		t.Errorf("role after PUT: %s", joined.Role)
	}
	e.must(http.StatusForbidden, "PUT", "/workspaces/"+ws.ID+"/members/"+owner.ID+"/role", joiner.Token, map[string]string{"role": "member"}, nil)
	e.must(http.StatusNotFound, "PUT", "/workspaces/"+ws.ID+"/members/"+other.ID+"/role", owner.Token, map[string]string{"role": "member"}, nil)
}

func TestWorkspaceDirectory(t *testing.T) { checkDirectory(t, newEnv(t)) }

// checkDirectory pages, searches and guards a workspace's directory through
// e (served by the store or by the query cache, which must agree) and
// returns its fixture for further checks.
func checkDirectory(t *testing.T, e *env) (ws *parley.Workspace, owner *account, members []*account, outsider *account) {
	t.Helper()
	owner = mustAccount(t, e.store, "owner")
	ws = mustWorkspace(t, e.store, owner)
	for range 5 {
		members = append(members, mustAccount(t, e.store, "zed"))
	}
	mustJoin(t, e.store, ws, owner, members...)
	outsider = mustAccount(t, e.store, "zed")
	// Page through everyone two at a time.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		var page parley.UserPage
		e.must(http.StatusOK, "GET", "/workspaces/"+ws.ID+"/users?limit=2&cursor="+cursor, owner.Token, nil, &page)
		if len(page.Users) > 2 {
			t.Fatalf("page of %d users, limit 2", len(page.Users))
		}
		for _, u := range page.Users {
			if seen[u.ID] {
				t.Errorf("user %s twice", u.ID)
			}
			seen[u.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != 6 || seen[outsider.ID] {
		t.Errorf("directory saw %d users (outsider %v), want the 6 members", len(seen), seen[outsider.ID])
	}

	var found parley.UserPage
	e.must(http.StatusOK, "GET", "/workspaces/"+ws.ID+"/users?q="+members[2].Handle, owner.Token, nil, &found)
	if len(found.Users) != 1 || found.Users[0].ID != members[2].ID {
		t.Errorf("q=%s found %+v", members[2].Handle, found.Users)
	}
	e.must(http.StatusNotFound, "GET", "/workspaces/"+ws.ID+"/users", outsider.Token, nil, nil)
	e.must(http.StatusBadRequest, "GET", "/workspaces/"+ws.ID+"/users?limit=2.5", owner.Token, nil, nil)
	e.must(http.StatusBadRequest, "GET", "/workspaces/"+ws.ID+"/users?cursor=!!", owner.Token, nil, nil)
	return ws, owner, members, outsider
}

// TestInvitePreview: the invite page names the workspace without a
// session; unknown, used-up and expired codes are 404; it is limited per
// client IP.
func TestInvitePreview(t *testing.T) {
	e := newEnv(t)
	owner := mustAccount(t, e.store, "owner")
	joiner := mustAccount(t, e.store, "joiner")
	ws := mustWorkspace(t, e.store, owner)

	var inv parley.Invite
	e.must(http.StatusCreated, "POST", "/workspaces/"+ws.ID+"/invites", owner.Token, map[string]int{"max_uses": 1}, &inv)
	r := e.must(http.StatusOK, "GET", "/invites/"+inv.Code, "", nil, nil)
	var got map[string]any
	r.decode(t, &got)
	if len(got) != 2 || got["workspace_name"] != ws.Name || got["workspace_slug"] != ws.Slug {
		t.Errorf("preview %v, want only the name %q and slug %q", got, ws.Name, ws.Slug)
	}
	// A preview spends nothing: the one use is still there.
	e.must(http.StatusOK, "POST", "/invites/"+inv.Code+"/accept", joiner.Token, nil, nil)
	e.must(http.StatusNotFound, "GET", "/invites/"+inv.Code, "", nil, nil) // used up
	e.must(http.StatusNotFound, "GET", "/invites/nosuchcode", "", nil, nil)

	e.must(http.StatusCreated, "POST", "/workspaces/"+ws.ID+"/invites", owner.Token, map[string]int{"expires_in_s": 60}, &inv)
	e.must(http.StatusOK, "GET", "/invites/"+inv.Code, "", nil, nil)
	e.clock.Advance(2 * time.Minute)
	e.must(http.StatusNotFound, "GET", "/invites/"+inv.Code, "", nil, nil) // expired

	// Limited per client IP: a fresh server with a bucket of two.
	e = newEnv(t, func(c *Config) { c.Rates.LoginIP = parley.MustRate("1/min,burst=2") })
	e.must(http.StatusNotFound, "GET", "/invites/nosuchcode", "", nil, nil)
	e.must(http.StatusNotFound, "GET", "/invites/nosuchcode", "", nil, nil)
	r = e.call("GET", "/invites/nosuchcode", "", nil)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("3rd preview: %d (Retry-After %q), want 429 with Retry-After", r.Status, r.Header.Get("Retry-After"))
	}
}
