package sqlstore

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// The store's metrics: the latency of every named write operation, by
// dialect, from the call to the commit (a group commit's wait included).
// They are process-wide — every Store of the process adds to them — and
// are exposed by registering Collectors() with a registry.
var (
	opSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "parley_store_op_seconds",
		Help: "Store write operations from call to commit (group-commit wait included), by operation and dialect.",
		// 100 µs … 6.5 s
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
	}, []string{"op", "dialect"})
	opErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_store_op_errors_total",
		Help: "Store write operations that failed with an internal error (not a refusal such as not found or forbidden), by operation and dialect.",
	}, []string{"op", "dialect"})

	writeRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_store_write_retries_total",
		Help: "PostgreSQL writes run again after losing a race, by reason: deadlock (40P01), serialization (40001) or unique (23505, outside a batch).",
	}, []string{"reason"})

	// The outbox relay (outbox.go).
	relayEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_relay_republished_events_total",
		Help: "Durable events the outbox relay published from the log because their publish was not acknowledged within the grace period.",
	})
	relayChannels = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_relay_republished_channels_total",
		Help: "Outbox rows (one channel's unacknowledged events each) the relay published.",
	})
	relayLagSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "parley_relay_lag_seconds",
		Help: "Age of an outbox row when the relay published it: from the commit of its first unacknowledged event (or its last partial acknowledgement) to the relay pass.",
		// 250 ms … 64 s
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 9),
	})
	relayPassSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "parley_relay_pass_seconds",
		Help: "Duration of one outbox relay pass (the query for old rows, and publishing them when there are any).",
		// 100 µs … 6.5 s
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
	})
	relayErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_relay_errors_total",
		Help: "Outbox relay passes that failed (store or bus error); the rows stay for the next pass.",
	})
	relayFailpointDrops = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_relay_failpoint_drops_total",
		Help: "Publishes dropped by the test-only failpoint between commit and publish (always 0 in production).",
	})
)

// Collectors are the store's metrics, for a registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{opSeconds, opErrors, postLimits, writeRetries,
		relayEvents, relayChannels, relayLagSeconds, relayPassSeconds, relayErrors, relayFailpointDrops}
}

// observe records one write operation named op that started at start;
// it is deferred by write and writeChannel.
func (s *Store) observe(op string, start time.Time, err *error) {
	d := string(s.dialect)
	opSeconds.WithLabelValues(op, d).Observe(time.Since(start).Seconds())
	if *err != nil && parley.ErrorCode(*err) == parley.EINTERNAL {
		opErrors.WithLabelValues(op, d).Inc()
	}
}
