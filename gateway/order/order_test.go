package order

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
)

// fakeLog is the store's per-channel event log, with a Fetch that records
// its calls and can be made to fail or block.
type fakeLog struct {
	mu     sync.Mutex
	events map[string][]parley.Event // seq i at index i-1; guarded by mu
	calls  []fetchCall               // guarded by mu
	// failures makes that many next Fetch calls fail.
	failures atomic.Int32
	// block, when set, makes Fetch wait for its context.
	block atomic.Bool
}

type fetchCall struct {
	channel string
	after   int64
	limit   int
	at      time.Time
}

func newLog(channels []string, n int) *fakeLog {
	l := &fakeLog{events: map[string][]parley.Event{}}
	for _, ch := range channels {
		for i := 1; i <= n; i++ {
			l.events[ch] = append(l.events[ch], ev(ch, int64(i)))
		}
	}
	return l
}

func ev(ch string, seq int64) parley.Event {
	return parley.Event{WorkspaceID: "W1", ChannelID: ch, Seq: seq, Type: parley.EventMessageCreated,
		Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
}

func (l *fakeLog) Fetch(ctx context.Context, ch string, after int64, limit int) ([]parley.Event, error) {
	l.mu.Lock()
	l.calls = append(l.calls, fetchCall{ch, after, limit, time.Now()})
	l.mu.Unlock()
	if l.block.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if l.failures.Add(-1) >= 0 {
		return nil, errors.New("store unavailable")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	all := l.events[ch]
	if after >= int64(len(all)) {
		return nil, nil
	}
	end := min(int(after)+limit, len(all))
	return slices.Clone(all[after:end]), nil
}

func (l *fakeLog) fetchCalls() []fetchCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// recorder is a Deliver that keeps what it got per channel and fails the
// test if one channel is ever delivered concurrently.
type recorder struct {
	t      testing.TB
	mu     sync.Mutex
	got    map[string][]parley.Event // guarded by mu
	active sync.Map                  // channel → *atomic.Int32
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, got: map[string][]parley.Event{}}
}

func (r *recorder) Deliver(e parley.Event) {
	v, _ := r.active.LoadOrStore(e.ChannelID, new(atomic.Int32))
	n := v.(*atomic.Int32)
	if n.Add(1) != 1 {
		r.t.Errorf("channel %s delivered concurrently", e.ChannelID)
	}
	r.mu.Lock()
	r.got[e.ChannelID] = append(r.got[e.ChannelID], e)
	r.mu.Unlock()
	n.Add(-1)
}

func (r *recorder) seqs(ch string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int64, 0, len(r.got[ch]))
	for _, e := range r.got[ch] {
		out = append(out, e.Seq)
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func start(t testing.TB, cfg Config, l *fakeLog, r *recorder) *Sequencer {
	t.Helper()
	cfg.Fetch = l.Fetch
	cfg.Deliver = r.Deliver
	s := New(cfg)
	t.Cleanup(s.Close)
	return s
}

func TestInOrderIsDeliveredAtOnce(t *testing.T) {
	l, r := newLog([]string{"C"}, 100), newRecorder(t)
	s := start(t, Config{HoldBack: time.Hour}, l, r)
	s.Track("C", 0)
	for i := int64(1); i <= 100; i++ {
		s.Push(ev("C", i))
		if got := r.seqs("C"); len(got) != int(i) {
			t.Fatalf("after pushing %d, %d delivered", i, len(got))
		}
	}
	if got := r.seqs("C"); !slices.Equal(got, seqRange(1, 100)) {
		t.Fatalf("delivered %v", got)
	}
	if pos, ok := s.Position("C"); !ok || pos != 100 {
		t.Fatalf("position %d %v", pos, ok)
	}
	if n := len(l.fetchCalls()); n != 0 {
		t.Fatalf("%d fetches for an in-order stream", n)
	}
}

func TestDuplicatesAreDropped(t *testing.T) {
	l, r := newLog([]string{"C"}, 10), newRecorder(t)
	s := start(t, Config{HoldBack: time.Hour}, l, r)
	s.Track("C", 2) // 1 and 2 were delivered before
	for _, seq := range []int64{1, 3, 3, 2, 5, 5, 4, 4, 3} {
		s.Push(ev("C", seq))
	}
	if got := r.seqs("C"); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("delivered %v", got)
	}
	if got := testutil.ToFloat64(s.m.duplicates); got != 6 {
		t.Fatalf("duplicates = %v, want 6", got)
	}
	if got := testutil.ToFloat64(s.m.heldBack); got != 0 {
		t.Fatalf("held back = %v after the gap closed", got)
	}
}

func TestReorderedClosesWithoutFetch(t *testing.T) {
	l, r := newLog([]string{"C"}, 10), newRecorder(t)
	s := start(t, Config{HoldBack: time.Hour}, l, r)
	s.Track("C", 0)
	for _, seq := range []int64{1, 4, 3, 6} {
		s.Push(ev("C", seq))
	}
	if got := r.seqs("C"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("delivered %v before the gap closed", got)
	}
	if got := testutil.ToFloat64(s.m.heldBack); got != 3 {
		t.Fatalf("held back = %v, want 3", got)
	}
	s.Push(ev("C", 2))
	if got := r.seqs("C"); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("delivered %v", got)
	}
	s.Push(ev("C", 5))
	if got := r.seqs("C"); !slices.Equal(got, seqRange(1, 6)) {
		t.Fatalf("delivered %v", got)
	}
	if n := len(l.fetchCalls()); n != 0 {
		t.Fatalf("%d fetches although the gap closed by itself", n)
	}
	if got := testutil.ToFloat64(s.m.heldBack); got != 0 {
		t.Fatalf("held back = %v", got)
	}
}

