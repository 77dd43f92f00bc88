package gateway

import (
	"parley"

	"testing"
	"time"

	"parley/presence"
)

// TestPresenceSubOnlyVisibleUsers: presence_sub reports the users of the
// session's workspace and nothing about a user who shares no workspace
// with the caller, even one who is online.
func TestPresenceSubOnlyVisibleUsers(t *testing.T) {
	tracker, err := presence.New(presence.Config{Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tracker.Close)
	e := newEnv(t, func(c *Config) { c.Presence = tracker })
	a, b, b2 := e.user("a"), e.user("b"), e.user("b2")
	stranger, x := e.user("stranger"), e.user("x")
	ws1 := e.workspace(a, b, b2)
	ws2 := e.workspace(x, stranger)
	e.identify(stranger, ws2) // online, in the other workspace only
	ca, ready := e.identify(a, ws1)

	ca.send(map[string]any{"op": "presence_sub", "user_ids": []string{stranger.ID, b.ID}})
	waitPresence(t, ca, b.ID, "offline")
	// The tracker tells a watch's first statuses in order, and the
	// partition queues them in order: once b2 (watched by the next
	// presence_sub) is reported, whatever the first one sent has arrived.
	ca.send(map[string]any{"op": "presence_sub", "user_ids": []string{stranger.ID, b.ID, b2.ID}})
	waitPresence(t, ca, b2.ID, "offline")
	for _, f := range ca.events() {
		if f.T == parley.EventPresenceChanged && f.data(t).UserID == stranger.ID {
			t.Fatalf("presence of a user in no shared workspace leaked: %s", f.D)
		}
	}
	s := e.gw.registry.get(ready.SessionID)
	s.mu.Lock()
	watched := append([]string(nil), s.watched...)
	s.mu.Unlock()
	if len(watched) != 2 || watched[0] != b.ID || watched[1] != b2.ID {
		t.Fatalf("watched %v, want [b b2]", watched)
	}
	if n := counterValue(t, e.reg, "parley_gateway_presence_hidden_total"); n != 2 {
		t.Fatalf("presence_hidden_total %v, want 2", n)
	}
}
