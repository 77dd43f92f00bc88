package httpapi

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/edge"
	"parley/internal/promutil"
)

// The join limiter (docs/join-limits.md) sheds a spike of joins into one
// channel before it reaches the store. Two token buckets per channel, both
// in this process, so a join never waits on the network:
//
//   - local: join_rate_channel_node joins a second into a channel on this
//     node, whatever the others do. It protects this node and reacts at
//     once (LINE's lesson: a shared limiter learns of a spike a second late).
//   - cluster: this node's share of join_rate_channel_cluster, the rate
//     divided by the live nodes (the nodes package's membership). Balanced
//     traffic keeps the cluster near its limit with no coordination; a
//     node that dies stops counting within the membership's expiry, and
//     the others' shares grow.
//
// A join takes a token from both or from neither. Buckets live in
// edge.Limiter maps: bounded, and a channel idle long enough to refill its
// bucket is forgotten.

// joinMaxChannels bounds how many channels' buckets a node holds.
const joinMaxChannels = 100_000

// joinLimiter holds the per-channel buckets and follows the live keys.
type joinLimiter struct {
	live  parley.LiveConfigSource // nil: the defaults
	nodes func() int              // live nodes; nil: 1
	log   *slog.Logger

	local, cluster *edge.Limiter

	mu      sync.Mutex
	applied [2]parley.Rate // guarded by mu: local, cluster

	outcomes *prometheus.CounterVec // nil without metrics
	lastLog  atomic.Int64           // unix nanos of the last dry-run log line
}

func newJoinLimiter(cfg Config, reg prometheus.Registerer, log *slog.Logger) *joinLimiter {
	j := &joinLimiter{live: cfg.Live, nodes: cfg.LiveNodes, log: log,
		local:   edge.NewLimiter(parley.Rate{}, joinMaxChannels),
		cluster: edge.NewLimiter(parley.Rate{}, joinMaxChannels)}
	if reg != nil {
		j.outcomes = promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_join_limit_total",
			Help: "Channel joins and invite acceptances seen by the join limiter, by outcome: accepted, limited_local, limited_cluster (refused with 429), dry_run_local, dry_run_cluster (would have been refused; let through).",
		}, []string{"outcome"}))
		for _, o := range []string{"accepted", "limited_local", "limited_cluster", "dry_run_local", "dry_run_cluster"} {
			j.outcomes.WithLabelValues(o)
		}
		promutil.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "parley_join_limit_channels",
			Help: "Channels whose join buckets this node holds (idle ones are dropped).",
		}, func() float64 { return float64(j.local.Len() + j.cluster.Len()) }))
	}
	return j
}

func (j *joinLimiter) config() parley.JoinLimitConfig {
	if j.live == nil {
		return parley.DefaultJoinLimitConfig()
	}
	return j.live.LiveConfig().JoinLimitConfig
}

// perSecond is the Rate of n tokens a second with burst b; 0 is no limit.
func perSecond(n float64, b int) parley.Rate {
	if n <= 0 {
		return parley.RateOff
	}
	return parley.Rate{PerMinute: n * 60, Burst: max(1, b)}
}

// sync gives the buckets the rates of c and the current node count.
func (j *joinLimiter) sync(c parley.JoinLimitConfig) {
	n := 1
	if j.nodes != nil {
		n = max(1, j.nodes())
	}
	local := perSecond(float64(c.JoinRateChannelNode), c.JoinBurst)
	// The share's bucket holds its share of the burst too, so that the
	// cluster as a whole admits about join_burst at once.
	share := perSecond(float64(c.JoinRateChannelCluster)/float64(n), (c.JoinBurst+n-1)/n)
	if c.JoinRateChannelCluster > 0 {
		// A share below one join a second still admits one now and then.
		share.PerMinute = math.Max(share.PerMinute, 1)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.applied == [2]parley.Rate{local, share} {
		return
	}
	j.applied = [2]parley.Rate{local, share}
	j.local.SetRate(local)
	j.cluster.SetRate(share)
}

// allow takes a join token for key (a channel id, or an invite) at now:
// nil, or a 429 with Retry-After. In dry run it always returns nil and
// counts what it would have refused.
func (j *joinLimiter) allow(now time.Time, key string) error {
	c := j.config()
	if !c.JoinLimitEnabled {
		return nil
	}
	j.sync(c)
	i, wait := edge.AllowAll(now, edge.Check{Limiter: j.local, Key: key}, edge.Check{Limiter: j.cluster, Key: key})
	if i < 0 {
		j.count("accepted")
		return nil
	}
	which := "local"
	if i == 1 {
		which = "cluster"
	}
	if c.JoinLimitDryRun {
		j.count("dry_run_" + which)
		// One line a second at most: a spike must not flood the log.
		if last := j.lastLog.Load(); now.UnixNano()-last >= int64(time.Second) && j.lastLog.CompareAndSwap(last, now.UnixNano()) {
			j.log.Info("join limiter (dry run) would refuse a join", "key", key, "limit", which, "retry_after", wait)
		}
		return nil
	}
	j.count("limited_" + which)
	return parley.RateLimited(wait, "too many people are joining this channel right now; retry in a moment")
}

func (j *joinLimiter) count(outcome string) {
	if j.outcomes != nil {
		j.outcomes.WithLabelValues(outcome).Inc()
	}
}
