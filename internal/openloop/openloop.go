// Package openloop paces a load generator's actions open-loop: action i
// is due at start + i/rate and starts then, whether or not the earlier
// ones have returned. A closed-loop generator (wait for each call, then
// take the next tick) is offered less than it asks whenever the server is
// slow, and the backlog waits in the generator where no latency is
// measured (coordinated omission). Here every action carries its due
// time, so the caller counts latency from the schedule; a cap on the
// actions in flight keeps a stalled server from costing unbounded
// goroutines, and an action that waited for the cap past the lateness
// threshold is counted as a late start, so a report can say the offered
// load was not what was asked.
//
// The package knows nothing of what an action does: it must not import
// the rest of Parley.
package openloop

import (
	"context"
	"sync"
	"time"
)

// Schedule is what Run paces.
type Schedule struct {
	Rate float64 // actions per second; must be > 0
	N    int     // actions to start; < 0: until ctx ends
	// MaxInFlight caps the actions running at once (≤ 0: 1024). A due
	// action waits for a free slot and is then late.
	MaxInFlight int
	// Late is how far past its due time an action may start and still be
	// on time (≤ 0: 1 ms).
	Late  time.Duration
	Clock Clock // nil: the real clock
}

// Action is one scheduled action.
type Action struct {
	I     int
	Due   time.Time // when the schedule said it starts: latency counts from here
	Start time.Time // when it started (≥ Due)
}

// Stats is what Run did.
type Stats struct {
	Asked    float64       // Schedule.Rate
	Started  int64         // actions started
	Late     int64         // started later than Schedule.Late after their due time
	AtCap    int64         // found MaxInFlight actions running when due (most of the late ones, when the server stalls)
	MaxLag   time.Duration // the latest start, past its due time
	Window   time.Duration // from the first due time to the end of the schedule
	Achieved float64       // Started over Window: actions per second
}

// Comparable says whether the achieved rate is within 5 % of the asked
// one: below that the server was offered less than the report says, and
// its figures must not be set beside another's.
func (s Stats) Comparable() bool { return s.Asked > 0 && s.Achieved >= 0.95*s.Asked }

// Run starts fn(a) for each action on schedule, each on its own goroutine,
// until N actions have started or ctx ends, then waits for the running
// ones and returns. fn gets no context: an action that began runs to its
// end (a cancelled post would leave its fate unknown).
func Run(ctx context.Context, s Schedule, fn func(a Action)) Stats {
	clk := s.Clock
	if clk == nil {
		clk = realClock{}
	}
	limit := s.MaxInFlight
	if limit <= 0 {
		limit = 1024
	}
	late := s.Late
	if late <= 0 {
		late = time.Millisecond
	}
	st := Stats{Asked: s.Rate}
	if s.Rate <= 0 {
		return st
	}
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	start := clk.Now()
	var last time.Time // the last start
	for i := 0; s.N < 0 || i < s.N; i++ {
		due := start.Add(time.Duration(float64(i) / s.Rate * float64(time.Second)))
		if clk.WaitUntil(ctx, due) != nil {
			break
		}
		// When the cap is full this waits for a slot: the action is late.
		got := false
		select {
		case slots <- struct{}{}:
			got = true
		default:
			st.AtCap++
			select {
			case slots <- struct{}{}:
				got = true
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			if got {
				<-slots
			}
			break
		}
		now := clk.Now()
		if lag := now.Sub(due); lag > late {
			st.Late++
			st.MaxLag = max(st.MaxLag, lag)
		}
		st.Started++
		last = now
		a := Action{I: i, Due: due, Start: now}
		wg.Go(func() {
			defer func() { <-slots }()
			fn(a)
		})
	}
	// The schedule ran until the later of the last start plus one period
	// and now (ctx's end for an endless schedule).
	end := clk.Now()
	if st.Started > 0 {
		end = later(end, last.Add(time.Duration(float64(time.Second)/s.Rate)))
	}
	st.Window = end.Sub(start)
	if st.Window > 0 {
		st.Achieved = float64(st.Started) / st.Window.Seconds()
	}
	wg.Wait()
	return st
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Clock is the time Run reads and waits on.
type Clock interface {
	Now() time.Time
	// WaitUntil returns once Now() ≥ t, or ctx's error if it ends first.
	WaitUntil(ctx context.Context, t time.Time) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) WaitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
