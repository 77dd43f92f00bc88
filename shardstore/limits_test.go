package shardstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"parley"
	"parley/httpapi"
)

// TestWorkspaceLimitsRouted: with store routing on, a workspace on a shard
// other than the control database gets the limits and features its
// directory record carries (the real catalogue and client): the member cap
// is enforced in the shard's transaction, integrations off refuse a bot;
// lifting both applies once the client hears the change.
func TestWorkspaceLimitsRouted(t *testing.T) {
	c := newCluster(t, nil)
	lookup := func(ctx context.Context, ws string) (parley.WorkspaceLimits, error) {
		rec, err := c.dir.client.Lookup(ctx, ws)
		return parley.WorkspaceLimits{Limits: rec.Limits, Features: rec.Features}, err
	}
	api := httptest.NewServer(httpapi.New(httpapi.Config{Store: c.r, Integrations: c.r, Directory: c.dirQueries(t),
		Rates: parley.LiveRatesOff(), WorkspaceLimits: lookup}).Handler())
	t.Cleanup(api.Close)
	owner := signup(t, api, "limitowner")
	ws := wsOffDefault(t, c, &owner.User)
	var inv parley.Invite
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/invites", map[string]int{}, http.StatusCreated, &inv)

	set := func(lim map[string]int64, fea map[string]bool, heard func(tenantRec parley.WorkspaceLimits) bool) {
		t.Helper()
		if _, err := c.dir.cat.SetOverrides(bg(), ws.ID, lim, fea); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the client to hear the overrides", func() bool {
			wl, err := lookup(bg(), ws.ID)
			return err == nil && heard(wl)
		})
	}
	set(map[string]int64{parley.LimitMembers: 2}, map[string]bool{parley.FeatureIntegrations: false}, func(wl parley.WorkspaceLimits) bool {
		return wl.Limits[parley.LimitMembers] == 2 && !wl.Enabled(parley.FeatureIntegrations)
	})
	bob, carol := signup(t, api, "limitbob"), signup(t, api, "limitcarol")
	call(t, api.URL, bob.Token, "POST", "/invites/"+inv.Code+"/accept", nil, http.StatusOK, nil)
	call(t, api.URL, carol.Token, "POST", "/invites/"+inv.Code+"/accept", nil, http.StatusConflict, nil)
	if n := countIn(t, c.dsnOf(t, ws.ID), `SELECT COUNT(*) FROM workspace_members WHERE workspace_id = $1`, ws.ID); n != 2 {
		t.Fatalf("members on the workspace's shard = %d, want 2", n)
	}
	bot := map[string]string{"name": "CI", "handle": "limitbot"}
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/bots", bot, http.StatusForbidden, nil)

	set(map[string]int64{parley.LimitMembers: 3}, map[string]bool{}, func(wl parley.WorkspaceLimits) bool {
		return wl.Limits[parley.LimitMembers] == 3 && wl.Enabled(parley.FeatureIntegrations)
	})
	call(t, api.URL, carol.Token, "POST", "/invites/"+inv.Code+"/accept", nil, http.StatusOK, nil)
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/bots", bot, http.StatusCreated, nil)
}
