package gateway

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
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
		c.closeWith(CloseRateLimited, "too many identifies from this address")
		return false
	}
	select {
	case g.identifySlots <- struct{}{}:
		return true
	default:
	}
	g.metrics.identifies.WithLabelValues("overloaded").Inc()
	c.writeJSON(reconnectFrame{Op: "reconnect", Reason: "overloaded", RetryAfterMS: retryAfterMS(time.Second, 5*time.Second)})
	c.closeWith(CloseRateLimited, "overloaded: reconnect later")
	return false
}

func (c *conn) releaseAdmission() { <-c.g.identifySlots }

// retryAfterMS picks a delay in [base, base+spread) so that the clients
// told at once do not come back at once.
func retryAfterMS(base, spread time.Duration) int64 {
	return (base + rand.N(spread)).Milliseconds()
}
