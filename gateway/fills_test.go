package gateway

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"parley"
)

// logGate is the real store with its ChannelLog held, once hold is
// called, until release, and counted: the reads running at once, the most
// ever, and all of them.
type logGate struct {
	Store

	mu     sync.Mutex
	gate   chan struct{} // nil or closed: reads go through
	now    int
	peak   int
	reads  int
	waiter chan struct{} // signalled when a read arrives at the gate
	// passFrom > 0: reads numbered above it go through while held
	// (passAfter).
	passFrom int
	fails    int // the next reads to fail as behind an open store breaker
}

// failNext makes the next n reads fail as the store guard fails them while
// its breaker is open (EUNAVAILABLE), without reaching the store.
func (g *logGate) failNext(n int) {
	g.mu.Lock()
	g.fails = n
	g.mu.Unlock()
}

// passAfter lets every read after the first n through the held gate: those
// n stay held until release.
func (g *logGate) passAfter(n int) {
	g.mu.Lock()
	g.passFrom = n
	g.mu.Unlock()
}

func newLogGate(s Store) *logGate {
	return &logGate{Store: s, waiter: make(chan struct{}, 1)}
}

func (g *logGate) hold() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *logGate) release() {
	g.mu.Lock()
	close(g.gate)
	g.mu.Unlock()
}

func (g *logGate) ChannelLog(ctx context.Context, channelID string, after int64, limit int) ([]parley.Event, error) {
	g.mu.Lock()
	if g.fails > 0 {
		g.fails--
		g.mu.Unlock()
		return nil, parley.Errorf(parley.EUNAVAILABLE, "the database is failing; try again shortly")
	}
	g.now++
	g.reads++
	g.peak = max(g.peak, g.now)
	gate := g.gate
	if g.passFrom > 0 && g.reads > g.passFrom {
		gate = nil
	}
	g.mu.Unlock()
	select {
	case g.waiter <- struct{}{}:
	default:
	}
	if gate != nil {
		<-gate
	}
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	return g.Store.ChannelLog(ctx, channelID, after, limit)
}

func (g *logGate) counts() (peak, reads int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak, g.reads
}

// fillScene is channels with events in the store and sessions on the
// gateway's partitions that follow them from seq 0 while the node's
// stream is at the channels' last seq: every session must catch up.
type fillScene struct {
	e      *env
	gs     *logGate
	chans  []*parley.Channel
	last   map[string]int64 // channel id → its last seq
	owner  *tuser
	ws     *parley.Workspace
	byPart map[*partition][]*session
}

func newFillScene(t testing.TB, k, channels, messages int) *fillScene {
	return newFillSceneLive(t, k, channels, messages, nil)
}

// newFillSceneLive is newFillScene with a live configuration.
func newFillSceneLive(t testing.TB, k, channels, messages int, live parley.LiveConfigSource) *fillScene {
	var gs *logGate
	e := newEnv(t, func(c *Config) {
		gs = newLogGate(c.Store)
		c.Store = gs
		c.FillConcurrency = k
		c.Live = live
	})
	sc := &fillScene{e: e, last: map[string]int64{}, byPart: map[*partition][]*session{}}
	sc.owner = e.user("owner")
	sc.ws = e.workspace(sc.owner)
	for i := range channels {
		ch := e.channel(sc.ws, sc.owner, fmt.Sprintf("c%d", i), parley.KindPublic)
		for j := range messages {
			e.post(sc.owner, ch, fmt.Sprintf("m%d", j))
		}
		evs, err := e.store.ChannelLog(context.Background(), ch.ID, 0, fillLimit)
		if err != nil || len(evs) == 0 || len(evs) >= fillLimit {
			t.Fatalf("channel log: %d events, %v", len(evs), err)
		}
		sc.chans = append(sc.chans, ch)
		sc.last[ch.ID] = evs[len(evs)-1].Seq
	}
	gs.hold() // from now on reads wait
	sc.gs = gs
	return sc
}

// onPartition runs fn on p's goroutine and waits for it.
func onPartition(p *partition, fn func()) {
	done := make(chan struct{})
	p.post(func() { defer close(done); fn() })
	<-done
}

// fallBehind puts n detached sessions per channel on the partitions, each
// following its channel from seq 0 while the stream is at the last seq:
// each asks for a catch-up on its partition's goroutine.
func (sc *fillScene) fallBehind(n int) {
	parts := sc.e.gw.parts
	now := time.Now().UnixNano()
	follows := map[*session]string{}
	for i, ch := range sc.chans {
		for j := range n {
			p := parts[j%len(parts)]
			s := newSession(fmt.Sprintf("n1.fill%d-%d", i, j), sc.owner.ID, sc.ws.ID, "", p)
			s.detachedAt = now
			follows[s] = ch.ID
			sc.byPart[p] = append(sc.byPart[p], s)
		}
	}
	for p, ss := range sc.byPart {
		onPartition(p, func() {
			for _, s := range ss {
				p.sessions[s] = struct{}{}
				p.follow(s, follows[s], 0, sc.last[follows[s]])
			}
		})
	}
}

