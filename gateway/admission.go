package gateway

import (
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"parley"
)

// Protection at the door: the origin allowlist (checked before the
// upgrade), identify attempts per client IP, and a cap on identifies and
// resumes in progress, which answers a reconnect storm with
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

// clientIP is the address per-IP limits count against.
func (g *Gateway) clientIP(r *http.Request) string {
	if g.cfg.TrustProxyHeaders {
		if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
			parts := strings.Split(xff, ",")
			if ip := strings.TrimSpace(parts[len(parts)-1]); ip != "" {
				return ip
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ipLimiter is a token bucket per key, forgotten wholesale when too many
// keys pile up (a bucket that is forgotten starts full again, which errs on
// the side of letting clients in).
type ipLimiter struct {
	limit rate.Limit
	burst int
	off   bool

	mu      sync.Mutex
	buckets map[string]*rate.Limiter // guarded by mu
}

const maxLimiterKeys = 100_000

func newIPLimiter(r Rate) *ipLimiter {
	if r.PerMinute < 0 {
		return &ipLimiter{off: true}
	}
	return &ipLimiter{limit: rate.Limit(r.PerMinute / 60), burst: r.Burst, buckets: map[string]*rate.Limiter{}}
}

func (l *ipLimiter) allow(key string, now time.Time) bool {
	if l.off {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxLimiterKeys {
			clear(l.buckets)
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	return b.AllowN(now, 1)
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
	select {
	case g.identifySlots <- struct{}{}:
		return true
	default:
	}
	g.metrics.identifies.WithLabelValues("overloaded").Inc()
	c.writeJSON(reconnectFrame{Op: parley.OpReconnect, Reason: "overloaded", RetryAfterMS: retryAfterMS(time.Second, 5*time.Second)})
	c.closeWith(parley.CloseRateLimited, "overloaded: reconnect later")
	return false
}

func (c *conn) releaseAdmission() { <-c.g.identifySlots }

// retryAfterMS picks a delay in [base, base+spread) so that the clients
// told at once do not come back at once.
func retryAfterMS(base, spread time.Duration) int64 {
	return (base + rand.N(spread)).Milliseconds()
}
