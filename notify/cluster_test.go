package notify_test

import (
	"context"
	"testing"
	"time"

	"parley/internal/bustest"
	"parley/presence"
	"parley/storetest"
)

// TestEmailClusterPresence: two nodes on a real bus (two clustered NATS
// servers), each with its presence tracker; the notifier runs on node 1
// and asks the cluster (presence.Tracker.OnlineUsers). Bob, connected to
// node 2 only and watched by nobody on node 1, gets no email; Ann, offline
// everywhere, gets hers; once Bob's last session on node 2 is gone (after
// the grace), his email goes too.
func TestEmailClusterPresence(t *testing.T) {
	kind := bustest.Kinds()[0] // embedded, clustered: two servers, as two nodes run them
	b1, b2 := kind.Pair(t)
	tracker := func(bus presence.Bus, node string) *presence.Tracker {
		tr, err := presence.New(presence.Config{Bus: bus, NodeID: node, Grace: 200 * time.Millisecond,
			AwayAfter: time.Hour, Heartbeat: 50 * time.Millisecond, NodeExpiry: time.Second, QueryTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	p1, p2 := tracker(b1, "node-1"), tracker(b2, "node-2")

	e := newEnv(t, "sqlite")
	n := newNotifierOnline(t, e, e.st, "node-1", p1.OnlineUsers)
	tm := newTeam(t, e.st)
	storetest.MustPost(t, e.st, tm.ann, tm.ch, "@"+tm.bob.Handle+" can you look?")
	storetest.MustPost(t, e.st, tm.bob, tm.dm, "ann, a word when you are back")

	p2.Connect(tm.bob.ID, "s-bob")
	// Node 1 alone does not see Bob: the old decision emailed him.
	if s := p1.Status(tm.bob.ID); s != presence.Offline {
		t.Fatalf("node 1's own view of bob: %s, want offline (the test needs the local view to miss him)", s)
	}
	// Node 1 must know node 2 before the scan, or it asks nobody.
	waitFor(t, "node 1 to see bob online on node 2", func() bool {
		return len(p1.OnlineUsers(context.Background(), []string{tm.bob.ID})) == 1
	})
	e.clk.Advance(16 * time.Minute)
	if sent, err := n.RunOnce(context.Background()); err != nil || sent != 1 {
		t.Fatalf("RunOnce: %d emails, %v; want 1 (ann's)", sent, err)
	}
	msgs := e.mail.Messages(t)
	if len(msgs) != 1 || len(msgs[0].To) != 1 || msgs[0].To[0].Address != tm.ann.Email {
		t.Fatalf("emails: %+v, want one to ann", msgs)
	}

	p2.Disconnect(tm.bob.ID, "s-bob")
	waitFor(t, "bob to be offline in the cluster", func() bool {
		return len(p1.OnlineUsers(context.Background(), []string{tm.bob.ID})) == 0
	})
	if sent, err := n.RunOnce(context.Background()); err != nil || sent != 1 {
		t.Fatalf("RunOnce after bob left: %d emails, %v; want 1 (bob's)", sent, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