// caughtUp reports how many sessions hold every event of their channel,
// in seq order with no gap and no duplicate; a session holding something
// else fails the test.
func (sc *fillScene) caughtUp(t testing.TB) int {
	done := 0
	for p, ss := range sc.byPart {
		onPartition(p, func() {
			for _, s := range ss {
				for chID, cp := range s.chans {
					if cp.catching || cp.last < sc.last[chID] {
						continue
					}
					var want int64 = 1
					for i := s.ring.first; i <= s.lastS; i++ {
						en := s.ring.at(i)
						if en.ev.channelID != chID || en.ev.seq != want {
							t.Errorf("session %s: event %d is %s seq %d, want seq %d", s.id, i, en.ev.channelID, en.ev.seq, want)
							return
						}
						want++
					}
					if want-1 != sc.last[chID] {
						t.Errorf("session %s: %d events, want %d", s.id, want-1, sc.last[chID])
						return
					}
					done++
				}
			}
		})
	}
	return done
}

// Many sessions of the node fall behind several channels at once: the
// store sees one read per channel, never more than FillConcurrency at a
// time, and every session gets every event of its channel in order.
func TestFillsSharedAndBounded(t *testing.T) {
	const k, channels, perChannel = 2, 5, 200
	sc := newFillScene(t, k, channels, 3)
	sc.fallBehind(perChannel)
	// Every session has asked; the reads wait at the gate.
	waitUntil(t, "reads at the gate", func() bool {
		peak, _ := sc.gs.counts()
		return peak >= k
	})
	sc.gs.release()
	waitUntil(t, "every session caught up", func() bool {
		return sc.caughtUp(t) == channels*perChannel || t.Failed()
	})
	peak, reads := sc.gs.counts()
	t.Logf("%d sessions, %d store reads, peak %d at once", channels*perChannel, reads, peak)
	if peak > k {
		t.Errorf("%d catch-up reads at once, want at most %d", peak, k)
	}
	if reads != channels {
		t.Errorf("%d catch-up reads for %d channels", reads, channels)
	}
	if got := counterValue(t, sc.e.reg, "parley_gateway_catchup_reads_total"); got != float64(reads) {
		t.Errorf("parley_gateway_catchup_reads_total = %v, want %d", got, reads)
	}
	if got := counterValue(t, sc.e.reg, "parley_gateway_session_catchups_total"); got != channels*perChannel {
		t.Errorf("parley_gateway_session_catchups_total = %v, want %d", got, channels*perChannel)
	}
}

// TestFillLimitIsLive: the live key gateway_fill_concurrency, when set,
// bounds the reads instead of the node's flag.
func TestFillLimitIsLive(t *testing.T) {
	const flag, live, channels, perChannel = 4, 1, 4, 20
	lc := parley.DefaultLiveConfig()
	lc.GatewayFillConcurrency = live
	sc := newFillSceneLive(t, flag, channels, 3, parley.StaticConfig(lc))
	sc.fallBehind(perChannel)
	waitUntil(t, "a read at the gate", func() bool {
		peak, _ := sc.gs.counts()
		return peak >= live
	})
	sc.gs.release()
	waitUntil(t, "every session caught up", func() bool {
		return sc.caughtUp(t) == channels*perChannel || t.Failed()
	})
	if peak, reads := sc.gs.counts(); peak != live || reads != channels {
		t.Fatalf("peak %d reads at once, %d reads; want %d at once (the live key, not the flag's %d), %d reads", peak, reads, live, flag, channels)
	}
}

// BenchmarkFillCatchUp5000 has 5,000 sessions of one node fall behind one
// channel at once and reports the store reads and the goroutines the
// catch-up added while its reads waited.
func BenchmarkFillCatchUp5000(b *testing.B) {
	const sessions = 5000
	for range b.N {
		b.StopTimer()
		sc := newFillScene(b, DefaultFillConcurrency, 1, 20)
		base := runtime.NumGoroutine()
		b.StartTimer()
		sc.fallBehind(sessions)
		<-sc.gs.waiter
		extra := runtime.NumGoroutine() - base
		sc.gs.release()
		waitUntil(b, "every session caught up", func() bool { return sc.caughtUp(b) == sessions })
		b.StopTimer()
		peak, reads := sc.gs.counts()
		b.ReportMetric(float64(reads), "store-reads")
		b.ReportMetric(float64(peak), "peak-reads")
		b.ReportMetric(float64(extra), "extra-goroutines")
	}
}
