package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"parley"
)

// TestOrderingConcurrentPosters: 8 posters write into one channel through
// the store at once; every session sees the channel's events in seq order
// with no gaps or duplicates, and its own s runs 1, 2, 3….
func TestOrderingConcurrentPosters(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	ch := e.channel(ws, a, "busy", parley.KindPublic)
	e.addMembers(a, ch, b)
	ca, _ := e.identify(a, ws)
	cb, _ := e.identify(b, ws)

	const posters, each = 8, 25
	var wg sync.WaitGroup
	for p := 0; p < posters; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				u := a
				if i%2 == 1 {
					u = b
				}
				if _, _, err := e.store.PostMessage(context.Background(), u.ID, ch.ID,
					parley.NewMessage{Text: fmt.Sprintf("p%d-%d", p, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range []*client{ca, cb} {
		evs := c.waitEvents(parley.EventMessageCreated, posters*each)
		checkChannelOrder(t, c, ch.ID)
		if len(evs) != posters*each {
			t.Fatalf("%d message events, want %d", len(evs), posters*each)
		}
	}
}

// checkChannelOrder: the client's events of one channel have consecutive
// seqs, and all its events consecutive s.
func checkChannelOrder(t *testing.T, c *client, channelID string) {
	t.Helper()
	var lastSeq int64
	var lastS uint64
	for i, f := range c.events() {
		if i == 0 {
			lastS = f.S - 1 // a resumed connection starts after its seq
		}
		if f.S != lastS+1 {
			t.Fatalf("s %d after %d", f.S, lastS)
		}
		lastS = f.S
		d := f.data(t)
		if d.ChannelID != channelID || d.Seq == 0 {
			continue
		}
		if lastSeq != 0 && d.Seq != lastSeq+1 {
			t.Fatalf("channel seq %d after %d (%s)", d.Seq, lastSeq, f.T)
		}
		lastSeq = d.Seq
	}
}

// TestPrivateChannelIsolation: only members get a private channel's events;
// a member who is removed stops getting them at once, and one who is added
// starts with the event that added them.
func TestPrivateChannelIsolation(t *testing.T) {
	e := newEnv(t, nil)
	a, b, x := e.user("a"), e.user("b"), e.user("x")
	ws := e.workspace(a, b, x)
	priv := e.channel(ws, a, "secret", parley.KindPrivate)
	e.addMembers(a, priv, b)
	ca, _ := e.identify(a, ws)
	cb, _ := e.identify(b, ws)
	cx, _ := e.identify(x, ws)

	e.post(a, priv, "one")
	ca.waitEvents(parley.EventMessageCreated, 1)
	cb.waitEvents(parley.EventMessageCreated, 1)

	// b is removed: the removal reaches b, then nothing more of the channel.
	if err := e.store.RemoveMember(context.Background(), a.ID, priv.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	cb.waitEvents(parley.EventMemberLeft, 1)
	e.post(a, priv, "two")
	ca.waitEvents(parley.EventMessageCreated, 2)

	// x is added and follows from then on.
	e.addMembers(a, priv, x)
	cx.waitEvents(parley.EventMemberJoined, 1)
	e.post(a, priv, "three")
	got := cx.waitEvents(parley.EventMessageCreated, 1)
	if d := got[0].data(t); d.Message.Text != "three" {
		t.Fatalf("x got %q", d.Message.Text)
	}
	ca.waitEvents(parley.EventMessageCreated, 3)

	// A marker in a channel b is in: everything of priv before it has
	// been delivered, so nothing of priv after the removal reached b.
	general := generalOf(t, e, a, ws)
	e.post(a, general, "marker")
	cb.waitEvents(parley.EventMessageCreated, 2)
	for _, f := range cb.events() {
		d := f.data(t)
		if d.ChannelID == priv.ID && f.T == parley.EventMessageCreated && d.Message.Text != "one" {
			t.Fatalf("b got %q from a channel it left", d.Message.Text)
		}
	}
	for _, f := range cx.events() {
		if d := f.data(t); d.ChannelID == priv.ID && f.T == parley.EventMessageCreated && d.Message.Text == "one" {
			t.Fatal("x got a message from before it joined")
		}
	}
	checkChannelOrder(t, ca, priv.ID)
	// The node's subscription to priv is held by a and x only.
	waitUntil(t, "refs", func() bool { return e.gw.hub.refs("ch."+priv.ID) == 2 })
}

// TestSlowReaderCut: a client that stops reading is cut with 4009 once its
// queue is full, while another session in the channel keeps receiving.
func TestSlowReaderCut(t *testing.T) {
	e := newEnvWith(t, func(c *Config) {
		c.SendQueue = 64
		c.WriteHighWater = 16 << 10
	}, smallSendBuffer)
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	fast, _ := e.identify(a, ws)

	slow := e.rawDial(t)
	slow.send(t, map[string]any{"op": "identify", "token": b.token, "workspace_id": ws.ID})
	waitUntil(t, "slow identified", func() bool { return e.gw.registry.len() == 2 })

	// Posted in rounds that the fast client keeps up with; the slow one
	// falls further behind every round.
	big := strings.Repeat("x", 4000)
	const rounds, each = 20, 20
	for r := 1; r <= rounds; r++ {
		for i := 0; i < each; i++ {
			e.post(a, general, big)
		}
		fast.waitEvents(parley.EventMessageCreated, r*each)
	}
	checkChannelOrder(t, fast, general.ID)
	waitUntil(t, "slow consumer cut", func() bool { return counterValue(t, e.reg, "parley_gateway_slow_consumer_closes_total") == 1 })
	if fast.isClosed() {
		t.Fatal("the fast client was closed")
	}
}

// TestTyping: typing reaches the channel's other members, not the typer,
// and at most once per interval.
func TestTyping(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TypingInterval = time.Hour })
	a, b, x := e.user("a"), e.user("b"), e.user("x")
	ws := e.workspace(a, b, x)
	priv := e.channel(ws, a, "team", parley.KindPrivate)
	e.addMembers(a, priv, b)
	ca, _ := e.identify(a, ws)
	cb, rb := e.identify(b, ws)
	cx, _ := e.identify(x, ws)
	// Typing goes to the channel's viewers: b has it on screen.
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{priv.ID}})
	e.viewing(rb.SessionID, priv.ID)

	ca.send(map[string]any{"op": "typing", "channel_id": priv.ID})
	ca.send(map[string]any{"op": "typing", "channel_id": priv.ID}) // throttled
	cx.send(map[string]any{"op": "typing", "channel_id": priv.ID}) // not a member
	got := cb.waitEvents(parley.EventTypingStarted, 1)
	if d := got[0].data(t); d.UserID != a.ID || d.ChannelID != priv.ID {
		t.Fatalf("typing %+v", d)
	}
	// Everything before a later durable event has been delivered.
	e.post(a, priv, "after")
	cb.waitEvents(parley.EventMessageCreated, 1)
	ca.waitEvents(parley.EventMessageCreated, 1)
	if n := len(cb.waitEvents(parley.EventTypingStarted, 1)); n != 1 {
		t.Fatalf("b got %d typing events, want 1", n)
	}
	for _, f := range ca.events() {
		if f.T == parley.EventTypingStarted {
			t.Fatal("the typer got its own typing")
		}
	}
	waitUntil(t, "drops counted", func() bool { return counterValue(t, e.reg, "parley_gateway_typing_dropped_total") == 2 })
}

