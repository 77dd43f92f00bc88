package gateway

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// partitionEnv is all a partition reaches outside itself: a few settings,
// its metrics, and the handful of calls it makes into the rest of the node.
// The gateway builds one at start-up and hands it to every partition, so a
// partition holds no pointer to the whole Gateway and what it depends on is
// listed here.
type partitionEnv struct {
	sendQueue      int // Config.SendQueue
	replayMax      int // Config.ReplayMax
	writeHighWater int // Config.WriteHighWater
	heartbeat      time.Duration
	resumeWindow   time.Duration
	replayTTL      time.Duration
	sweepEvery     time.Duration
	fillStuck      time.Duration // a catch-up read unanswered this long is asked again

	stop        <-chan struct{} // closed when the gateway stops
	now         func() time.Time
	log         *slog.Logger
	metrics     *metrics
	jitAttached prometheus.Counter                                // users attached to events (jit.go)
	deliverHook *atomic.Pointer[func(sessionID string, e *event)] // tests (partition_recover.go)

	later              func(subOp)    // queue a node subscription change (hub)
	forget             func(*session) // take a removed session out of the registry
	presenceConnect    func(*session)
	presenceDisconnect func(*session)
	fills              *fillPool                        // catch-up reads (fills.go)
	knownUsers         func(*session) []string          // for a handover (jit.go)
	refreshPresence    func(*session)                   // send the presence dropped meanwhile (conn.go)
	botsClosedSince    func(ws string, gen uint64) bool // bots.go
	logPanic           func(where string, v any, attrs ...any)
	live               parley.LiveConfigSource // compression settings (deflate.go)
	deflate            *deflateMetrics
	hot                parley.HotChannels // nil: nothing is hot (view.go)
	view               *viewMetrics
}

// partitionEnv builds the environment of the gateway's partitions.
func (g *Gateway) partitionEnv() *partitionEnv {
	return &partitionEnv{
		sendQueue:          g.cfg.SendQueue,
		replayMax:          g.cfg.ReplayMax,
		writeHighWater:     g.cfg.WriteHighWater,
		heartbeat:          g.cfg.HeartbeatInterval,
		resumeWindow:       g.cfg.ResumeWindow,
		replayTTL:          g.cfg.ReplayTTL,
		sweepEvery:         g.sweepEvery,
		fillStuck:          fillStuck,
		stop:               g.stop,
		now:                g.now,
		log:                g.log,
		metrics:            g.metrics,
		jitAttached:        g.jit.attached,
		deliverHook:        &g.deliverHook,
		later:              g.hub.later,
		forget:             g.registry.remove,
		presenceConnect:    g.presenceConnect,
		presenceDisconnect: g.presenceDisconnect,
		fills:              newFillPool(g.cfg.FillConcurrency, g),
		knownUsers:         g.knownUserIDs,
		refreshPresence:    func(s *session) { go g.refreshPresence(s) },
		botsClosedSince:    g.botsClosedSince,
		logPanic:           g.logPanic,
		live:               g.cfg.Live,
		deflate:            g.deflateStats,
		hot:                g.cfg.Hot,
		view:               g.viewStats,
	}
}
