package natsbus

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the bus's counters. They live on the Bus, so that several
// buses (tests) never collide in one registry.
type metrics struct {
	published     prometheus.Counter
	publishErrors prometheus.Counter
	dropped       prometheus.Counter
	decodeErrors  prometheus.Counter
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
	}
	if reg != nil {
		for _, c := range []*prometheus.Counter{&m.published, &m.publishErrors, &m.dropped, &m.decodeErrors} {
			*c = register(reg, *c)
		}
	}
	return m
}

// register registers c, or returns the counter of that name already
// registered (a second bus in one process, as in a restart).
func register(reg prometheus.Registerer, c prometheus.Counter) prometheus.Counter {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(prometheus.Counter); ok {
			return old
		}
	}
	return c
}