// TestLogoutClosesSockets: revoking a token closes the sockets identified
// with it (4004, within 5 s), and only those.
func TestLogoutClosesSockets(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("a")
	ws := e.workspace(a)
	other := e.login(a.User) // a second login of the same user
	c1, _ := e.identify(a, ws)
	c2, _ := e.identify(a, ws)
	c3, _ := e.identify(other, ws)
	start := time.Now()
	if err := e.store.RevokeSession(context.Background(), a.hash); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client{c1, c2} {
		if code := c.closeCode(); code != parley.CloseAuthFailed {
			t.Fatalf("close %d, want 4004", code)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v", d)
	}
	general := generalOf(t, e, a, ws)
	e.post(other, general, "still here")
	c3.waitEvents(parley.EventMessageCreated, 1)
	waitUntil(t, "sessions gone", func() bool { return e.gw.registry.len() == 1 })
}

// TestShutdownSendsReconnect: Shutdown tells clients to reconnect, closes
// them with 1001 and refuses new upgrades.
func TestShutdownSendsReconnect(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("a")
	ws := e.workspace(a)
	c, _ := e.identify(a, ws)
	idle := e.connect()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{c, idle} {
		f := cl.nextOp("reconnect")
		if f.Reason != "shutdown" || f.RetryAfterMS < 0 || f.RetryAfterMS > 5000 {
			t.Fatalf("reconnect %+v", f)
		}
		if code := cl.closeCode(); code != parley.CloseGoingAway {
			t.Fatalf("close %d, want 1001", code)
		}
	}
	if _, _, err := e.dial(nil); err == nil {
		t.Fatal("upgrade accepted after shutdown")
	}
}

// TestWorkspaceIsolation: a session is for one workspace; what its user
// does in another workspace (on the same user topic) does not reach it.
func TestWorkspaceIsolation(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.user("a"), e.user("b")
	ws1 := e.workspace(a)
	ws2 := e.workspace(b, a)
	c, _ := e.identify(a, ws1)
	other := e.channel(ws2, b, "elsewhere", parley.KindPrivate)
	e.addMembers(b, other, a)
	e.post(b, other, "not for ws1")
	e.post(a, generalOf(t, e, a, ws1), "marker")
	c.waitEvents(parley.EventMessageCreated, 1)
	for _, f := range c.events() {
		if d := f.data(t); d.ChannelID == other.ID {
			t.Fatalf("ws1 session got %s of a ws2 channel", f.T)
		}
	}
	waitUntil(t, "no subscription", func() bool { return e.gw.hub.refs("ch."+other.ID) == 0 })
}
