package tenantdir

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// reportQuantiles reports the p50 and p99 of samples as benchmark metrics.
func reportQuantiles(b *testing.B, samples []time.Duration, unit string) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	q := func(p float64) float64 {
		return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Nanoseconds())
	}
	switch unit {
	case "ns":
		b.ReportMetric(q(0.50), "p50-ns")
		b.ReportMetric(q(0.99), "p99-ns")
	default:
		b.ReportMetric(q(0.50)/1e3, "p50-µs")
		b.ReportMetric(q(0.99)/1e3, "p99-µs")
	}
}

// benchDir is a directory with one region, 200 placed workspaces, and a
// client that has them all cached.
func benchDir(b *testing.B) (*dir, *Client, []string) {
	d := newDir(b, "eu")
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = fmt.Sprintf("w%04d", i)
		d.place(b, ids[i], "eu")
	}
	c, _ := d.client(b, ClientConfig{Regions: []string{"eu"}})
	for _, id := range ids {
		lookupEventually(b, c, id)
	}
	return d, c, ids
}

// BenchmarkLookupCached: one goroutine, a cached lookup (the in-process
// path every request will take). ns/op is the mean; p50/p99 are of each
// lookup timed on its own (one in 16; the timer adds some tens of ns).
func BenchmarkLookupCached(b *testing.B) {
	_, c, ids := benchDir(b)
	ctx := context.Background()
	samples := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		i++
		// Time one lookup in 16, so that ns/op is mostly the lookup's own.
		if i%16 == 0 && len(samples) < cap(samples) {
			t0 := time.Now()
			c.Lookup(ctx, id)
			samples = append(samples, time.Since(t0))
		} else {
			c.Lookup(ctx, id)
		}
	}
	b.StopTimer()
	reportQuantiles(b, samples, "ns")
}

// BenchmarkLookupCachedParallel: every core looks up at once; lookups/s is
// what one node's client serves.
func BenchmarkLookupCachedParallel(b *testing.B) {
	_, c, ids := benchDir(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Lookup(ctx, ids[i%len(ids)])
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
}

// BenchmarkLookupCold: the entry is dropped before each lookup, so each
// one loads from the region's replica over NATS (loopback TCP).
func BenchmarkLookupCold(b *testing.B) {
	_, c, ids := benchDir(b)
	ctx := context.Background()
	samples := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		i++
		c.Invalidate(id)
		t0 := time.Now()
		if _, err := c.Lookup(ctx, id); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	reportQuantiles(b, samples, "µs")
}

// BenchmarkInvalidationPropagation: a catalogue change, committed, relayed
// to JetStream and heard by three nodes' clients (each on its own
// connection). The lag is from the commit to each client's hearing of it;
// each op waits for all three.
func BenchmarkInvalidationPropagation(b *testing.B) {
	d := newDir(b, "eu")
	d.place(b, "w", "eu")
	var mu sync.Mutex
	var samples []time.Duration
	heard := make(chan int64, 64)
	for range 3 {
		c, _ := d.client(b, ClientConfig{Regions: []string{"eu"}})
		lookupEventually(b, c, "w")
		c.onHeard = func(rec Record, lag time.Duration) {
			mu.Lock()
			samples = append(samples, lag)
			mu.Unlock()
			heard <- rec.Version
		}
	}
	ctx := context.Background()
	i := int64(0)
	for b.Loop() {
		i++
		r, err := d.cat.SetOverrides(ctx, "w", map[string]int64{"members": i}, nil)
		if err != nil {
			b.Fatal(err)
		}
		for got := 0; got < 3; {
			select {
			case v := <-heard:
				if v == r.Version {
					got++
				}
			case <-time.After(10 * time.Second):
				b.Fatalf("change %d not heard by all three clients", r.Version)
			}
		}
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	reportQuantiles(b, samples, "µs")
}

// BenchmarkReplicaParallel: lookups/s one node's replica serves over NATS
// request-reply (loopback TCP), the cache bypassed: 4 client connections
// (other nodes), 16 requests in flight per core, each a workspace id
// answered with its record. The replica answers on its subscription's one
// goroutine, so this is one replica's ceiling; a region scales it with
// more nodes in the queue group.
func BenchmarkReplicaParallel(b *testing.B) {
	d, _, ids := benchDir(b)
	subject := d.n.lookupSubject(AudienceAPI, "eu")
	conns := make([]*nats.Conn, 4)
	for i := range conns {
		conns[i] = mustConn(b, d.url)
	}
	var next atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		w := next.Add(1)
		nc := conns[int(w)%len(conns)]
		i := int(w)
		for pb.Next() {
			msg, err := nc.Request(subject, []byte(ids[i%len(ids)]), 5*time.Second)
			i++
			if err != nil {
				b.Error(err)
				return
			}
			if !bytes.Contains(msg.Data, []byte(`"record"`)) {
				b.Errorf("replica answered %s", msg.Data)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
}