func TestLostEventIsFetchedAfterHoldBack(t *testing.T) {
	const holdBack = 50 * time.Millisecond
	l, r := newLog([]string{"C"}, 3), newRecorder(t)
	s := start(t, Config{HoldBack: holdBack}, l, r)
	s.Track("C", 0)
	s.Push(ev("C", 1))
	gapAt := time.Now()
	s.Push(ev("C", 3)) // 2 is lost
	waitFor(t, "1..3", func() bool { return len(r.seqs("C")) == 3 })
	took := time.Since(gapAt)
	if got := r.seqs("C"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("delivered %v", got)
	}
	calls := l.fetchCalls()
	if len(calls) != 1 || calls[0].after != 1 || calls[0].channel != "C" {
		t.Fatalf("fetches %+v, want one after seq 1", calls)
	}
	if waited := calls[0].at.Sub(gapAt); waited < holdBack {
		t.Fatalf("fetched %v after the gap appeared, before the hold-back of %v", waited, holdBack)
	}
	t.Logf("gap filled %v after it appeared (hold-back %v)", took, holdBack)
	if got := testutil.ToFloat64(s.m.gapFills); got != 1 {
		t.Fatalf("gap fills = %v", got)
	}
	if got := testutil.ToFloat64(s.m.filledEvents); got != 1 {
		t.Fatalf("filled events = %v", got)
	}
	waitFor(t, "held-back gauge at 0", func() bool { return testutil.ToFloat64(s.m.heldBack) == 0 })
}

func TestLongGapIsFetchedInPages(t *testing.T) {
	l, r := newLog([]string{"C"}, 1050), newRecorder(t)
	s := start(t, Config{HoldBack: 5 * time.Millisecond, FetchLimit: 100}, l, r)
	s.Track("C", 0)
	s.Push(ev("C", 1050))
	waitFor(t, "1050 events", func() bool { return len(r.seqs("C")) == 1050 })
	if got := r.seqs("C"); !slices.Equal(got, seqRange(1, 1050)) {
		t.Fatalf("not 1..1050 in order")
	}
	var afters []int64
	for _, c := range l.fetchCalls() {
		if c.limit != 100 {
			t.Fatalf("fetch limit %d", c.limit)
		}
		afters = append(afters, c.after)
	}
	if want := []int64{0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}; !slices.Equal(afters, want) {
		t.Fatalf("fetched after %v, want %v", afters, want)
	}
}

func TestOverflowFetchesAtOnce(t *testing.T) {
	l, r := newLog([]string{"C"}, 40), newRecorder(t)
	s := start(t, Config{HoldBack: time.Hour, MaxHeld: 8}, l, r)
	s.Track("C", 0)
	s.Push(ev("C", 1))
	for seq := int64(20); seq <= 40; seq++ {
		s.Push(ev("C", seq))
	}
	// An hour of hold-back: only the overflow can have started the fill.
	waitFor(t, "1..40", func() bool { return len(r.seqs("C")) == 40 })
	if got := r.seqs("C"); !slices.Equal(got, seqRange(1, 40)) {
		t.Fatalf("delivered %v", got)
	}
	waitFor(t, "held-back gauge at 0", func() bool { return testutil.ToFloat64(s.m.heldBack) == 0 })
}

