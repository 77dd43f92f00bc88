package tenantdir

import (
	"github.com/prometheus/client_golang/prometheus"

	"parley/internal/promutil"
)

// clientMetrics are the directory client's parley_tenantdir_* metrics.
type clientMetrics struct {
	hits, misses   prometheus.Counter
	loads          *prometheus.CounterVec // result: ok, not_found, error
	loadSeconds    prometheus.Histogram
	staleServes    prometheus.Counter
	reloadFailures prometheus.Counter
	invalidations  prometheus.Counter
	invalLag       prometheus.Histogram
	replica        *prometheus.CounterVec // region, result: ok, not_found, error
}

func newClientMetrics(reg prometheus.Registerer) *clientMetrics {
	lookups := promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_tenantdir_lookups_total",
		Help: "Directory lookups by this node's client, by result: hit (answered from the local cache) or miss (loaded).",
	}, []string{"result"}))
	return &clientMetrics{
		hits:   lookups.WithLabelValues("hit"),
		misses: lookups.WithLabelValues("miss"),
		loads: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_tenantdir_loads_total",
			Help: "Loads (and refreshes) from the directory replicas, by result: ok, not_found or error (no replica answered).",
		}, []string{"result"})),
		loadSeconds: promutil.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_tenantdir_load_seconds",
			Help:    "Time of a load from the replicas (the first answer of the regions raced).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		})),
		staleServes: promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_tenantdir_stale_serves_total",
			Help: "Lookups answered with a last-known-good record because no replica answered.",
		})),
		reloadFailures: promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_tenantdir_refresh_failures_total",
			Help: "Refresh-ahead reloads that failed (the cached record is kept until it expires).",
		})),
		invalidations: promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_tenantdir_invalidations_total",
			Help: "Catalogue changes received over the bus that replaced a cached record.",
		})),
		invalLag: promutil.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_tenantdir_invalidation_lag_seconds",
			Help:    "Time from a catalogue commit to this node's client hearing of it.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		})),
		replica: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_tenantdir_replica_requests_total",
			Help: "Requests to a region's directory replicas, by region and result: ok, not_found, error or late (another region answered first).",
		}, []string{"region", "result"})),
	}
}
