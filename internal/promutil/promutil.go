// Package promutil holds what every Parley package shares about Prometheus:
// one registration helper with one failure policy, and the process-wide
// panic counter. It must not hold any package's own metrics.
package promutil

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns the collector to use: c, or the
// identical collector registered earlier (two gateways or two HTTP servers
// in one test process share one registry). A nil reg registers nothing.
// Any other failure (the same name with different labels or help) is a
// programming error and panics at start-up, never later.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("promutil: register metric: %v", err))
	}
	return c
}

// Panics is parley_panics_total{where}: panics recovered by a goroutine
// that kept the process alive (a gateway partition, a bus handler, an HTTP
// handler). Every package that recovers counts here under its own label.
func Panics(reg prometheus.Registerer) *prometheus.CounterVec {
	return Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_panics_total",
		Help: "Panics recovered without stopping the process, by where they happened.",
	}, []string{"where"}))
}