func TestCatchUpFetchesToTheEnd(t *testing.T) {
	l, r := newLog([]string{"C"}, 450), newRecorder(t)
	s := start(t, Config{HoldBack: time.Hour, FetchLimit: 100}, l, r)
	s.Track("C", 10)
	s.CatchUp("C")
	waitFor(t, "11..450", func() bool { return len(r.seqs("C")) == 440 })
	if got := r.seqs("C"); !slices.Equal(got, seqRange(11, 450)) {
		t.Fatalf("delivered %v", got)
	}
	s.Push(ev("C", 300)) // a late copy from the bus
	s.Push(ev("C", 451))
	if got := r.seqs("C"); len(got) != 441 || got[440] != 451 {
		t.Fatalf("after catch-up: %d delivered, last %d", len(got), got[len(got)-1])
	}
	if got := testutil.ToFloat64(s.m.duplicates); got != 1 {
		t.Fatalf("duplicates = %v", got)
	}
	s.CatchUp("UNTRACKED") // no effect, no panic
}

func TestEphemeralAndUntrackedEvents(t *testing.T) {
	l, r := newLog([]string{"C"}, 10), newRecorder(t)
	s := start(t, Config{HoldBack: time.Hour}, l, r)
	s.Track("C", 0)
	typing := parley.Event{ChannelID: "C", Type: "typing.started"}
	s.Push(ev("OTHER", 1))
	s.Push(ev("C", 3)) // held
	s.Push(typing)
	if got := r.seqs("C"); !slices.Equal(got, []int64{0}) {
		t.Fatalf("delivered %v, want the ephemeral event past the held one", got)
	}
	if got := r.seqs("OTHER"); len(got) != 0 {
		t.Fatalf("untracked channel delivered: %v", got)
	}
	if _, ok := s.Position("OTHER"); ok {
		t.Fatal("untracked channel has a position")
	}
}

func TestTrackTwiceKeepsPosition(t *testing.T) {
	l, r := newLog([]string{"C"}, 10), newRecorder(t)
	s := start(t, Config{HoldBack: time.Hour}, l, r)
	s.Track("C", 5)
	s.Push(ev("C", 6))
	s.Track("C", 0)
	if pos, _ := s.Position("C"); pos != 6 {
		t.Fatalf("position %d after a second Track", pos)
	}
}

func TestFetchErrorsThenRecovery(t *testing.T) {
	l, r := newLog([]string{"C"}, 20), newRecorder(t)
	l.failures.Store(3)
	s := start(t, Config{HoldBack: 5 * time.Millisecond, FetchRetries: 4, RetryBackoff: time.Millisecond}, l, r)
	s.Track("C", 0)
	s.Push(ev("C", 1))
	s.Push(ev("C", 20))
	waitFor(t, "1..20", func() bool { return len(r.seqs("C")) == 20 })
	if got := r.seqs("C"); !slices.Equal(got, seqRange(1, 20)) {
		t.Fatalf("delivered %v", got)
	}
	if got := testutil.ToFloat64(s.m.fetchErrors); got != 3 {
		t.Fatalf("fetch errors = %v", got)
	}
	if n := len(l.fetchCalls()); n != 4 {
		t.Fatalf("%d fetches, want 3 failed and 1 good", n)
	}
}

func TestFetchGivesUpThenRetriesLater(t *testing.T) {
	l, r := newLog([]string{"C"}, 5), newRecorder(t)
	l.failures.Store(5)
	s := start(t, Config{HoldBack: 5 * time.Millisecond, FetchRetries: 1,
		RetryBackoff: time.Millisecond, RetryPause: 20 * time.Millisecond}, l, r)
	s.Track("C", 0)
	s.Push(ev("C", 5))
	waitFor(t, "1..5", func() bool { return len(r.seqs("C")) == 5 })
	if got := r.seqs("C"); !slices.Equal(got, seqRange(1, 5)) {
		t.Fatalf("delivered %v", got)
	}
	// Two attempts per round: rounds of (fail, fail), (fail, fail), (fail, ok).
	calls := l.fetchCalls()
	if len(calls) != 6 {
		t.Fatalf("%d fetches, want 6", len(calls))
	}
	if pause := calls[2].at.Sub(calls[1].at); pause < 20*time.Millisecond {
		t.Fatalf("the next round came %v after giving up, before the retry pause", pause)
	}
}

