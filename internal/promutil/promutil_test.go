package promutil_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley/internal/promutil"
)

func TestRegisterReturnsTheExistingCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := promutil.Panics(reg)
	b := promutil.Panics(reg)
	a.WithLabelValues("x").Inc()
	if got := testutil.ToFloat64(b.WithLabelValues("x")); got != 1 {
		t.Fatalf("second Panics counts %v, want the first's 1", got)
	}
}

func TestRegisterNilRegistry(t *testing.T) {
	c := promutil.Panics(nil)
	c.WithLabelValues("y").Inc() // usable, just not exported
}

func TestRegisterConflictPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	promutil.Panics(reg)
	defer func() {
		if recover() == nil {
			t.Fatal("a conflicting registration did not panic")
		}
	}()
	promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "parley_panics_total", Help: "other"}))
}
