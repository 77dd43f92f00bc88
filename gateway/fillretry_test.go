package gateway

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"parley"
	"parley/internal/faultproxy"
	"parley/internal/testpg"
	"parley/sqlstore"
)

// A catch-up read must not be the last word on a session's channel. These
// tests put a session behind the node's stream of a quiet channel (it
// follows from seq 0 while the stream began at the channel's last seq, as a
// session does whose position was read before another session's subscribed
// the node) and make its read fail or never answer: the session must get
// every event once the store answers again, although nothing more happens in
// the channel. Before, a failed read was retried only when the partition had
// seen a later seq of the channel, and a read that never answered was never
// asked for again; either left the session behind for good, given nothing
// of the channel, and with no gap for its client to see.

// behindSession puts a detached session on partition p following
// channelID from 0 while the node's stream began at last.
func behindSession(p *partition, owner *tuser, ws *parley.Workspace, channelID string, last int64) *session {
	s := newSession("n1.behind", owner.ID, ws.ID, "", p)
	onPartition(p, func() {
		s.detachedAt = p.now
		p.sessions[s] = struct{}{}
		p.follow(s, channelID, 0, last)
	})
	return s
}

// position returns the session's position in the channel and whether a
// read for it is in flight.
func position(p *partition, s *session, channelID string) (last int64, catching bool) {
	onPartition(p, func() {
		if cp := s.chans[channelID]; cp != nil {
			last, catching = cp.last, cp.catching
		}
	})
	return last, catching
}

// holdsAll reports whether the session's queue holds exactly seqs 1…last
// of the channel, in order.
func holdsAll(t *testing.T, p *partition, s *session, channelID string, last int64) bool {
	ok := false
	onPartition(p, func() {
		var want int64 = 1
		for i := s.ring.first; i <= s.lastS && s.ring.len() > 0; i++ {
			en := s.ring.at(i)
			if en.ev.channelID != channelID || en.ev.seq != want {
				t.Errorf("event %d is %s seq %d, want seq %d", i, en.ev.channelID, en.ev.seq, want)
				return
			}
			want++
		}
		ok = want-1 == last
	})
	return ok
}

// quietChannel makes a channel with n messages and returns it and its
// last seq.
func quietChannel(e *env, n int) (*tuser, *parley.Workspace, *parley.Channel, int64) {
	owner := e.user("owner")
	ws := e.workspace(owner)
	ch := e.channel(ws, owner, "quiet", parley.KindPublic)
	for i := range n {
		e.post(owner, ch, fmt.Sprintf("m%d", i))
	}
	evs, err := e.store.ChannelLog(context.Background(), ch.ID, 0, fillLimit)
	if err != nil || len(evs) == 0 {
		e.t.Fatalf("channel log: %d events, %v", len(evs), err)
	}
	return owner, ws, ch, evs[len(evs)-1].Seq
}

// The database drops every connection (pg_terminate_backend, a link
// reset) while the session's catch-up reads: the read fails, and once the
// database is back the session reads again and gets every event.
// PostgreSQL behind the fault proxy.
func TestFailedCatchUpIsRetried(t *testing.T) {
	u, err := url.Parse(testpg.New(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	e := newEnvOn(t, sqlstore.Config{PostgresURL: u.String()}, nil, nil)
	t.Cleanup(proxy.Heal) // before the env's cleanup closes the store
	owner, ws, ch, last := quietChannel(e, 5)
	p := e.gw.parts[0]

	proxy.ResetAll()
	s := behindSession(p, owner, ws, ch.ID, last)
	waitUntil(t, "the catch-up read to fail", func() bool {
		_, catching := position(p, s, ch.ID)
		return !catching
	})
	if got, _ := position(p, s, ch.ID); got != 0 {
		t.Fatalf("the read went through while the database reset every connection: position %d", got)
	}
	proxy.Heal()
	waitUntil(t, "the session to catch up after the database came back", func() bool {
		return holdsAll(t, p, s, ch.ID, last) || t.Failed()
	})
	if got := counterValue(t, e.reg, "parley_gateway_catchup_retries_total"); got < 1 {
		t.Errorf("parley_gateway_catchup_retries_total = %v, want at least 1", got)
	}
}

// The same with the store guard's answer while its breaker is open
// (EUNAVAILABLE, at once), on SQLite, twice in a row: the session
// reads again with backoff until a read goes through.
func TestFailedCatchUpIsRetriedSQLite(t *testing.T) {
	var gs *logGate
	e := newEnv(t, func(c *Config) {
		gs = newLogGate(c.Store)
		c.Store = gs
	})
	owner, ws, ch, last := quietChannel(e, 5)
	p := e.gw.parts[0]

	gs.failNext(2)
	s := behindSession(p, owner, ws, ch.ID, last)
	waitUntil(t, "the session to catch up after two failed reads", func() bool {
		return holdsAll(t, p, s, ch.ID, last) || t.Failed()
	})
	if got := counterValue(t, e.reg, "parley_gateway_catchup_retries_total"); got != 2 {
		t.Errorf("parley_gateway_catchup_retries_total = %v, want 2", got)
	}
}

// A catch-up read that never answers (a store call stuck past its
// deadline) is asked for again after fillStuck, on a read of its own: the
// session catches up, and the overdue read no longer holds a worker of the
// bounded pool. The real SQLite store behind a gate that holds the first
// read until the test ends.
func TestUnansweredCatchUpIsAskedAgain(t *testing.T) {
	var gs *logGate
	e := newEnv(t, func(c *Config) {
		gs = newLogGate(c.Store)
		c.Store = gs
		c.FillConcurrency = 1
	})
	const stuck = 300 * time.Millisecond
	e.gw.parts[0].env.fillStuck = stuck
	e.gw.parts[0].env.fills.stuck = stuck
	owner, ws, ch, last := quietChannel(e, 5)
	p := e.gw.parts[0]

	gs.hold()
	t.Cleanup(gs.release) // the held read ends with the test
	s := behindSession(p, owner, ws, ch.ID, last)
	<-gs.waiter // the first read is at the gate
	gs.passAfter(1)
	waitUntil(t, "the session to catch up past the unanswered read", func() bool {
		return holdsAll(t, p, s, ch.ID, last) || t.Failed()
	})
	if got := counterValue(t, e.reg, "parley_gateway_catchup_retries_total"); got < 1 {
		t.Errorf("parley_gateway_catchup_retries_total = %v, want at least 1", got)
	}
}
