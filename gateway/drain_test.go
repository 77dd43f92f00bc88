package gateway

import (
	"context"
	"testing"
	"time"

	"parley"
)

// TestDrainAnswersHandovers: a node shutting down sends its clients away,
// then, while another node is live, goes on answering handovers: a client
// that comes back on the other node after its retry_after gets its session
// handed over (its missed events replayed), and the drain ends as soon as
// the node holds no session, well before DrainHandover.
func TestDrainAnswersHandovers(t *testing.T) {
	const linger = time.Minute
	e := newEnv(t, func(c *Config) {
		c.DrainHandover = linger
		c.LiveNodes = func() []string { return []string{"n1", "n2"} }
	})
	n2 := e.node("n2")
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	c, ready := e.identify(a, ws)
	e.post(a, general, "one")
	seq := c.waitEvents(parley.EventMessageCreated, 1)[0].S

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*linger)
		defer cancel()
		done <- e.gw.Shutdown(ctx)
	}()
	if f := c.nextOp("reconnect"); f.Reason != "shutdown" {
		t.Fatalf("reconnect %+v", f)
	}
	if code := c.closeCode(); code != parley.CloseGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
	// Every socket of n1 is closed; it still holds the session, follows
	// its channels, and has not stopped.
	waitUntil(t, "n1's sockets closed", func() bool { return len(e.gw.openConns()) == 0 })
	e.post(b, general, "missed while away")
	waitUntil(t, "the missed event queued on n1", func() bool {
		_, _, lastS := e.sessionState(ready.SessionID)
		return lastS == seq+1
	})
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while it held a session", err)
	default:
	}

	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": seq})
	if f := c2.next(); f.Op != "event" || f.S != seq+1 || f.data(t).Message.Text != "missed while away" {
		t.Fatalf("replay: %+v", f)
	}
	if f := c2.next(); f.Op != "resumed" || f.Replayed != 1 {
		t.Fatalf("after the replay: %+v", f)
	}
	// Counted just after resumed goes out.
	waitUntil(t, "the handover counted", func() bool { return resumeSources(t, n2.reg)["handover"] == 1 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= linger {
		t.Fatalf("the drain took %v: it did not end when its last session was handed over", d)
	}
}

// TestDrainWithoutPeersDoesNotLinger: alone in the cluster, a draining
// node has nobody to hand sessions to and stops at once.
func TestDrainWithoutPeersDoesNotLinger(t *testing.T) {
	const linger = time.Minute
	e := newEnv(t, func(c *Config) {
		c.DrainHandover = linger
		c.LiveNodes = func() []string { return []string{"n1"} }
	})
	a := e.user("a")
	ws := e.workspace(a)
	c, _ := e.identify(a, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if code := c.closeCode(); code != parley.CloseGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
}

// TestHandoverAsksLiveNodes: a session handed over from n1 to n2 resumes
// on n3 after n1 has stopped (a rolling restart's next wave): the node
// named in the session id does not answer, so n3 asks the other live
// nodes and n2 hands it over.
func TestHandoverAsksLiveNodes(t *testing.T) {
	live := func(c *Config) { c.LiveNodes = func() []string { return []string{"n1", "n2", "n3"} } }
	e := newEnv(t, nil)
	n2 := e.nodeWith("n2", live)
	n3 := e.nodeWith("n3", live)
	a := e.user("a")
	ws := e.workspace(a)
	c, ready := e.identify(a, ws)
	c.drop()
	e.waitDetached(ready.SessionID)
	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 0})
	if f := c2.next(); f.Op != "resumed" {
		t.Fatalf("resume on n2: %+v", f)
	}
	c2.drop()
	n2.waitDetached(ready.SessionID)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.gw.Shutdown(ctx); err != nil { // n1 stops, its moved notes with it
		t.Fatal(err)
	}
	c3 := n3.connect()
	c3.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 0})
	if f := c3.next(); f.Op != "resumed" {
		t.Fatalf("resume on n3: %+v", f)
	}
	waitUntil(t, "the handover counted", func() bool { return resumeSources(t, n3.reg)["handover"] == 1 })
	if n2.gw.registry.get(ready.SessionID) != nil {
		t.Fatal("n2 still holds the session")
	}
}

// TestDrainLingersWhileSessionsAreTaken: DrainHandover counts from the
// last session taken, not from the drain's start. A node taking a fleet's
// sessions admits them a few at a time, so the last ones come back long
// after the first: the second client here resumes after DrainHandover has
// passed since the drain began (the old deadline), but within it of the
// first one's handover, and is still handed its session.
func TestDrainLingersWhileSessionsAreTaken(t *testing.T) {
	const linger = 8 * time.Second
	e := newEnv(t, func(c *Config) {
		c.DrainHandover = linger
		c.LiveNodes = func() []string { return []string{"n1", "n2"} }
	})
	n2 := e.node("n2")
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	ca, readyA := e.identify(a, ws)
	cb, readyB := e.identify(b, ws)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- e.gw.Shutdown(ctx)
	}()
	ca.nextOp("reconnect")
	cb.nextOp("reconnect")
	waitUntil(t, "n1's sockets closed", func() bool { return len(e.gw.openConns()) == 0 })
	start := time.Now() // the linger began before this

	resume := func(u *tuser, ready frame) {
		t.Helper()
		c := n2.connect()
		c.send(map[string]any{"op": "resume", "token": u.token, "session_id": ready.SessionID, "seq": 0})
		if f := c.nextOp("resumed"); f.Op != "resumed" {
			t.Fatalf("resume on n2: %+v", f)
		}
	}
	// Waiting out a deadline is what this test is about: polled, not slept.
	waitUntil(t, "half the linger gone", func() bool { return time.Since(start) >= linger/2 })
	resume(a, readyA)
	waitUntil(t, "the linger counted from the start gone", func() bool { return time.Since(start) >= linger+linger/8 })
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while sessions were being taken", err)
	default:
	}
	resume(b, readyB)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := resumeSources(t, n2.reg)["handover"]; got != 2 {
		t.Fatalf("handovers %v, want 2", got)
	}
}
