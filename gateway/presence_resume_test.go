package gateway

import (
	"fmt"
	"testing"
	"time"

	"parley/presence"
)

// TestPresenceAfterResume: a presence change dropped while the watching
// session was detached is sent after its resume, so the client does not
// keep the status it had before.
func TestPresenceAfterResume(t *testing.T) {
	tracker, err := presence.New(presence.Config{Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tracker.Close)
	e := newEnv(t, func(c *Config) { c.Presence = tracker })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	ca, ready := e.identify(a, ws)
	ca.send(map[string]any{"op": "presence_sub", "user_ids": []string{b.ID}})
	waitPresence(t, ca, b.ID, "offline")
	var seq uint64
	for _, f := range ca.frames {
		seq = max(seq, f.S)
	}
	ca.drop()
	e.waitDetached(ready.SessionID)

	dropped := counterValue(t, e.reg, "parley_gateway_ephemeral_dropped_total")
	e.identify(b, ws)
	waitUntil(t, "b's presence dropped for the detached session", func() bool {
		return counterValue(t, e.reg, "parley_gateway_ephemeral_dropped_total") > dropped
	})

	c2 := e.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": seq})
	if f := c2.nextOp("resumed"); f.Replayed != 0 {
		t.Fatalf("resumed %+v, want nothing replayed", f)
	}
	waitPresence(t, c2, b.ID, "online")
}

// TestPresenceOfALargeViewArrives: a view of more new users than half a
// send queue drops most of their first presence.changed (ephemeral events
// give way first); once the queue has drained they are sent, so the client
// shows every user's presence.
func TestPresenceOfALargeViewArrives(t *testing.T) {
	tracker, err := presence.New(presence.Config{Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tracker.Close)
	e := newEnv(t, func(c *Config) { c.Presence = tracker; c.SendQueue = 8 })
	a := e.user("a")
	others := make([]*tuser, 30)
	for i := range others {
		others[i] = e.user(fmt.Sprintf("u%d", i))
	}
	ws := e.workspace(a, others...)
	ca, _ := e.identify(a, ws)
	ids := make([]string, len(others))
	for i, u := range others {
		ids[i] = u.ID
	}
	ca.send(map[string]any{"op": "presence_sub", "user_ids": ids})
	for _, id := range ids {
		waitPresence(t, ca, id, "offline")
	}
	if counterValue(t, e.reg, "parley_gateway_ephemeral_dropped_total") == 0 {
		t.Fatal("nothing was dropped: the test does not exercise the retry")
	}
}
