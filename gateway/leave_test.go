package gateway

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// Leaving and removal while a user has several sessions on one node: the
// sessions leave the channel's index in the middle of the loop that
// delivers the member.left to them.

// nodeWith starts another node like e.node, with its config adjusted.
func (e *env) nodeWith(nodeID string, mutate func(*Config)) *env {
	e.t.Helper()
	n := &env{t: e.t, store: e.store, bus: e.bus, reg: prometheus.NewRegistry()}
	cfg := Config{Store: e.store, Bus: muxlessBus{e.bus, e.bus}, NodeID: nodeID, Registerer: n.reg, Partitions: 2, Logger: quietLogger}
	if mutate != nil {
		mutate(&cfg)
	}
	var err error
	if n.gw, err = New(cfg); err != nil {
		e.t.Fatal(err)
	}
	n.srv = httptest.NewServer(n.gw)
	n.url = "ws://" + n.srv.Listener.Addr().String() + "/api/v1/gateway"
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.gw.Shutdown(ctx)
		n.srv.Close()
	})
	return n
}

func onePartition(c *Config) { c.Partitions = 1 }

// messagesIn returns the texts of the client's message.created events of
// one channel, in the order received.
func messagesIn(t testing.TB, c *client, channelID string) []string {
	return textsOf(t, c.events(), channelID)
}

// textsOf is messagesIn over a list of frames.
func textsOf(t testing.TB, fs []frame, channelID string) []string {
	var out []string
	for _, f := range fs {
		if f.Op != "event" || f.T != parley.EventMessageCreated {
			continue
		}
		if d := f.data(t); d.ChannelID == channelID && d.Message != nil {
			out = append(out, d.Message.Text)
		}
	}
	return out
}

// waitMessages waits until the client has n messages of the channel.
func waitMessages(t testing.TB, c *client, channelID string, n int) []string {
	t.Helper()
	c.waitFor(fmt.Sprintf("%d messages of %s", n, channelID), func() bool {
		return len(textsOf(t, c.frames, channelID)) >= n
	})
	return messagesIn(t, c, channelID)
}

func sameTexts(t *testing.T, who string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s got messages %q, want %q", who, got, want)
	}
}

