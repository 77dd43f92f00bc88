package natsbus

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"parley"
)

// Received events are counted and their lag (created_at → receipt) is
// observed, on both kinds of subscription; an event without created_at is
// counted but has no lag.
func TestReceiveCountsAndLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := mustStart(t, Config{Registerer: reg})
	var direct, muxed collector
	mustSubscribe(t, b, "ch.C1", &direct)
	m := b.NewMux(16, muxed.add)
	t.Cleanup(m.Close)
	if err := m.Subscribe("ch.C1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}

	old := event("C1", 1, "ch.C1")
	old.CreatedAt = time.Now().Add(-250 * time.Millisecond) // committed a while ago
	undated := event("C1", 2, "ch.C1")
	undated.CreatedAt = time.Time{}
	b.Publish([]parley.Event{old, undated})
	waitFor(t, "both events on both subscriptions", func() bool {
		return len(direct.snapshot()) == 2 && len(muxed.snapshot()) == 2
	})

	if got := testutil.ToFloat64(b.metrics.received); got != 4 {
		t.Fatalf("parley_bus_received_total = %v, want 4", got)
	}
	var h dto.Metric
	if err := b.metrics.lag.Write(&h); err != nil {
		t.Fatal(err)
	}
	if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 2 || sum < 0.5 {
		t.Fatalf("parley_bus_lag_seconds: %d samples summing to %.3f s; want 2 (the dated event, twice) of ≥ 0.25 s each", n, sum)
	}
	for _, name := range []string{"parley_bus_received_total", "parley_bus_lag_seconds"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Fatalf("%s not registered: n=%d err=%v", name, n, err)
		}
	}
}
