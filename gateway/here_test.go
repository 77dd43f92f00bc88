package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/presence"
)

// TestHereReachesOnlineMembers: with the real presence tracker on the
// embedded bus as the store's snapshot source (as cmd/parley wires it),
// @here reaches a member with a live session, and neither a member who
// never connected nor one whose session ended gets the mention event or a
// stored mention count.
func TestHereReachesOnlineMembers(t *testing.T) {
	var tracker *presence.Tracker
	e := newEnv(t, func(c *Config) {
		var err error
		tracker, err = presence.New(presence.Config{Bus: c.Bus.(presence.Bus), NodeID: c.NodeID, Grace: 50 * time.Millisecond, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tracker.Close)
		c.Presence = tracker
	})
	e.store.SetPresence(tracker) // the one line cmd/parley has too

	a, on, off, gone := e.user("a"), e.user("on"), e.user("off"), e.user("gone")
	ws := e.workspace(a, on, off, gone)
	ch := e.channel(ws, a, "here", parley.KindPublic)
	e.addMembers(a, ch, on, off, gone)

	// What reaches the offline members' topics, in bus order.
	var mu sync.Mutex
	got := map[string][]parley.MentionEventData{}
	for _, u := range []*tuser{off, gone} {
		id := u.ID
		unsub, err := e.bus.Subscribe(parley.TopicUser(id), func(ev parley.Event) {
			if ev.Type != parley.EventMention {
				return
			}
			var d parley.MentionEventData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Errorf("mention payload %s: %v", ev.Data, err)
				return
			}
			mu.Lock()
			got[id] = append(got[id], d)
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unsub() })
	}

	e.identify(a, ws)
	con, _ := e.identify(on, ws)
	cg, _ := e.identify(gone, ws)
	cg.drop()
	waitUntil(t, "on online, gone offline", func() bool {
		return tracker.Status(on.ID) == presence.Online && tracker.Status(gone.ID) == presence.Offline
	})

	here := e.post(a, ch, "@here standup")
	var d parley.MentionEventData
	if err := json.Unmarshal(con.waitEvents(parley.EventMention, 1)[0].D, &d); err != nil || d.Message == nil || d.Message.ID != here.ID {
		t.Fatalf("on's mention = %+v (%v)", d, err)
	}
	counts := func(u *tuser) int64 {
		t.Helper()
		c, err := e.store.GetChannel(context.Background(), u.ID, ch.ID)
		if err != nil {
			t.Fatal(err)
		}
		return c.MentionCount
	}
	if n := counts(on); n != 1 {
		t.Fatalf("on: %d stored mentions, want 1", n)
	}
	for _, u := range []*tuser{off, gone} {
		if n := counts(u); n != 0 {
			t.Fatalf("%s (offline): %d stored mentions, want 0", u.Handle, n)
		}
	}

	// A named mention of each offline member after the @here: once it has
	// arrived, anything the @here sent them would have arrived before it.
	for _, u := range []*tuser{off, gone} {
		marker := e.post(a, ch, "@"+u.Handle+" marker")
		waitUntil(t, u.Handle+"'s marker mention", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got[u.ID]) > 0
		})
		mu.Lock()
		first := got[u.ID][0]
		mu.Unlock()
		if first.Message == nil || first.Message.ID != marker.ID {
			t.Fatalf("%s's first mention event is %+v, want the marker %s (the @here reached them)", u.Handle, first.Message, marker.ID)
		}
		if n := counts(u); n != 1 {
			t.Fatalf("%s: %d stored mentions, want 1 (the marker)", u.Handle, n)
		}
	}
}
