package querycache

import (
	"parley/internal/promutil"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cache's counters. They live on the Cache, so that several
// caches (tests) never collide in one registry.
type metrics struct {
	loads     prometheus.Counter
	loadTime  prometheus.Histogram
	evictions *prometheus.CounterVec
	resyncs   prometheus.Counter
	queries   *prometheus.CounterVec
	lookups   *prometheus.CounterVec

	loadCount  atomic.Int64 // for Stats
	eventCount atomic.Int64
}

func newMetrics(reg prometheus.Registerer, c *Cache) *metrics {
	m := &metrics{
		loads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_querycache_loads_total",
			Help: "Workspaces loaded from the store into the query cache.",
		}),
		loadTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_querycache_load_seconds",
			Help:    "Time to load one workspace from the store.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_querycache_evictions_total",
			Help: "Workspaces dropped from the query cache, by reason (idle, resync, deleted).",
		}, []string{"reason"}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_querycache_resyncs_total",
			Help: "Directory events that did not fit the cached copy, which was then reloaded.",
		}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_querycache_queries_total",
			Help: "Queries answered, by kind (misses are the loads).",
		}, []string{"kind"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_querycache_lookups_total",
			Help: "Workspace lookups by queries, by result: hit (warm) or miss (loaded from the store first, or waiting for a load under way).",
		}, []string{"result"}),
	}
	if reg == nil {
		return m
	}
	warm := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "parley_querycache_workspaces",
		Help: "Workspaces held (loading or ready).",
	}, func() float64 { return float64(c.Stats().Workspaces) })
	events := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "parley_querycache_events_total",
		Help: "Directory events received.",
	}, func() float64 { return float64(m.eventCount.Load()) })
	for _, col := range []prometheus.Collector{m.loads, m.loadTime, m.evictions, m.resyncs, m.queries, m.lookups, warm, events} {
		promutil.Register(reg, col)
	}
	return m
}

// lookup counts a workspace lookup that found it warm (hit) or not.
func (m *metrics) lookup(hit bool) {
	if hit {
		m.lookups.WithLabelValues("hit").Inc()
	} else {
		m.lookups.WithLabelValues("miss").Inc()
	}
}

func (m *metrics) loaded(d time.Duration) {
	m.loadCount.Add(1)
	m.loads.Inc()
	m.loadTime.Observe(d.Seconds())
}
