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
)

// Collectors are the store's metrics, for a registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{opSeconds, opErrors, postLimits}
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
