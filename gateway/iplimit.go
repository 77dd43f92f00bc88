package gateway

import (
	"time"

	"parley/internal/edge"
)

// ipLimiter is the identify limit per client address: the token bucket
// the HTTP API uses (edge.Limiter), keyed as it keys addresses (an IPv6
// client by its /64).
type ipLimiter struct{ l *edge.Limiter }

func newIPLimiter(r Rate) *ipLimiter { return &ipLimiter{edge.NewLimiter(r, 0)} }

func (l *ipLimiter) allow(ip string, now time.Time) bool {
	return l.l.Allow(edge.IPKey(ip), now)
}
