package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// resumeSources reads parley_gateway_resume_sources_total by source.
func resumeSources(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "parley_gateway_resume_sources_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// sessionState reads a session's state on its partition.
func (e *env) sessionState(id string) (ok, attached bool, lastS uint64) {
	s := e.gw.registry.get(id)
	if s == nil {
		return false, false, 0
	}
	done := make(chan struct{})
	s.p.post(func() {
		// A session is in the registry (and its client has ready) before
		// its partition places it: until then it is not there yet.
		_, placed := s.p.sessions[s]
		ok, attached, lastS = placed && !s.removed, s.c != nil, s.lastS
		close(done)
	})
	<-done
	return ok, attached, lastS
}

func (e *env) waitDetached(id string) {
	e.t.Helper()
	waitUntil(e.t, "session detached", func() bool {
		ok, attached, _ := e.sessionState(id)
		return ok && !attached
	})
}

// TestResumeAfterDrop: after an abrupt drop, a resume replays exactly the
// 20 events the client missed, then says resumed, then goes on live.
func TestResumeAfterDrop(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("a")
	ws := e.workspace(a)
	general := generalOf(t, e, a, ws)
	c, ready := e.identify(a, ws)
	for i := 0; i < 5; i++ {
		e.post(a, general, fmt.Sprintf("before %d", i))
	}
	got := c.waitEvents(parley.EventMessageCreated, 5)
	seq := got[4].S
	c.drop()
	e.waitDetached(ready.SessionID)
	for i := 0; i < 20; i++ {
		e.post(a, general, fmt.Sprintf("missed %d", i))
	}
	waitUntil(t, "events queued", func() bool {
		_, _, lastS := e.sessionState(ready.SessionID)
		return lastS == seq+20
	})

	c2 := e.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": seq})
	for i := 0; i < 20; i++ {
		f := c2.next()
		if f.Op != "event" || f.S != seq+uint64(i)+1 {
			t.Fatalf("replay %d: %+v", i, f)
		}
		if d := f.data(t); d.Message == nil || d.Message.Text != fmt.Sprintf("missed %d", i) {
			t.Fatalf("replay %d: %s", i, f.D)
		}
	}
	if f := c2.next(); f.Op != "resumed" || f.Replayed != 20 {
		t.Fatalf("after the replay: %+v", f)
	}
	// The resume is counted once attach has returned, which is after the
	// "resumed" frame left: wait for the count, then check it is the only one.
	waitUntil(t, "the resume counted", func() bool { return resumeSources(t, e.reg)["buffer"] == 1 })
	if src := resumeSources(t, e.reg); src["buffer"] != 1 || src["handover"] != 0 || src["sync"] != 0 {
		t.Fatalf("resume sources %v, want one from the buffer", src)
	}
	e.post(a, general, "live")
	f := c2.nextOp("event")
	if f.S != seq+21 || f.data(t).Message.Text != "live" {
		t.Fatalf("live event %+v", f)
	}
	checkChannelOrder(t, c2, general.ID)
}

// TestResumeTakesOver: a resume that arrives while the old socket is still
// open takes the session; the old socket is closed.
func TestResumeTakesOver(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("a")
	ws := e.workspace(a)
	general := generalOf(t, e, a, ws)
	old, ready := e.identify(a, ws)
	e.post(a, general, "one")
	old.waitEvents(parley.EventMessageCreated, 1)

	c := e.connect()
	c.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 1})
	if f := c.next(); f.Op != "resumed" || f.Replayed != 0 {
		t.Fatalf("resume answer %+v", f)
	}
	if code := old.closeCode(); code != parley.CloseSessionTimeout {
		t.Fatalf("old socket closed %d, want 4009", code)
	}
	e.post(a, general, "two")
	if f := c.nextOp("event"); f.S != 2 || f.data(t).Message.Text != "two" {
		t.Fatalf("after takeover %+v", f)
	}
}

