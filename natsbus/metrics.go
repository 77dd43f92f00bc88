package natsbus

import (
	"parley/internal/promutil"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// metrics are the bus's series. They live on the Bus, so that several
// buses (tests) never collide in one registry.
type metrics struct {
	published     prometheus.Counter
	publishErrors prometheus.Counter
	dropped       prometheus.Counter
	decodeErrors  prometheus.Counter
	received      prometheus.Counter
	lag           prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_bus_published_total",
			Help: "Messages handed to the bus (one per event and topic).",
		}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_bus_publish_errors_total",
			Help: "Publishes that failed; the event is lost to the bus but not to the store's log.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_bus_slow_consumer_total",
			Help: "Times a subscription fell behind and the bus dropped messages for it.",
		}),
		decodeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_bus_decode_errors_total",
			Help: "Received messages that were not a valid event.",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_bus_received_total",
			Help: "Events received off the bus by this node's subscriptions (one per subscription that matched).",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "parley_bus_lag_seconds",
			Help: "From an event's created_at (its transaction's clock, or the publisher's for ephemeral events) to its receipt off the bus on this node.",
			// 100 µs … 6.5 s
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
		}),
	}
	if reg != nil {
		for _, c := range []*prometheus.Counter{&m.published, &m.publishErrors, &m.dropped, &m.decodeErrors, &m.received} {
			*c = promutil.Register(reg, *c)
		}
		m.lag = promutil.Register(reg, m.lag)
	}
	return m
}

// receive records an event received off the bus: its count and its lag
// (events without a created_at have none; a lag below zero, from clocks of
// two nodes that disagree, counts as zero).
func (m *metrics) receive(ev *parley.Event, now time.Time) {
	m.received.Inc()
	if ev.CreatedAt.IsZero() {
		return
	}
	m.lag.Observe(max(now.Sub(ev.CreatedAt), 0).Seconds())
}
