package gateway

import (
	"context"
	"testing"
	"time"

	"parley"
	"parley/presence"
)

// gatedStore holds SessionByToken until gate is closed.
type gatedStore struct {
	Store
	gate chan struct{}
}

func (s gatedStore) SessionByToken(ctx context.Context, hash string) (*parley.Session, error) {
	<-s.gate
	return s.Store.SessionByToken(ctx, hash)
}

// TestIdentifyAdmission: without a queue, identifies beyond the node's cap
// are told to reconnect later (with jitter) and closed 4008; identifies beyond the
// per-IP rate are closed 4008.
func TestIdentifyAdmission(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, func(c *Config) {
		c.Store = gatedStore{Store: c.Store, gate: gate}
		c.MaxConcurrentIdentifies = 1
		c.IdentifyQueue = -1 // fail fast, as without a queue
	})
	a := e.user("a")
	ws := e.workspace(a)
	first := e.connect()
	first.send(map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
	waitUntil(t, "first identify in progress", func() bool { return e.gw.identifyQueue.inProgress() == 1 })
	second := e.connect()
	second.send(map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
	f := second.next()
	if f.Op != "reconnect" || f.Reason != "overloaded" || f.RetryAfterMS < 1000 || f.RetryAfterMS >= 6000 {
		t.Fatalf("overloaded answer %+v", f)
	}
	if code := second.closeCode(); code != parley.CloseRateLimited {
		t.Fatalf("close %d, want 4008", code)
	}
	close(gate)
	if f := first.next(); f.Op != "ready" {
		t.Fatalf("first identify: %+v", f)
	}

	e2 := newEnv(t, func(c *Config) { c.IdentifyRatePerIP = Rate{PerMinute: 1, Burst: 1} })
	b := e2.user("b")
	ws2 := e2.workspace(b)
	e2.identify(b, ws2)
	c := e2.connect()
	c.send(map[string]any{"op": "identify", "token": b.token, "workspace_id": ws2.ID})
	if code := c.closeCode(); code != parley.CloseRateLimited {
		t.Fatalf("second identify from the IP: close %d, want 4008", code)
	}
}

// TestPresenceSub: presence_sub sends each watched user's presence at once,
// then its changes, only to the session that asked.
func TestPresenceSub(t *testing.T) {
	tracker, err := presence.New(presence.Config{Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tracker.Close)
	e := newEnv(t, func(c *Config) { c.Presence = tracker })
	a, b, x := e.user("a"), e.user("b"), e.user("x")
	ws := e.workspace(a, b, x)
	ca, _ := e.identify(a, ws)
	cx, _ := e.identify(x, ws)
	ca.send(map[string]any{"op": "presence_sub", "user_ids": []string{b.ID}})
	waitPresence(t, ca, b.ID, "offline")
	cb, _ := e.identify(b, ws)
	waitPresence(t, ca, b.ID, "online")
	cb.drop()
	waitPresence(t, ca, b.ID, "offline")
	for _, f := range cx.events() {
		if f.T == parley.EventPresenceChanged {
			t.Fatal("presence sent to a session that did not ask")
		}
	}
}

func waitPresence(t *testing.T, c *client, userID, status string) {
	t.Helper()
	c.waitFor("presence "+status, func() bool {
		for i := len(c.frames) - 1; i >= 0; i-- {
			f := c.frames[i]
			if f.T != parley.EventPresenceChanged {
				continue
			}
			var d struct {
				UserID   string `json:"user_id"`
				Presence string `json:"presence"`
			}
			if jsonUnmarshal(f.D, &d) == nil && d.UserID == userID {
				return d.Presence == status
			}
		}
		return false
	})
}

// TestSubscriptionsRefCounted: the node holds one bus subscription per
// topic while sessions need it, and none once they are gone.
func TestSubscriptionsRefCounted(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ResumeWindow = 100 * time.Millisecond })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	ca, _ := e.identify(a, ws)
	cb, _ := e.identify(b, ws)
	cb2, _ := e.identify(b, ws)
	if n := e.gw.hub.refs("ch." + general.ID); n != 3 {
		t.Fatalf("general refs %d, want 3", n)
	}
	if n := e.gw.hub.refs("user." + b.ID); n != 2 {
		t.Fatalf("b's user topic refs %d, want 2", n)
	}
	subs := counterValue(t, e.reg, "parley_gateway_bus_subscriptions")
	if subs != 4 { // #general, ws, user a, user b
		t.Fatalf("%v bus subscriptions, want 4", subs)
	}
	for _, c := range []*client{ca, cb, cb2} {
		c.drop()
	}
	waitUntil(t, "sessions expired", func() bool { return e.gw.registry.len() == 0 })
	waitUntil(t, "unsubscribed", func() bool {
		return counterValue(t, e.reg, "parley_gateway_bus_subscriptions") == 0
	})
}

var _ Presence = (*presence.Tracker)(nil)
