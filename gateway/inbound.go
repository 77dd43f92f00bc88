package gateway

import (
	"parley"

	"time"

	"golang.org/x/time/rate"
)

// Bounds on what one connection may send. The frame size is nbio's
// (Config.MaxFrameBytes, close 1009); the lists of focus and presence_sub
// are cut to maxFocusChannels and parley.MaxUsersInView (the client is
// told, presence_sub_limited); ids are at most
// maxIDBytes (Parley's ids are 27 characters) so that a typing op cannot
// fill the typing throttle with 16 KiB keys; and every frame, whatever its
// op, takes a token from the connection's bucket (Config.InboundRate).

// maxIDBytes bounds the channel and thread ids of a typing op.
const maxIDBytes = 64

// newInboundLimiter returns a connection's frame bucket, or nil for no
// limit. Two heartbeats per interval are added to the rate, so a short
// heartbeat interval (tests, a tuned deployment) never trips it.
func (g *Gateway) newInboundLimiter() *rate.Limiter {
	r := g.cfg.InboundRate
	if r.PerMinute < 0 {
		return nil
	}
	perSecond := r.PerMinute/60 + 2/g.cfg.HeartbeatInterval.Seconds()
	return rate.NewLimiter(rate.Limit(perSecond), r.Burst)
}

// overRate takes a token for one inbound frame; when there is none, the
// connection is told to come back later and closed 4008 (resumable: the
// session survives, and a client that backs off resumes it).
func (c *conn) overRate() bool {
	if c.inbound == nil || c.inbound.AllowN(c.g.now(), 1) {
		return false
	}
	c.g.metrics.floodCloses.Inc()
	c.writeJSON(reconnectFrame{Op: parley.OpReconnect, Reason: "rate_limited", RetryAfterMS: retryAfterMS(floodRetryAfter, floodRetryAfter)})
	c.closeWith(parley.CloseRateLimited, "too many frames: slow down")
	return true
}

// floodRetryAfter is the least a client closed for flooding is told to wait
// (up to twice that, jittered).
const floodRetryAfter = 5 * time.Second
