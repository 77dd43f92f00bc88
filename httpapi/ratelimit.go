package httpapi

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"parley"
)

// maxLimiterKeys bounds each keyed limiter's map.
const maxLimiterKeys = 100_000

// sweepEvery is how often a keyed limiter drops its idle entries.
const sweepEvery = time.Minute

// keyedLimiter is a token bucket per key (an IP, an email). Entries whose
// bucket has refilled completely are indistinguishable from new ones and are
// dropped by periodic sweeps, so the map holds only keys active within about
// burst/rate; a hard cap bounds it even under a flood of distinct keys.
type keyedLimiter struct {
	limit   rate.Limit // 0 with unlimited
	burst   int
	maxKeys int

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter // guarded by mu
	lastSweep time.Time                // guarded by mu
}

func newKeyedLimiter(r Rate, maxKeys int) *keyedLimiter {
	k := &keyedLimiter{burst: r.Burst, maxKeys: maxKeys, buckets: map[string]*rate.Limiter{}}
	if r.PerMinute > 0 {
		k.limit = rate.Limit(r.PerMinute / 60)
	}
	return k
}

// reserve takes one token for key at now. It returns 0 when the call may
// proceed, or how long to wait; nothing is taken when the wait is positive.
// The returned cancel gives the token back (used when a second limiter
// refuses the same request).
func (k *keyedLimiter) reserve(key string, now time.Time) (wait time.Duration, cancel func()) {
	if k.limit == 0 {
		return 0, func() {}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sweep(now)
	lim, ok := k.buckets[key]
	if !ok {
		lim = rate.NewLimiter(k.limit, k.burst)
		k.buckets[key] = lim
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
		k.mu.Lock()
		defer k.mu.Unlock()
		res.CancelAt(now)
	}
}

// sweep drops full buckets every sweepEvery, or at once when the map is at
// its cap; if a flood of fresh keys keeps it at the cap, arbitrary entries go
// (which only ever makes the limit more lenient, never stricter).
func (k *keyedLimiter) sweep(now time.Time) {
	full := len(k.buckets) >= k.maxKeys
	if !full && now.Sub(k.lastSweep) < sweepEvery {
		return
	}
	k.lastSweep = now
	for key, lim := range k.buckets {
		if lim.TokensAt(now) >= float64(k.burst) {
			delete(k.buckets, key)
		}
	}
	for key := range k.buckets {
		if len(k.buckets) < k.maxKeys {
			break
		}
		delete(k.buckets, key)
	}
}

// size is the number of keys held (tests).
func (k *keyedLimiter) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}

// allow takes a token from every (limiter, key) pair or from none: when one
// refuses, the tokens already taken are given back and the error says how
// long to wait.
func allow(now time.Time, checks ...limitCheck) error {
	var cancels []func()
	for _, c := range checks {
		wait, cancel := c.lim.reserve(c.key, now)
		if wait > 0 {
			for _, undo := range cancels {
				undo()
			}
			return &retryAfter{
				err:   parley.Errorf(parley.ERATELIMITED, "too many attempts; retry later"),
				delay: wait,
			}
		}
		cancels = append(cancels, cancel)
	}
	return nil
}

type limitCheck struct {
	lim *keyedLimiter
	key string
}
