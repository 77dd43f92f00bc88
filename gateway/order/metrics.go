package order

import (
	"parley/internal/promutil"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Sequencer's counters. Several Sequencers registered with
// one registry (tests, a restart) share them.
type metrics struct {
	gapFills     prometheus.Counter
	filledEvents prometheus.Counter
	fetchErrors  prometheus.Counter
	duplicates   prometheus.Counter
	heldBack     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		gapFills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_gap_fills_total",
			Help: "Gaps in a channel's event stream closed from the store's log.",
		}),
		filledEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_gap_fill_events_total",
			Help: "Events delivered from the store's log because the bus had not brought them.",
		}),
		fetchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_gap_fill_errors_total",
			Help: "Failed fetches of a gap from the store's log.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_duplicates_total",
			Help: "Events dropped because their seq was already delivered or held.",
		}),
		heldBack: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_gateway_held_back",
			Help: "Events held back waiting for a gap before them to close.",
		}),
	}
	m.gapFills = promutil.Register(reg, m.gapFills)
	m.filledEvents = promutil.Register(reg, m.filledEvents)
	m.fetchErrors = promutil.Register(reg, m.fetchErrors)
	m.duplicates = promutil.Register(reg, m.duplicates)
	m.heldBack = promutil.Register(reg, m.heldBack)
	return m
}
