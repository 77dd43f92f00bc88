package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/sqlstore"
)

// overridesTable is a WorkspaceLimitsFunc over a table the test edits:
// what the node's directory client answers (cmd/parley's
// TestWorkspaceLimits drives the real one); fail makes every lookup fail
// as a directory outage would.
type overridesTable struct {
	mu   sync.Mutex
	ws   map[string]parley.WorkspaceLimits
	fail bool
}

func (o *overridesTable) set(ws string, wl parley.WorkspaceLimits) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ws[ws] = wl
}

func (o *overridesTable) lookup(_ context.Context, ws string) (parley.WorkspaceLimits, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail {
		return parley.WorkspaceLimits{}, parley.Errorf(parley.EUNAVAILABLE, "directory: no replica answered")
	}
	wl, ok := o.ws[ws]
	if !ok {
		return wl, parley.Errorf(parley.ENOTFOUND, "not in the directory")
	}
	return wl, nil
}

// TestWorkspaceFeatures: with integrations off, the bot's existing token
// is refused, and so is posting through an incoming webhook; with file
// uploads off, both upload routes are refused; each with 403
// feature_disabled, for that workspace only. A failed directory lookup
// falls back to the defaults (everything on) and is counted.
func TestWorkspaceFeatures(t *testing.T) {
	tbl := &overridesTable{ws: map[string]parley.WorkspaceLimits{}}
	reg := prometheus.NewRegistry()
	e := newIntegEnv(t, sqlstore.SQLite, func(c *Config) { c.WorkspaceLimits, c.Registerer = tbl.lookup, reg })
	wsPath := "/workspaces/" + e.ws.ID
	var bot parley.Bot
	e.must(201, "POST", wsPath+"/bots", e.admin.Token, map[string]string{"name": "CI", "handle": "ci-" + uniq()}, &bot)
	var tok parley.BotToken
	e.must(201, "POST", wsPath+"/bots/"+bot.User.ID+"/tokens", e.admin.Token,
		map[string]any{"scopes": []string{"channels:read", "chat:write"}}, &tok)
	e.must(200, "POST", "/channels/"+e.priv.ID+"/members", e.admin.Token, map[string][]string{"user_ids": {bot.User.ID}}, nil)
	// An outgoing webhook, created while integrations are on.
	ep := newCmdEndpoint(t)
	var out parley.Integration
	e.must(201, "POST", wsPath+"/integrations", e.admin.Token,
		map[string]any{"kind": "outgoing", "name": "Deploy", "url": ep.srv.URL, "channel_id": e.priv.ID, "trigger_words": []string{"deploy"}}, &out)
	ep.mu.Lock()
	ep.secret = out.SigningSecret
	ep.mu.Unlock()
	ep.set(func(w http.ResponseWriter, _ *http.Request, _ url.Values) { w.WriteHeader(http.StatusOK) })
	var hook parley.Webhook
	e.must(201, "POST", "/channels/"+e.priv.ID+"/webhooks", e.admin.Token, map[string]string{"name": "alerts"}, &hook)
	hookPath := hook.URL[len(e.srv.URL+Prefix):]
	post := func() map[string]string { return map[string]string{"text": "hello", "client_msg_id": uniq()} }
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", tok.Token, post(), nil)

	off := func(feature string) parley.WorkspaceLimits {
		return parley.WorkspaceLimits{Features: map[string]bool{feature: false}}
	}
	forbidden := func(method, path, token string, body any) {
		t.Helper()
		r := e.must(http.StatusForbidden, method, path, token, body, nil)
		if r.errCode() != parley.EFEATUREOFF {
			t.Fatalf("%s %s: %s, want %s", method, path, r.Body, parley.EFEATUREOFF)
		}
	}
	tbl.set(e.ws.ID, off(parley.FeatureIntegrations))
	forbidden("POST", "/channels/"+e.priv.ID+"/messages", tok.Token, post())
	forbidden("POST", wsPath+"/bots", e.admin.Token, map[string]string{"name": "CI2", "handle": "ci-" + uniq()})
	forbidden("POST", "/channels/"+e.priv.ID+"/webhooks", e.admin.Token, map[string]string{"name": "more"})
	e.must(http.StatusForbidden, "POST", hookPath, "", map[string]string{"text": "from the hook"}, nil)
	forbidden("POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": "/deploy"})
	// The outgoing webhook does not fire (the post's calls have started
	// when it answers; wg covers them).
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", e.member.Token, map[string]string{"text": "deploy now", "client_msg_id": uniq()}, nil)
	e.api.integ.wg.Wait()
	if ep.last() != nil {
		t.Fatalf("the outgoing webhook fired with integrations off: %v", ep.last())
	}
	// People keep chatting; uploads stay on.
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", e.member.Token, post(), nil)
	e.must(201, "POST", wsPath+"/uploads", e.member.Token, map[string]any{"name": "a.txt", "size": 3}, nil)

	tbl.set(e.ws.ID, off(parley.FeatureFileUploads))
	forbidden("POST", wsPath+"/uploads", e.member.Token, map[string]any{"name": "a.txt", "size": 3})
	forbidden("POST", wsPath+"/files?name=a.txt", e.member.Token, "abc")
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", tok.Token, post(), nil)
	e.must(200, "POST", hookPath, "", map[string]string{"text": "from the hook"}, nil)
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", e.member.Token, map[string]string{"text": "deploy now", "client_msg_id": uniq()}, nil)
	e.api.integ.wg.Wait()
	if ep.last() == nil {
		t.Fatal("the outgoing webhook did not fire with integrations back on")
	}
	// The workspace's file quota: an announced size past it is refused.
	tbl.set(e.ws.ID, parley.WorkspaceLimits{Limits: map[string]int64{parley.LimitFileStorageBytes: 3}})
	e.must(201, "POST", wsPath+"/uploads", e.member.Token, map[string]any{"name": "a.txt", "size": 3}, nil)
	if r := e.must(http.StatusRequestEntityTooLarge, "POST", wsPath+"/uploads", e.member.Token, map[string]any{"name": "a.txt", "size": 4}, nil); r.errCode() != parley.ETOOLARGE {
		t.Fatalf("over the workspace's quota: %s", r.Body)
	}
	// Another workspace is not affected.
	other := mustWorkspace(t, e.store, e.member)
	e.must(201, "POST", "/workspaces/"+other.ID+"/uploads", e.member.Token, map[string]any{"name": "a.txt", "size": 3}, nil)

	// The directory down: the defaults, counted; not_found is no failure.
	failures := func() float64 { return testutil.ToFloat64(e.api.wlimits.failures) }
	before := failures()
	tbl.mu.Lock()
	tbl.fail = true
	tbl.mu.Unlock()
	e.must(201, "POST", wsPath+"/uploads", e.member.Token, map[string]any{"name": "a.txt", "size": 3}, nil)
	if got := failures(); got != before+1 {
		t.Fatalf("lookup failures %v, want %v", got, before+1)
	}
}
