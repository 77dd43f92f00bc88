package tenantdir

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"parley/internal/testpg"
	"parley/natsbus"
)

// forEachStore runs fn against a fresh catalogue on SQLite and on
// PostgreSQL.
func forEachStore(t *testing.T, fn func(t *testing.T, c *Catalogue)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, mustCatalogue(t, CatalogueConfig{Path: filepath.Join(t.TempDir(), "control.db")}))
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, mustCatalogue(t, CatalogueConfig{PostgresURL: testpg.New(t)}))
	})
}

func mustCatalogue(tb testing.TB, cfg CatalogueConfig) *Catalogue {
	tb.Helper()
	c, err := OpenCatalogue(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open catalogue: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// mustBus starts an embedded NATS with JetStream (no listener at all) and
// returns the directory's NATS settings on it, with a stream name of its
// own.
func mustBus(tb testing.TB) (NATS, *natsbus.Bus) {
	tb.Helper()
	b, err := natsbus.Start(natsbus.Config{JetStreamDir: tb.TempDir(), Name: "tenantdir-test"})
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	var r [4]byte
	rand.Read(r[:])
	return NATS{Conn: b.Conn(), Prefix: b.SubjectPrefix(), Stream: "TD_" + hex.EncodeToString(r[:])}, b
}

// waitFor polls cond until it holds or d passes.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mustServer runs a NATS server with JetStream on a random loopback port
// (never 4222) for tests that need several connections ("nodes").
func mustServer(tb testing.TB) string {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: tb.TempDir(), SyncAlways: true})
	if err != nil {
		tb.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats server not ready")
	}
	tb.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// mustConn is one node's connection.
func mustConn(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// counter reads a counter (or a counter of a vector) from reg.
func counter(tb testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				total += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}