// TestResumeRefused: outside the window, an unknown session, another
// user's session → invalid_session (the socket stays for an identify); a
// seq ahead of the session → 4007; a bad token → 4004.
func TestResumeRefused(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ResumeWindow = 300 * time.Millisecond })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)

	// Ahead of what was sent.
	c, ready := e.identify(a, ws)
	e.post(a, general, "one")
	c.waitEvents(parley.EventMessageCreated, 1)
	c2 := e.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 5})
	if code := c2.closeCode(); code != parley.CloseInvalidSeq {
		t.Fatalf("seq ahead: close %d, want 4007", code)
	}

	// Bad token.
	c3 := e.connect()
	c3.send(map[string]any{"op": "resume", "token": "nope", "session_id": ready.SessionID, "seq": 1})
	if code := c3.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("bad token: close %d, want 4004", code)
	}

	// Another user's token.
	c4 := e.connect()
	c4.send(map[string]any{"op": "resume", "token": b.token, "session_id": ready.SessionID, "seq": 1})
	if f := c4.next(); f.Op != "invalid_session" {
		t.Fatalf("other user's resume: %+v", f)
	}

	// Outside the window: the session is gone; the socket may identify.
	c.drop()
	waitUntil(t, "session expired", func() bool { return e.gw.registry.get(ready.SessionID) == nil })
	c5 := e.connect()
	c5.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 1})
	if f := c5.next(); f.Op != "invalid_session" || f.Reason != "unknown_session" {
		t.Fatalf("expired resume: %+v", f)
	}
	c5.send(map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
	if f := c5.next(); f.Op != "ready" {
		t.Fatalf("identify after invalid_session: %+v", f)
	}
	// Nothing is left subscribed for the expired session: user, workspace
	// and #general are held by c5's session only.
	waitUntil(t, "refs", func() bool { return e.gw.hub.refs("ch."+general.ID) == 1 })
}

// TestHeartbeatTimeout: a connection that stops heartbeating is closed
// with 4009 and its session stays resumable.
func TestHeartbeatTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.HeartbeatInterval = 200 * time.Millisecond })
	a := e.user("a")
	ws := e.workspace(a)
	c, ready := e.identify(a, ws)
	if code := c.closeCode(); code != parley.CloseSessionTimeout {
		t.Fatalf("close %d, want 4009", code)
	}
	if e.gw.registry.get(ready.SessionID) == nil {
		t.Fatal("session gone after a heartbeat timeout")
	}
}

// TestResumeOnAnotherNode: a session dropped on node n1 resumes on n2,
// which gets it handed over: the missed events are replayed, then live
// delivery goes on from n2, and n1 has let the session go. A session whose
// node does not answer is invalid_session.
func TestResumeOnAnotherNode(t *testing.T) {
	e := newEnv(t, nil)
	n2 := e.node("n2")
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	priv := e.channel(ws, a, "priv", parley.KindPrivate)
	c, ready := e.identify(a, ws)
	e.post(a, general, "one")
	e.post(a, priv, "p1")
	seq := c.waitEvents(parley.EventMessageCreated, 2)[1].S
	c.drop()
	e.waitDetached(ready.SessionID)
	for i := 0; i < 5; i++ {
		e.post(b, general, fmt.Sprintf("missed %d", i))
	}
	waitUntil(t, "events queued", func() bool {
		_, _, lastS := e.sessionState(ready.SessionID)
		return lastS == seq+5
	})

	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": seq})
	for i := 0; i < 5; i++ {
		f := c2.next()
		if f.Op != "event" || f.S != seq+uint64(i)+1 || f.data(t).Message.Text != fmt.Sprintf("missed %d", i) {
			t.Fatalf("replay %d: %+v %s", i, f, f.D)
		}
	}
	if f := c2.next(); f.Op != "resumed" || f.Replayed != 5 {
		t.Fatalf("after the replay: %+v", f)
	}
	if e.gw.registry.get(ready.SessionID) != nil {
		t.Fatal("n1 still holds the session")
	}
	waitUntil(t, "n2's resume counted", func() bool { return resumeSources(t, n2.reg)["handover"] == 1 })
	if src := resumeSources(t, n2.reg); src["handover"] != 1 || src["buffer"] != 0 || src["sync"] != 0 {
		t.Fatalf("n2's resume sources %v, want one handover", src)
	}
	e.post(a, priv, "p2")
	e.post(b, general, "live")
	c2.waitEvents(parley.EventMessageCreated, 7)
	checkChannelOrder(t, c2, general.ID)
	checkChannelOrder(t, c2, priv.ID)

	// Dropped again and back on n1: n1 knows where it went and asks n2.
	c2.drop()
	n2.waitDetached(ready.SessionID)
	last := c2.events()[len(c2.events())-1].S
	c3 := e.connect()
	c3.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": last})
	if f := c3.next(); f.Op != "resumed" {
		t.Fatalf("back on n1: %+v", f)
	}

	// A session of a node that is not there.
	c4 := n2.connect()
	c4.send(map[string]any{"op": "resume", "token": a.token, "session_id": "n9.abc", "seq": 0})
	if f := c4.next(); f.Op != "invalid_session" {
		t.Fatalf("dead node: %+v", f)
	}
	if src := resumeSources(t, n2.reg); src["sync"] != 1 {
		t.Fatalf("n2's resume sources %v, want one sent to /sync", src)
	}
	waitUntil(t, "n1's resume counted", func() bool { return resumeSources(t, e.reg)["handover"] == 1 })
	if src := resumeSources(t, e.reg); src["handover"] != 1 {
		t.Fatalf("n1's resume sources %v, want one handover (back from n2)", src)
	}
}
