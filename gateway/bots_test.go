package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"parley"
	"parley/auth"
)

// integrationsSwitch answers the gateway's WorkspaceLimits as the tenant
// directory would, with integrations on or off per workspace, and can fail.
type integrationsSwitch struct {
	mu   sync.Mutex
	off  map[string]bool // guarded by mu
	fail bool            // guarded by mu
}

func (sw *integrationsSwitch) set(ws string, off bool) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.off == nil {
		sw.off = map[string]bool{}
	}
	sw.off[ws] = off
}

func (sw *integrationsSwitch) failing(fail bool) {
	sw.mu.Lock()
	sw.fail = fail
	sw.mu.Unlock()
}

func (sw *integrationsSwitch) lookup(_ context.Context, ws string) (parley.WorkspaceLimits, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.fail {
		return parley.WorkspaceLimits{}, errors.New("no directory replica answered")
	}
	if sw.off[ws] {
		return parley.WorkspaceLimits{Features: map[string]bool{parley.FeatureIntegrations: false}}, nil
	}
	return parley.WorkspaceLimits{}, nil
}

// botOf makes a bot in ws and a channels:read token for it.
func (e *env) botOf(owner *tuser, ws *parley.Workspace, handle string) *tuser {
	e.t.Helper()
	ctx := context.Background()
	b, err := e.store.CreateBot(ctx, owner.ID, ws.ID, parley.NewBot{Name: handle, Handle: handle})
	if err != nil {
		e.t.Fatal(err)
	}
	token, hash, err := auth.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.CreateBotToken(ctx, owner.ID, ws.ID, b.User.ID, parley.NewBotToken{
		Label: "test", Scopes: []string{parley.ScopeChannelsRead}, TokenHash: hash}); err != nil {
		e.t.Fatal(err)
	}
	return &tuser{User: b.User, token: token, hash: hash}
}

// TestBotSessionsFollowIntegrations: a bot's gateway sessions follow its
// workspace's integrations feature, as its API calls do. While it is off
// a bot's identify and resume answer 4004; turning it off closes the bots'
// sessions of that workspace, attached or detached, and no one else's; a
// directory that does not answer lets bots in (the API's global defaults).
func TestBotSessionsFollowIntegrations(t *testing.T) {
	sw := &integrationsSwitch{}
	e := newEnv(t, func(c *Config) { c.WorkspaceLimits = sw.lookup })
	owner := e.user("owner")
	ws, other := e.workspace(owner), e.workspace(owner)
	bot, otherBot := e.botOf(owner, ws, "ci-bot"), e.botOf(owner, other, "other-bot")

	// On: the bot identifies like anyone.
	person, _ := e.identify(owner, ws)
	live, _ := e.identify(bot, ws)
	elsewhere, _ := e.identify(otherBot, other)
	parked, parkedReady := e.identify(bot, ws)
	parked.drop()
	e.waitDetached(parkedReady.SessionID)

	// Off: both of its sessions close, attached and detached; the
	// person's and the other workspace's bot stay.
	sw.set(ws.ID, true)
	e.gw.CloseBots(ws.ID)
	if code := live.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("attached bot session closed %d, want 4004", code)
	}
	waitUntil(t, "the detached bot session gone", func() bool { return e.gw.registry.get(parkedReady.SessionID) == nil })
	if got := counterValue(t, e.reg, "parley_gateway_bot_sessions_closed_total"); got != 2 {
		t.Fatalf("bot sessions closed = %v, want 2", got)
	}
	if person.isClosed() || elsewhere.isClosed() {
		t.Fatal("a person's session or another workspace's bot was closed")
	}

	// While off, identify is refused with 4004; so is a resume of a bot
	// session the change missed (handed over by a node that never heard
	// it, here: still registered on this one).
	c := e.connect()
	c.send(map[string]any{"op": "identify", "token": bot.token, "workspace_id": ws.ID})
	if code := c.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("bot identify with integrations off closed %d, want 4004", code)
	}
	sw.set(ws.ID, false)
	missed, missedReady := e.identify(bot, ws)
	missed.drop()
	e.waitDetached(missedReady.SessionID)
	sw.set(ws.ID, true)
	r := e.connect()
	r.send(map[string]any{"op": "resume", "token": bot.token, "session_id": missedReady.SessionID, "seq": 0})
	if code := r.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("bot resume with integrations off closed %d, want 4004", code)
	}
	waitUntil(t, "the refused session removed", func() bool { return e.gw.registry.get(missedReady.SessionID) == nil })

	// A person is never asked about: owner identifies with it off.
	again, _ := e.identify(owner, ws)
	again.send(map[string]any{"op": "heartbeat"})

	// The directory does not answer: bots get in.
	sw.failing(true)
	if _, f := e.identify(bot, ws); f.Op != "ready" {
		t.Fatalf("identify with the directory down = %+v", f)
	}
	sw.failing(false)

	// Back on: the bot identifies again.
	sw.set(ws.ID, false)
	if _, f := e.identify(bot, ws); f.Op != "ready" {
		t.Fatalf("identify with integrations back on = %+v", f)
	}
}

// TestBotFlagSurvivesHandover: a bot's session handed over to another node
// (a resume there, its token checked against the session handed over) is
// still a bot's: that node closes it when the workspace turns integrations
// off.
func TestBotFlagSurvivesHandover(t *testing.T) {
	sw := &integrationsSwitch{}
	e := newEnv(t, func(c *Config) { c.WorkspaceLimits = sw.lookup })
	n2 := e.nodeWith("n2", func(c *Config) { c.WorkspaceLimits = sw.lookup })
	owner := e.user("owner")
	ws := e.workspace(owner)
	bot := e.botOf(owner, ws, "ci-bot")
	c, ready := e.identify(bot, ws)
	c.drop()
	e.waitDetached(ready.SessionID)

	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": bot.token, "session_id": ready.SessionID, "seq": 0})
	c2.nextOp("resumed")
	// Counted once attach has returned, after "resumed" left.
	waitUntil(t, "the handover resume counted", func() bool { return resumeSources(t, n2.reg)["handover"] == 1 })

	sw.set(ws.ID, true)
	n2.gw.CloseBots(ws.ID)
	if code := c2.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("handed-over bot session closed %d, want 4004", code)
	}
}

// TestBotIdentifyRacingCloseBots: the workspace turns integrations off
// just after a bot's identify passed its check, before the session reached
// its partition: CloseBots's pass cannot see it, so the partition closes
// it as it places it.
func TestBotIdentifyRacingCloseBots(t *testing.T) {
	var e *env
	var racing atomic.Bool
	e = newEnv(t, func(c *Config) {
		c.WorkspaceLimits = func(ctx context.Context, id string) (parley.WorkspaceLimits, error) {
			if racing.Load() {
				e.gw.CloseBots(id) // the change lands right after this answer
			}
			return parley.WorkspaceLimits{}, nil
		}
	})
	owner := e.user("owner")
	ws := e.workspace(owner)
	bot := e.botOf(owner, ws, "ci-bot")
	racing.Store(true)
	c := e.connect()
	c.send(map[string]any{"op": "identify", "token": bot.token, "workspace_id": ws.ID})
	if code := c.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("bot identified across CloseBots closed %d, want 4004", code)
	}
	waitUntil(t, "the session removed", func() bool { return e.gw.registry.len() == 0 })
	// A person is not affected.
	if _, f := e.identify(owner, ws); f.Op != "ready" {
		t.Fatalf("person's identify = %+v", f)
	}
}
