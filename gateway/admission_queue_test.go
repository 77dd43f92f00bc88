package gateway

import (
	"parley"

	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestIdentifyQueueAbsorbsBurst: a burst of identifies larger than the
// slots but within the queue waits for slots and is served in full; none
// is sent away.
func TestIdentifyQueueAbsorbsBurst(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, func(c *Config) {
		c.Store = gatedStore{Store: c.Store, gate: gate}
		c.MaxConcurrentIdentifies = 2
		c.IdentifyQueue = 16
		c.IdentifyQueueWait = time.Minute // the wait is not what this tests
	})
	a := e.user("a")
	ws := e.workspace(a)
	const burst = 10
	clients := make([]*client, burst)
	for i := range clients {
		clients[i] = e.connect()
		clients[i].send(map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
	}
	waitUntil(t, "two in progress, the rest queued", func() bool {
		return e.gw.identifyQueue.inProgress() == 2 && e.gw.identifyQueue.waiting.Load() == burst-2
	})
	close(gate)
	for i, c := range clients {
		if f := c.next(); f.Op != "ready" {
			t.Fatalf("identify %d: %+v, want ready", i, f)
		}
	}
	if n := counterValue(t, e.reg, "parley_gateway_admission_rejected_total"); n != 0 {
		t.Fatalf("%v identifies sent away, want none", n)
	}
	if n := counterValue(t, e.reg, "parley_gateway_identifies_total"); n != burst {
		t.Fatalf("identifies_total %v, want %d ok", n, burst)
	}
}

// TestIdentifyQueueBounded: under a sustained overload the queue holds no
// more than its bound. Identifies beyond it are refused at once (they never
// wait), and those queued are refused when their wait runs out; each
// refusal is reconnect{overloaded} and close 4008.
func TestIdentifyQueueBounded(t *testing.T) {
	gate := make(chan struct{})
	e := newEnv(t, func(c *Config) {
		c.Store = gatedStore{Store: c.Store, gate: gate}
		c.MaxConcurrentIdentifies = 1
		c.IdentifyQueue = 2
		c.IdentifyQueueWait = 200 * time.Millisecond
	})
	t.Cleanup(func() { close(gate) }) // before the env's: the held identify ends
	a := e.user("a")
	ws := e.workspace(a)
	identify := func() *client {
		c := e.connect()
		c.send(map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
		return c
	}
	identify() // holds the slot until the end
	waitUntil(t, "slot taken", func() bool { return e.gw.identifyQueue.inProgress() == 1 })
	queued := []*client{identify(), identify()}
	waitUntil(t, "two queued", func() bool { return e.gw.identifyQueue.waiting.Load() == 2 })
	for range 3 {
		c := identify()
		if f := c.next(); f.Op != "reconnect" || f.Reason != "overloaded" {
			t.Fatalf("identify beyond the queue: %+v, want reconnect overloaded", f)
		}
		if code := c.closeCode(); code != parley.CloseRateLimited {
			t.Fatalf("close %d, want 4008", code)
		}
	}
	if n := labeledValue(t, e.reg, "parley_gateway_admission_rejected_total", "reason", "queue_full"); n != 3 {
		t.Fatalf("queue_full rejections %v, want 3", n)
	}
	for _, c := range queued {
		if f := c.next(); f.Op != "reconnect" || f.Reason != "overloaded" {
			t.Fatalf("queued identify after its wait: %+v, want reconnect overloaded", f)
		}
		if code := c.closeCode(); code != parley.CloseRateLimited {
			t.Fatalf("close %d, want 4008", code)
		}
	}
	if n := labeledValue(t, e.reg, "parley_gateway_admission_rejected_total", "reason", "wait_timeout"); n != 2 {
		t.Fatalf("wait_timeout rejections %v, want 2", n)
	}
	if n := e.gw.identifyQueue.waiting.Load(); n != 0 {
		t.Fatalf("%d still waiting", n)
	}
}

// labeledValue is the value of a counter or gauge with label=value.
func labeledValue(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