// TestLeaveWithTwoSessions: a user with two sessions on one partition leaves
// a channel, then is added back and removed by an admin, while the other
// members' sessions are connected and messages flow. The node lives, the
// leaving user's sessions get what came before each removal and nothing
// after, and the others get every message in seq order.
func TestLeaveWithTwoSessions(t *testing.T) {
	e := newEnv(t, onePartition)
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	team := e.channel(ws, a, "team", parley.KindPrivate)
	e.addMembers(a, team, b, c)
	// b's tabs identify first: they come first in the channel's index, so
	// they leave it in the middle of the delivery loop, before a and c.
	b1, _ := e.identify(b, ws)
	b2, _ := e.identify(b, ws)
	ca, _ := e.identify(a, ws)
	cc, _ := e.identify(c, ws)

	var all []string
	post := func(text string) {
		e.post(a, team, text)
		all = append(all, text)
	}
	post("before leave")
	if err := e.store.LeaveChannel(t.Context(), b.ID, team.ID); err != nil {
		t.Fatal(err)
	}
	post("after leave")
	e.addMembers(a, team, b)
	for _, cl := range []*client{b1, b2} {
		cl.waitEvents(parley.EventMemberJoined, 1)
	}
	post("back")
	if err := e.store.RemoveMember(t.Context(), a.ID, team.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	post("after removal")

	for name, cl := range map[string]*client{"a": ca, "c": cc} {
		sameTexts(t, name, waitMessages(t, cl, team.ID, len(all)), all)
		checkChannelOrder(t, cl, team.ID)
	}
	// A marker in a channel b is still in: everything of team before it
	// has reached b's sessions.
	general := generalOf(t, e, a, ws)
	e.post(a, general, "marker")
	for name, cl := range map[string]*client{"b1": b1, "b2": b2} {
		waitMessages(t, cl, general.ID, 1)
		cl.waitEvents(parley.EventMemberLeft, 2)
		sameTexts(t, name, messagesIn(t, cl, team.ID), []string{"before leave", "back"})
		if cl.isClosed() {
			t.Fatalf("%s closed", name)
		}
	}
	waitUntil(t, "refs", func() bool { return e.gw.hub.refs("ch."+team.ID) == 2 })
}

// TestRemovalOnAnotherNode: b has two sessions on node B, beside c; an
// admin on node A removes b. Node B lives and goes on delivering.
func TestRemovalOnAnotherNode(t *testing.T) {
	nodeA := newEnv(t, nil)
	nodeB := nodeA.nodeWith("n2", onePartition)
	a, b, c := nodeA.user("a"), nodeA.user("b"), nodeA.user("c")
	ws := nodeA.workspace(a, b, c)
	team := nodeA.channel(ws, a, "team", parley.KindPrivate)
	nodeA.addMembers(a, team, b, c)
	b1, _ := nodeB.identify(b, ws)
	b2, _ := nodeB.identify(b, ws)
	cc, _ := nodeB.identify(c, ws)
	ca, _ := nodeA.identify(a, ws)

	var all []string
	post := func(text string) {
		nodeA.post(a, team, text)
		all = append(all, text)
	}
	post("before removal")
	if err := nodeA.store.RemoveMember(t.Context(), a.ID, team.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	post("after removal")
	for name, cl := range map[string]*client{"a": ca, "c": cc} {
		sameTexts(t, name, waitMessages(t, cl, team.ID, len(all)), all)
		checkChannelOrder(t, cl, team.ID)
	}
	general := generalOf(t, nodeA, a, ws)
	nodeA.post(a, general, "marker")
	for name, cl := range map[string]*client{"b1": b1, "b2": b2} {
		waitMessages(t, cl, general.ID, 1)
		cl.waitEvents(parley.EventMemberLeft, 1)
		sameTexts(t, name, messagesIn(t, cl, team.ID), []string{"before removal"})
	}
	// Node B still takes sessions.
	cb3, _ := nodeB.identify(b, ws)
	nodeA.post(a, general, "after")
	waitMessages(t, cb3, general.ID, 1)
}

// TestMembershipChurn: several users with several sessions each leave,
// are added back and are removed over and over while messages flow. No
// partition dies; the members who stay get every message in seq order, and
// every session of a churning user gets the channel's events in seq order
// and, once back for good, the last message.
func TestMembershipChurn(t *testing.T) {
	e := newEnv(t, nil)
	const churners, tabs, rounds, posts = 4, 3, 6, 60
	a, w := e.user("a"), e.user("w")
	users := make([]*tuser, churners)
	for i := range users {
		users[i] = e.user(fmt.Sprintf("u%d", i))
	}
	ws := e.workspace(a, append([]*tuser{w}, users...)...)
	team := e.channel(ws, a, "team", parley.KindPrivate)
	e.addMembers(a, team, append([]*tuser{w}, users...)...)
	var clients [][]*client
	for _, u := range users {
		var cs []*client
		for range tabs {
			cl, _ := e.identify(u, ws)
			cs = append(cs, cl)
		}
		clients = append(clients, cs)
	}
	ca, _ := e.identify(a, ws)
	cw1, _ := e.identify(w, ws)
	cw2, _ := e.identify(w, ws)

	ctx := t.Context()
	var wg sync.WaitGroup
	var all []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range posts {
			text := fmt.Sprintf("m%d", i)
			if _, _, err := e.store.PostMessage(ctx, a.ID, team.ID, parley.NewMessage{Text: text}); err != nil {
				t.Error(err)
				return
			}
			all = append(all, text)
		}
	}()
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				var err error
				if (r+i)%2 == 0 {
					err = e.store.LeaveChannel(ctx, u.ID, team.ID)
				} else {
					err = e.store.RemoveMember(ctx, a.ID, team.ID, u.ID)
				}
				if err != nil {
					t.Error(err)
					return
				}
				// Back in at once: the re-add may outrun the removal
				// on the channel's stream (TestRejoinOutrunsRemoval).
				if _, err = e.store.AddMembers(ctx, a.ID, team.ID, []string{u.ID}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	e.post(a, team, "last")
	all = append(all, "last")

	for name, cl := range map[string]*client{"a": ca, "w1": cw1, "w2": cw2} {
		sameTexts(t, name, waitMessages(t, cl, team.ID, len(all)), all)
		checkChannelOrder(t, cl, team.ID)
	}
	for i, cs := range clients {
		for j, cl := range cs {
			cl.waitFor("the last message", func() bool {
				got := textsOf(t, cl.frames, team.ID)
				return len(got) > 0 && got[len(got)-1] == "last"
			})
			if cl.isClosed() {
				t.Fatalf("u%d tab %d closed", i, j)
			}
			checkIncreasingSeq(t, cl, team.ID)
		}
	}
}

// checkIncreasingSeq: the client's events of a channel come in increasing
// seq (with gaps where its user was out of the channel), all its events in
// consecutive s.
func checkIncreasingSeq(t *testing.T, c *client, channelID string) {
	t.Helper()
	var lastSeq int64
	var lastS uint64
	for _, f := range c.events() {
		if f.S != lastS+1 {
			t.Fatalf("s %d after %d", f.S, lastS)
		}
		lastS = f.S
		d := f.data(t)
		if d.ChannelID != channelID || d.Seq == 0 {
			continue
		}
		if d.Seq <= lastSeq {
			t.Fatalf("channel seq %d after %d (%s)", d.Seq, lastSeq, f.T)
		}
		lastSeq = d.Seq
	}
}

// TestRejoinOutrunsRemoval: a user is removed and added back while the
// channel's stream on the node is held up, so both changes arrive on the
// user topic first. The session still leaves at its removal, comes back
// at the re-join, and gets what is posted after it.
func TestRejoinOutrunsRemoval(t *testing.T) {
	nodeA := newEnv(t, nil)
	nodeB := nodeA.nodeWith("n2", onePartition) // one subscription per topic: holding one holds no other
	a, b := nodeA.user("a"), nodeA.user("b")
	ws := nodeA.workspace(a, b)
	team := nodeA.channel(ws, a, "team", parley.KindPrivate)
	nodeA.addMembers(a, team, b)
	// b's session of another workspace gets a user-topic event after the
	// two changes: once it has, the partition has seen them.
	ws2 := nodeA.workspace(a, b)
	side := nodeA.channel(ws2, a, "side", parley.KindPrivate)
	cb, _ := nodeB.identify(b, ws)
	cb2, _ := nodeB.identify(b, ws2)

	gate := make(chan struct{})
	var hold atomic.Bool
	hold.Store(true)
	hook := func(topic string, _ parley.Event) {
		if topic == "ch."+team.ID && hold.Load() {
			<-gate
		}
	}
	nodeB.gw.dispatchHook.Store(&hook)

	nodeA.post(a, team, "before")
	if err := nodeA.store.RemoveMember(t.Context(), a.ID, team.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	nodeA.addMembers(a, team, b)
	nodeA.addMembers(a, side, b)
	cb2.waitEvents(parley.EventMemberJoined, 1)
	hold.Store(false)
	close(gate)

	nodeA.post(a, team, "after rejoin")
	sameTexts(t, "b", waitMessages(t, cb, team.ID, 2), []string{"before", "after rejoin"})
	checkIncreasingSeq(t, cb, team.ID)
	var kinds []string
	for _, f := range cb.events() {
		if d := f.data(t); d.ChannelID == team.ID {
			kinds = append(kinds, f.T)
		}
	}
	want := []string{parley.EventMessageCreated, parley.EventMemberLeft, parley.EventMemberJoined, parley.EventMessageCreated}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("b's events of the channel: %v, want %v", kinds, want)
	}
}
