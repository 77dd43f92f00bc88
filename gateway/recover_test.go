package gateway

import (
	"bytes"
	"sync/atomic"
	"testing"

	"parley"
)

// TestPanicInDeliveryIsContained: a panic while an event is delivered to
// one session is recovered on the partition. The node lives, the panic is
// counted, that session's socket is closed with a resumable 4009 and its
// resume loses no event; the other sessions of the partition get every
// event, the one that panicked included.
func TestPanicInDeliveryIsContained(t *testing.T) {
	e := newEnv(t, onePartition)
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	team := e.channel(ws, a, "team", parley.KindPublic)
	e.addMembers(a, team, b, c)
	cb, ready := e.identify(b, ws)
	ca, _ := e.identify(a, ws)
	cc, _ := e.identify(c, ws)

	var fired atomic.Bool
	hook := func(sessionID string, ev *event) {
		if sessionID == ready.SessionID && bytes.Contains(ev.tail, []byte(`"boom"`)) && fired.CompareAndSwap(false, true) {
			panic("injected by the test")
		}
	}
	e.gw.deliverHook.Store(&hook)

	e.post(a, team, "one")
	got := cb.waitEvents(parley.EventMessageCreated, 1)
	seq := got[0].S
	e.post(a, team, "boom")
	if code := cb.closeCode(); code != parley.CloseSessionTimeout {
		t.Fatalf("victim closed with %d, want %d", code, parley.CloseSessionTimeout)
	}
	if !fired.Load() {
		t.Fatal("the hook never panicked")
	}
	if n := counterValue(t, e.reg, "parley_panics_total"); n != 1 {
		t.Fatalf("parley_panics_total = %v, want 1", n)
	}
	e.post(a, team, "two")
	for name, cl := range map[string]*client{"a": ca, "c": cc} {
		sameTexts(t, name, waitMessages(t, cl, team.ID, 3), []string{"one", "boom", "two"})
		checkChannelOrder(t, cl, team.ID)
	}
	if len(messagesIn(t, cb, team.ID)) != 1 {
		t.Fatalf("victim got %q before its close", messagesIn(t, cb, team.ID))
	}

	// The victim resumes from the last s it got: nothing is lost.
	e.waitDetached(ready.SessionID)
	cb2 := e.connect()
	cb2.send(map[string]any{"op": "resume", "token": b.token, "session_id": ready.SessionID, "seq": seq})
	cb2.nextOp("resumed")
	e.post(a, team, "three")
	sameTexts(t, "b after resume", waitMessages(t, cb2, team.ID, 3), []string{"boom", "two", "three"})
	checkChannelOrder(t, cb2, team.ID)
	sameTexts(t, "c", waitMessages(t, cc, team.ID, 4), []string{"one", "boom", "two", "three"})
	if n := counterValue(t, e.reg, "parley_panics_total"); n != 1 {
		t.Fatalf("parley_panics_total = %v after the resume, want 1", n)
	}
}

// TestPanicInBusCallbackIsContained: a panic while the hub hands a
// channel's event to the partitions is recovered on the bus's goroutine.
// The node lives, the panic is counted, the channel's local sessions are
// closed with 4009 and their resumes bring the event that was lost.
func TestPanicInBusCallbackIsContained(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	team := e.channel(ws, a, "team", parley.KindPublic)
	e.addMembers(a, team, b)
	ca, readyA := e.identify(a, ws)
	cb, readyB := e.identify(b, ws)

	var fired atomic.Bool
	hook := func(topic string, ev parley.Event) {
		if topic == "ch."+team.ID && bytes.Contains(ev.Data, []byte(`"boom"`)) && fired.CompareAndSwap(false, true) {
			panic("injected by the test")
		}
	}
	e.gw.dispatchHook.Store(&hook)

	e.post(a, team, "one")
	seqs := map[string]uint64{}
	for name, cl := range map[string]*client{"a": ca, "b": cb} {
		seqs[name] = cl.waitEvents(parley.EventMessageCreated, 1)[0].S
	}
	e.post(a, team, "boom")
	for name, cl := range map[string]*client{"a": ca, "b": cb} {
		if code := cl.closeCode(); code != parley.CloseSessionTimeout {
			t.Fatalf("%s closed with %d, want %d", name, code, parley.CloseSessionTimeout)
		}
	}
	if n := counterValue(t, e.reg, "parley_panics_total"); n != 1 {
		t.Fatalf("parley_panics_total = %v, want 1", n)
	}
	type victim struct {
		name  string
		u     *tuser
		ready frame
	}
	// In this order: b's resume replays what a's brought while b was away.
	for _, r := range []victim{{"a", a, readyA}, {"b", b, readyB}} {
		name := r.name
		e.waitDetached(r.ready.SessionID)
		cl := e.connect()
		cl.send(map[string]any{"op": "resume", "token": r.u.token, "session_id": r.ready.SessionID, "seq": seqs[name]})
		cl.nextOp("resumed")
		e.post(a, team, "after "+name)
		want := []string{"boom", "after a"}
		if name == "b" {
			want = append(want, "after b")
		}
		sameTexts(t, name+" after resume", waitMessages(t, cl, team.ID, len(want)), want)
		checkChannelOrder(t, cl, team.ID)
	}
}

// TestPanicReadingAFrameIsContained: a panic while a client frame is read
// (nbio would swallow it unseen) is counted, closes that connection with a
// resumable code, and the session resumes; other connections are untouched.
func TestPanicReadingAFrameIsContained(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	team := e.channel(ws, a, "team", parley.KindPublic)
	e.addMembers(a, team, b)
	ca, ready := e.identify(a, ws)
	cb, _ := e.identify(b, ws)

	hook := func(data []byte) {
		if bytes.Contains(data, []byte(`"boom"`)) {
			panic("injected by the test")
		}
	}
	e.gw.frameHook.Store(&hook)
	ca.send(map[string]any{"op": "focus", "channel_ids": []string{"boom"}})
	if code := ca.closeCode(); code != parley.CloseUnknownError {
		t.Fatalf("closed with %d, want %d", code, parley.CloseUnknownError)
	}
	if n := counterValue(t, e.reg, "parley_panics_total"); n != 1 {
		t.Fatalf("parley_panics_total = %v, want 1", n)
	}
	e.post(a, team, "after")
	sameTexts(t, "b", waitMessages(t, cb, team.ID, 1), []string{"after"})

	// The session survived its connection: a resume gets what was missed.
	ra := e.connect()
	ra.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 0})
	sameTexts(t, "a after resume", waitMessages(t, ra, team.ID, 1), []string{"after"})
}
