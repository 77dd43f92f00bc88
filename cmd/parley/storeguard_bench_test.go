package main

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"parley/liveconfig"
)

// TestBenchBreakerStall is `make bench-breaker` (docs/benchmarks.md, "Store
// breaker: a 2 s database stall"), skipped unless PARLEY_BENCH_BREAKER=1.
// A node on PostgreSQL behind the fault proxy serves an open-loop load of
// GET /workspaces; the proxy black-holes the database for 2 s and heals.
// It reports, with the guard's default thresholds and with the guard off,
// when the breaker opened, what clients saw during the stall and recovery,
// and when the node answered again.
func TestBenchBreakerStall(t *testing.T) {
	if os.Getenv("PARLEY_BENCH_BREAKER") != "1" {
		t.Skip("set PARLEY_BENCH_BREAKER=1 (make bench-breaker)")
	}
	rate := 200
	if v, err := strconv.Atoi(os.Getenv("PARLEY_BENCH_RATE")); err == nil && v > 0 {
		rate = v
	}
	for _, mode := range []struct {
		name  string
		patch liveconfig.StoreGuardPatch
	}{
		{"guard on (defaults)", liveconfig.StoreGuardPatch{}},
		{"guard off", liveconfig.StoreGuardPatch{StoreGuardEnabled: ptr(false)}},
	} {
		t.Run(mode.name, func(t *testing.T) { benchStall(t, mode.name, mode.patch, rate) })
	}
}

type sample struct {
	start, took time.Duration // since the stall began
	status      int
}

func benchStall(t *testing.T, name string, patch liveconfig.StoreGuardPatch, rate int) {
	g := startGuardNode(t, patch)
	token, _ := g.login(t, "alice@demo.parley.dev")
	const stall = 2 * time.Second
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}

	var (
		mu      sync.Mutex
		samples []sample
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	var t0 time.Time
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				s := time.Now()
				st, _, _, _ := g.callWith(client, "GET", "/workspaces", token, nil)
				mu.Lock()
				samples = append(samples, sample{start: s.Sub(t0), took: time.Since(s), status: st})
				mu.Unlock()
			})
		}
	}()
	// Warm up for 2 s, then stall.
	time.Sleep(2 * time.Second)
	mu.Lock()
	t0 = time.Now()
	samples = samples[:0]
	mu.Unlock()
	g.proxy.BlackHole()
	var opened, closed time.Duration = -1, -1
	healed := false
	for {
		el := time.Since(t0)
		if !healed && el >= stall {
			g.proxy.Heal()
			healed = true
		}
		state := g.n.guarded.State()
		if opened < 0 && state == "open" {
			opened = el
		}
		if healed && opened >= 0 && closed < 0 && state == "closed" {
			closed = el
		}
		if el > 30*time.Second || (healed && (closed >= 0 || opened < 0) && el > stall+8*time.Second) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	// The first request started after the heal that succeeded marks the
	// node's recovery as clients see it.
	recovered := time.Duration(-1)
	var window []sample // requests started during the stall or before recovery
	for _, s := range samples {
		if s.start < 0 {
			continue
		}
		if s.start >= stall && s.status == 200 && (recovered < 0 || s.start < recovered) {
			recovered = s.start
		}
	}
	for _, s := range samples {
		if s.start >= 0 && (recovered < 0 || s.start < recovered) {
			window = append(window, s)
		}
	}
	failed, fast := 0, 0
	var lat []time.Duration
	for _, s := range window {
		if s.status != 200 {
			failed++
		}
		if s.status == http.StatusServiceUnavailable {
			fast++
		}
		lat = append(lat, s.took)
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(time.Millisecond)
	}
	ms := func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	t.Logf("%s: rate %d/s, stall %v | breaker opened at %s, closed at %s (%s after the heal) | "+
		"first 200 after the heal at %s (%s after it) | %d requests until then: %.1f%% failed (%d were 503), "+
		"latency p50 %v p99 %v max %v",
		name, rate, stall, ms(opened), ms(closed), ms(max(-1, closed-stall)), ms(recovered), ms(max(-1, recovered-stall)),
		len(window), 100*float64(failed)/float64(max(1, len(window))), fast, q(0.5), q(0.99), q(1))
}
