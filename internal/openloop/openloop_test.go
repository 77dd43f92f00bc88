package openloop

import (
	"context"
	"sync"
	"testing"
	"time"
)

// virtualClock is time that moves only when the scheduler waits for a due
// time (it jumps there) or the test sets it: the schedule's arithmetic is
// then exact, with no tolerance for a loaded machine.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) WaitUntil(ctx context.Context, t time.Time) error {
	c.advanceTo(t)
	return ctx.Err()
}

func (c *virtualClock) advanceTo(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}

// A stalled server: the first actions never return until the test lets
// them. Those up to the cap still start exactly on schedule; the rest wait
// for a slot, start late and are counted late; and latency measured from
// Action.Due includes the wait, where latency from the start would hide it.
func TestStalledServerStartsOnScheduleUpToTheCap(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	clk := &virtualClock{now: t0}
	release := make(chan struct{})
	started := make(chan Action, 10)
	var mu sync.Mutex
	fromDue := map[int]time.Duration{}
	fromStart := map[int]time.Duration{}

	done := make(chan Stats)
	go func() {
		done <- Run(t.Context(), Schedule{Rate: 10, N: 10, MaxInFlight: 3, Clock: clk}, func(a Action) {
			started <- a
			<-release // the server answers nothing until the test says so
			end := clk.Now()
			mu.Lock()
			fromDue[a.I], fromStart[a.I] = end.Sub(a.Due), end.Sub(a.Start)
			mu.Unlock()
		})
	}()
	first := make([]Action, 3)
	for range 3 {
		a := <-started // the goroutines may report in any order
		if a.I < 0 || a.I > 2 {
			t.Fatalf("action %d started while 0-2 stall", a.I)
		}
		first[a.I] = a
	}
	for i, a := range first {
		if a.I != i || !a.Start.Equal(a.Due) || !a.Due.Equal(t0.Add(time.Duration(i)*100*time.Millisecond)) {
			t.Fatalf("action %d: %+v, want it started on its due time %s", i, a, t0.Add(time.Duration(i)*100*time.Millisecond))
		}
	}
	// The cap is full: action 3 (due at 300 ms) cannot start. One second
	// in, the server recovers.
	select {
	case a := <-started:
		t.Fatalf("action %d started beyond the cap of 3", a.I)
	default:
	}
	clk.advanceTo(t0.Add(time.Second))
	close(release)
	st := <-done
	close(started)
	n := 3
	for a := range started {
		n++
		if !a.Start.Equal(t0.Add(time.Second)) {
			t.Errorf("action %d started at %s, want at the recovery (1 s)", a.I, a.Start.Sub(t0))
		}
	}
	if n != 10 || st.Started != 10 || st.Late != 7 || st.AtCap < 1 || st.MaxLag != 700*time.Millisecond {
		t.Fatalf("started %d (stats %+v), want 10 started, 7 late, max lag 700 ms", n, st)
	}
	// Action 5 was due at 500 ms and answered at once at 1 s: 500 ms late
	// from the schedule, 0 from its start.
	if fromDue[5] != 500*time.Millisecond || fromStart[5] != 0 {
		t.Fatalf("action 5: %s from its due time, %s from its start", fromDue[5], fromStart[5])
	}
	// 10 actions over the 1.1 s the schedule took (the last started at
	// 1 s, plus one period): below 95 % of the 10/s asked.
	if st.Window != 1100*time.Millisecond || st.Comparable() {
		t.Fatalf("window %s, achieved %.2f/s, comparable %v", st.Window, st.Achieved, st.Comparable())
	}
}

// A server that answers at once: every action on time, the achieved rate
// the asked one.
func TestOnTimeScheduleIsComparable(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	clk := &virtualClock{now: t0}
	var mu sync.Mutex
	var dues []time.Time
	st := Run(t.Context(), Schedule{Rate: 4, N: 8, MaxInFlight: 8, Clock: clk}, func(a Action) {
		mu.Lock()
		dues = append(dues, a.Due)
		mu.Unlock()
	})
	if st.Started != 8 || st.Late != 0 || st.AtCap != 0 || st.Window != 2*time.Second || st.Achieved != 4 || !st.Comparable() {
		t.Fatalf("stats %+v", st)
	}
	if len(dues) != 8 {
		t.Fatalf("%d actions ran", len(dues))
	}
}

// An endless schedule stops when ctx ends and waits for what is running.
func TestEndlessScheduleStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	clk := &virtualClock{now: time.Unix(1_000_000, 0)}
	finished := make(chan int, 100)
	// One in flight: the action that cancels holds the only slot, so no
	// action starts after it.
	st := Run(ctx, Schedule{Rate: 1000, N: -1, MaxInFlight: 1, Clock: clk}, func(a Action) {
		if a.I == 49 {
			cancel()
		}
		finished <- a.I
	})
	close(finished)
	n := 0
	for range finished {
		n++
	}
	if st.Started != 50 || n != 50 {
		t.Fatalf("started %d, finished %d before Run returned", st.Started, n)
	}
}
