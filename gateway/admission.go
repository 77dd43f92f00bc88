package gateway

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"parley"
)

// Protection at the door: the origin allowlist (checked before the
// upgrade), identify attempts per client IP, and a cap on identifies and
// resumes in progress with a short bounded queue in front of it, which
// absorbs a burst and answers a sustained storm with
// reconnect{retry_after_ms} instead of queueing it up against the store.

// originAllowed applies Config.AllowedOrigins to an upgrade request.
func (g *Gateway) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser
	}
	for _, o := range g.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	if len(g.cfg.AllowedOrigins) > 0 {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// clientIP is the address per-IP limits count against: the HTTP API's
// rule (package edge), so that both doors key a client alike.
func (g *Gateway) clientIP(r *http.Request) string {
	return g.cfg.TrustedProxies.ClientIP(r)
}

// admit takes a slot for an identify or resume from ip. When the caller
// may not proceed, the connection has been told why and closed; release
// must be called after a true answer.
func (c *conn) admit() bool {
	g := c.g
	if !g.identifyRate.allow(c.ip, g.now()) {
		g.metrics.identifies.WithLabelValues("rate_limited").Inc()
		c.closeWith(parley.CloseRateLimited, "too many identifies from this address")
		return false
	}
	if !g.identifyQueue.acquire(g.metrics) {
		g.metrics.identifies.WithLabelValues("overloaded").Inc()
		c.writeJSON(reconnectFrame{Op: parley.OpReconnect, Reason: "overloaded", RetryAfterMS: retryAfterMS(time.Second, 5*time.Second)})
		c.closeWith(parley.CloseRateLimited, "overloaded: reconnect later")
		return false
	}
	if c.closing.Load() { // closed (or the node began to shut down) while it waited
		g.identifyQueue.release()
		return false
	}
	return true
}

func (c *conn) releaseAdmission() { c.g.identifyQueue.release() }

// admission caps the identifies and resumes in progress on the node (a
// semaphore of slots) and lets a burst wait briefly for a slot instead of
// sending it away: the node can serve a few hundred identifies a second,
// so a burst of that size is absorbed in well under a second. The wait is
// bounded both in time (maxWait) and in waiters (maxQueue); past either
// bound the identify fails fast with reconnect{retry_after_ms}, as it did
// before the queue, so a sustained overload is still refused quickly and
// nothing queues without bound. Waiters block their nbio handler goroutine
// (as the identify's store reads do), which is why maxQueue stays a
// fraction of nbio's pool.
type admission struct {
	slots    chan struct{} // a token per identify in progress
	maxQueue int64
	maxWait  time.Duration
	waiting  atomic.Int64 // callers waiting for a slot
}

func newAdmission(slots, queue int, wait time.Duration) *admission {
	if queue < 0 || wait < 0 { // no queue: fail fast as soon as the slots are taken
		queue, wait = 0, 0
	}
	return &admission{slots: make(chan struct{}, slots), maxQueue: int64(queue), maxWait: wait}
}

// acquire takes a slot, waiting up to maxWait when there is room in the
// queue; false means the node is overloaded.
func (a *admission) acquire(m *metrics) bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
	}
	if a.waiting.Add(1) > a.maxQueue {
		a.waiting.Add(-1)
		m.admissionRejected.WithLabelValues("queue_full").Inc()
		return false
	}
	m.admissionWaiting.Inc()
	start := time.Now()
	t := time.NewTimer(a.maxWait)
	defer func() {
		t.Stop()
		a.waiting.Add(-1)
		m.admissionWaiting.Dec()
	}()
	select {
	case a.slots <- struct{}{}:
		m.admissionWait.WithLabelValues("admitted").Observe(time.Since(start).Seconds())
		return true
	case <-t.C:
		m.admissionWait.WithLabelValues("timeout").Observe(time.Since(start).Seconds())
		m.admissionRejected.WithLabelValues("wait_timeout").Inc()
		return false
	}
}

func (a *admission) release() { <-a.slots }

// inProgress is how many identifies and resumes hold a slot.
func (a *admission) inProgress() int { return len(a.slots) }

// retryAfterMS picks a delay in [base, base+spread) so that the clients
// told at once do not come back at once.
func retryAfterMS(base, spread time.Duration) int64 {
	return (base + rand.N(spread)).Milliseconds()
}
