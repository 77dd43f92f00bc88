package edge

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"parley"
)

// DefaultMaxKeys bounds a Limiter's map unless told otherwise.
const DefaultMaxKeys = 100_000

// sweepEvery is how often a Limiter drops its idle entries.
const sweepEvery = time.Minute

// Limiter is a token bucket per key (an IP, a user, an email). Entries
// whose bucket has refilled completely are indistinguishable from new ones
// and are dropped by periodic sweeps, so the map holds only keys active
// within about burst/rate; a hard cap bounds it even under a flood of
// distinct keys. Its rate can change while it runs (SetRate).
type Limiter struct {
	maxKeys int

	mu        sync.Mutex
	rate      parley.Rate              // guarded by mu
	limit     rate.Limit               // guarded by mu; from rate
	burst     int                      // guarded by mu; from rate
	buckets   map[string]*rate.Limiter // guarded by mu
	lastSweep time.Time                // guarded by mu
}

// NewLimiter returns a limiter at r (the zero or a negative Rate: no
// limit) holding at most maxKeys keys (0: DefaultMaxKeys).
func NewLimiter(r parley.Rate, maxKeys int) *Limiter {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	l := &Limiter{maxKeys: maxKeys, buckets: map[string]*rate.Limiter{}}
	l.setLocked(r)
	return l
}

// SetRate changes the rate. When it differs from the current one every
// bucket starts again full at the new rate: a change is rare, and starting
// over never makes a limit stricter than either setting.
func (l *Limiter) SetRate(r parley.Rate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r != l.rate {
		l.setLocked(r)
		clear(l.buckets)
	}
}

func (l *Limiter) setLocked(r parley.Rate) {
	l.rate, l.limit, l.burst = r, 0, 0
	if r.PerMinute > 0 {
		l.limit = rate.Limit(r.PerMinute / 60)
		l.burst = max(1, r.Burst)
	}
}

// Allow takes one token for key at now and reports whether there was one.
func (l *Limiter) Allow(key string, now time.Time) bool {
	wait, _ := l.Reserve(key, now)
	return wait == 0
}

// Reserve takes one token for key at now. It returns 0 when the call may
// proceed, or how long to wait; nothing is taken when the wait is positive.
// The returned cancel gives the token back (used when a second limiter
// refuses the same request).
func (l *Limiter) Reserve(key string, now time.Time) (wait time.Duration, cancel func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limit == 0 {
		return 0, func() {}
	}
	l.sweep(now)
	lim, ok := l.buckets[key]
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = lim
	}
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return time.Minute, func() {}
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, func() {}
	}
	return 0, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		res.CancelAt(now)
	}
}

// sweep drops full buckets every sweepEvery, or at once when the map is at
// its cap; if a flood of fresh keys keeps it at the cap, arbitrary entries go
// (which only ever makes the limit more lenient, never stricter).
func (l *Limiter) sweep(now time.Time) {
	full := len(l.buckets) >= l.maxKeys
	if !full && now.Sub(l.lastSweep) < sweepEvery {
		return
	}
	l.lastSweep = now
	for key, lim := range l.buckets {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, key)
		}
	}
	for key := range l.buckets {
		if len(l.buckets) < l.maxKeys {
			break
		}
		delete(l.buckets, key)
	}
}

// Len is the number of keys held.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// Check is one (limiter, key) pair of a request.
type Check struct {
	Limiter *Limiter
	Key     string
}

// AllowAll takes a token from every check or from none. It returns -1 and
// 0 when all had one; otherwise the index of the first that refused and
// how long to wait, with the tokens already taken given back.
func AllowAll(now time.Time, checks ...Check) (refused int, wait time.Duration) {
	var cancels []func()
	for i, c := range checks {
		w, cancel := c.Limiter.Reserve(c.Key, now)
		if w > 0 {
			for _, undo := range cancels {
				undo()
			}
			return i, w
		}
		cancels = append(cancels, cancel)
	}
	return -1, 0
}
