package presence

import (
	"parley/internal/promutil"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the tracker's gauges and counters. Several trackers in one
// registry (tests) share them.
type metrics struct {
	localUsers    prometheus.Gauge
	watchedUsers  prometheus.Gauge
	watchers      prometheus.Gauge
	peers         prometheus.Gauge
	changes       prometheus.Counter
	notifications prometheus.Counter
	queries       prometheus.Counter
	queryTimeouts prometheus.Counter
	badMessages   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	gauge := func(name, help string) prometheus.Gauge {
		return promutil.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
	}
	counter := func(name, help string) prometheus.Counter {
		return promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	return &metrics{
		localUsers: gauge("parley_presence_local_users",
			"Users with sessions on this node, or in grace after their last one."),
		watchedUsers: gauge("parley_presence_watched_users",
			"Users watched on this node: one presence topic subscription each."),
		watchers: gauge("parley_presence_watches",
			"(watcher, user) pairs: how many users all local watchers want in total."),
		peers: gauge("parley_presence_peer_nodes",
			"Other nodes whose presence contributions stand."),
		changes: counter("parley_presence_changes_total",
			"Changes of this node's contribution to a user's presence (each published once)."),
		notifications: counter("parley_presence_notifications_total",
			"Watcher callbacks made (initial statuses and changes)."),
		queries: counter("parley_presence_queries_total",
			"Presence queries sent to other nodes."),
		queryTimeouts: counter("parley_presence_query_timeouts_total",
			"Presence queries that some live node did not answer in time."),
		badMessages: counter("parley_presence_bad_messages_total",
			"Presence messages from the bus that could not be used."),
	}
}