func TestNotFoundIsNotRetried(t *testing.T) {
	r := newRecorder(t)
	var calls atomic.Int32
	s := New(Config{
		HoldBack: time.Millisecond,
		Fetch: func(context.Context, string, int64, int) ([]parley.Event, error) {
			calls.Add(1)
			return nil, parley.Errorf(parley.ENOTFOUND, "channel not found")
		},
		Deliver: r.Deliver,
	})
	defer s.Close()
	s.Track("C", 0)
	s.Push(ev("C", 2))
	waitFor(t, "a fetch", func() bool { return calls.Load() == 1 })
	waitFor(t, "the fill to end", func() bool {
		c := s.lookup("C")
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.filling && c.timer == nil
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d fetches of a deleted channel", n)
	}
}

func TestUntrackCancelsFillAndTimer(t *testing.T) {
	base := runtime.NumGoroutine()
	l, r := newLog([]string{"A", "B"}, 10), newRecorder(t)
	s := New(Config{Fetch: l.Fetch, Deliver: r.Deliver, HoldBack: time.Millisecond})
	s.Track("A", 0)
	s.Track("B", 0)
	l.block.Store(true)
	s.Push(ev("A", 3)) // timer, then a fetch that blocks
	waitFor(t, "a blocked fetch", func() bool { return len(l.fetchCalls()) == 1 })
	s.Push(ev("B", 9))
	s.Untrack("A")
	if _, ok := s.Position("A"); ok {
		t.Fatal("untracked channel still has a position")
	}
	s.Push(ev("A", 1))
	if got := r.seqs("A"); len(got) != 0 {
		t.Fatalf("untracked channel delivered %v", got)
	}
	s.Close() // B's timer or fetch is under way: Close must end it
	if got := testutil.ToFloat64(s.m.heldBack); got != 0 {
		t.Fatalf("held back = %v after Close", got)
	}
	s.Push(ev("B", 1))
	s.Track("B", 0)
	if _, ok := s.Position("B"); ok {
		t.Fatal("Track worked after Close")
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
}

func TestDeliverMayCallBack(t *testing.T) {
	l := newLog([]string{"C"}, 10)
	var s *Sequencer
	var got []int64
	s = New(Config{Fetch: l.Fetch, HoldBack: time.Hour, Deliver: func(e parley.Event) {
		got = append(got, e.Seq)
		if e.Seq == 2 {
			s.Push(ev("C", 3)) // queued behind this call, delivered after it
			if pos, _ := s.Position("C"); pos != 3 {
				t.Errorf("position %d", pos)
			}
		}
		if e.Seq == 3 {
			s.Untrack("C")
		}
	}})
	defer s.Close()
	s.Track("C", 0)
	s.Push(ev("C", 1))
	s.Push(ev("C", 2))
	s.Push(ev("C", 4))
	if !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("delivered %v", got)
	}
}

// TestConcurrentPushers pushes several channels' events from 8 goroutines,
// reordered, duplicated and with some lost, and checks that every channel
// is delivered exactly 1..N in order.
func TestConcurrentPushers(t *testing.T) {
	const (
		n        = 2000
		pushers  = 8
		window   = 64 // how far an event may move from its place
		lossRate = 0.05
		dupRate  = 0.10
	)
	channels := []string{"C1", "C2", "C3", "C4", "C5"}
	base := runtime.NumGoroutine()
	l, r := newLog(channels, n), newRecorder(t)
	reg := prometheus.NewRegistry()
	s := New(Config{Fetch: l.Fetch, Deliver: r.Deliver, HoldBack: 20 * time.Millisecond,
		FetchLimit: 50, MaxHeld: 256, Registerer: reg})
	for _, ch := range channels {
		s.Track(ch, 0)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var stream []parley.Event
	for seq := int64(1); seq <= n; seq++ {
		for _, ch := range channels {
			p := rng.Float64()
			switch {
			case p < lossRate && seq != n: // the last one always comes: it shows the gap
			case p < lossRate+dupRate:
				stream = append(stream, ev(ch, seq), ev(ch, seq))
			default:
				stream = append(stream, ev(ch, seq))
			}
		}
		if seq%100 == 0 {
			stream = append(stream, parley.Event{ChannelID: channels[0], Type: "typing.started"})
		}
	}
	for i := range stream { // local shuffle: each event moves at most window places
		j := min(i+rng.IntN(window), len(stream)-1)
		stream[i], stream[j] = stream[j], stream[i]
	}

	var wg sync.WaitGroup
	for p := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < len(stream); i += pushers {
				s.Push(stream[i])
			}
		}()
	}
	wg.Wait()
	for _, ch := range channels {
		waitFor(t, ch+" complete", func() bool {
			var durable int
			for _, seq := range r.seqs(ch) {
				if seq != 0 {
					durable++
				}
			}
			return durable >= n
		})
	}
	for _, ch := range channels {
		var durable []int64
		for _, seq := range r.seqs(ch) {
			if seq != 0 {
				durable = append(durable, seq)
			}
		}
		if !slices.Equal(durable, seqRange(1, n)) {
			t.Fatalf("%s: %d delivered, not exactly 1..%d in order", ch, len(durable), n)
		}
	}
	if typing := len(r.seqs(channels[0])) - n; typing != n/100 {
		t.Fatalf("%d ephemeral events delivered, want %d", typing, n/100)
	}
	s.Close()
	fills, _ := testutil.GatherAndCount(reg, "parley_gateway_gap_fills_total")
	t.Logf("%d fetches, %v gap fills, %v events from the store, %v duplicates (metric registered: %d)",
		len(l.fetchCalls()), testutil.ToFloat64(s.m.gapFills), testutil.ToFloat64(s.m.filledEvents),
		testutil.ToFloat64(s.m.duplicates), fills)
	if testutil.ToFloat64(s.m.duplicates) == 0 || testutil.ToFloat64(s.m.filledEvents) == 0 {
		t.Fatal("the stream had duplicates and losses, the metrics say otherwise")
	}
	if got := testutil.ToFloat64(s.m.heldBack); got != 0 {
		t.Fatalf("held back = %v after Close", got)
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
}

func TestMetricsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	noop := func(parley.Event) {}
	fetch := func(context.Context, string, int64, int) ([]parley.Event, error) { return nil, nil }
	a := New(Config{Fetch: fetch, Deliver: noop, Registerer: reg})
	b := New(Config{Fetch: fetch, Deliver: noop, Registerer: reg})
	defer a.Close()
	defer b.Close()
	a.Track("C", 1)
	b.Track("C", 1)
	a.Push(ev("C", 1))
	b.Push(ev("C", 1))
	if got := testutil.ToFloat64(b.m.duplicates); got != 2 {
		t.Fatalf("duplicates = %v, want 2 (one counter for both)", got)
	}
	for _, name := range []string{"parley_gateway_gap_fills_total", "parley_gateway_duplicates_total", "parley_gateway_held_back"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Fatalf("%s: n=%d err=%v", name, n, err)
		}
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{{1, 25 * time.Millisecond}, {2, 50 * time.Millisecond}, {3, 100 * time.Millisecond}, {30, time.Second}} {
		if got := backoff(25*time.Millisecond, tc.failures); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.failures, got, tc.want)
		}
	}
}

// BenchmarkPushInOrder is the hot path: one event in order, delivered at
// once.
func BenchmarkPushInOrder(b *testing.B) {
	var delivered int64
	s := New(Config{
		Fetch:   func(context.Context, string, int64, int) ([]parley.Event, error) { return nil, nil },
		Deliver: func(e parley.Event) { delivered = e.Seq },
	})
	defer s.Close()
	s.Track("C", 0)
	e := ev("C", 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e.Seq = int64(i + 1)
		s.Push(e)
	}
	if delivered != int64(b.N) {
		b.Fatalf("delivered up to %d of %d", delivered, b.N)
	}
}

// BenchmarkPushInOrderParallel pushes in order on one channel per goroutine.
func BenchmarkPushInOrderParallel(b *testing.B) {
	s := New(Config{
		Fetch:   func(context.Context, string, int64, int) ([]parley.Event, error) { return nil, nil },
		Deliver: func(parley.Event) {},
	})
	defer s.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ch := fmt.Sprintf("C%d", next.Add(1))
		s.Track(ch, 0)
		e := ev(ch, 0)
		for pb.Next() {
			e.Seq++
			s.Push(e)
		}
	})
}
