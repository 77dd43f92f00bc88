package storeguard

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"parley/internal/promutil"
)

type metrics struct {
	inFlight    [numPurposes]prometheus.Gauge
	slow        [numPurposes]prometheus.Counter
	failures    [numPurposes]prometheus.Counter
	failedFast  *prometheus.CounterVec // purpose, reason
	dryRun      *prometheus.CounterVec // purpose, reason
	state       prometheus.Gauge
	transitions *prometheus.CounterVec // from, to
}

func newMetrics(reg prometheus.Registerer, db string) *metrics {
	inFlight := promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "parley_store_guard_in_flight", Help: "Store calls running now, by purpose (bulkhead occupancy)."},
		[]string{"database", "purpose"}))
	slow := promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_store_guard_slow_calls_total", Help: "Store calls still running at the slow-call threshold (breaker failures), by purpose."},
		[]string{"database", "purpose"}))
	failures := promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_store_guard_failures_total", Help: "Store calls that failed for the server's reasons (not client errors), by purpose."},
		[]string{"database", "purpose"}))
	failedFast := promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_store_guard_failed_fast_total", Help: "Store calls refused with 503 without reaching the database, by purpose and reason (bulkhead, breaker, drained)."},
		[]string{"database", "purpose", "reason"}))
	dryRun := promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_store_guard_dry_run_total", Help: "Store calls that would have been refused but ran (store_guard_dry_run), by purpose and reason."},
		[]string{"database", "purpose", "reason"}))
	state := promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "parley_store_breaker_state", Help: "The database's circuit breaker: 0 closed, 1 half-open, 2 open."},
		[]string{"database"}))
	transitions := promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_store_breaker_transitions_total", Help: "Changes of the database's circuit breaker state, by from and to."},
		[]string{"database", "from", "to"}))
	m := &metrics{
		failedFast:  curry(failedFast, db),
		dryRun:      curry(dryRun, db),
		state:       state.WithLabelValues(db),
		transitions: curry(transitions, db),
	}
	for p := Purpose(0); p < numPurposes; p++ {
		m.inFlight[p] = inFlight.WithLabelValues(db, p.String())
		m.slow[p] = slow.WithLabelValues(db, p.String())
		m.failures[p] = failures.WithLabelValues(db, p.String())
		for _, r := range []string{"bulkhead", "breaker", "drained"} {
			m.failedFast.WithLabelValues(p.String(), r)
		}
	}
	return m
}

func curry(v *prometheus.CounterVec, db string) *prometheus.CounterVec {
	return v.MustCurryWith(prometheus.Labels{"database": db})
}

// stateValue is the gauge's value of a state.
func stateValue(s gobreaker.State) float64 {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

func (m *metrics) transition(from, to gobreaker.State) {
	m.state.Set(stateValue(to))
	m.transitions.WithLabelValues(from.String(), to.String()).Inc()
}
