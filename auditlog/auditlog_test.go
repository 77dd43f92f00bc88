package auditlog_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/auditlog"
	"parley/sqlstore"
	"parley/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture: a real SQLite store with a workspace and a bot in it.
type fixture struct {
	st         *sqlstore.Store
	owner, bot string
	ws         string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Path: filepath.Join(t.TempDir(), "p.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	owner := storetest.MustUser(t, st, "owner")
	ws := storetest.MustWorkspace(t, st, owner)
	b, err := st.CreateBot(context.Background(), owner.ID, ws.ID, parley.NewBot{Name: "CI", Handle: "ci-bot"})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: st, owner: owner.ID, bot: b.User.ID, ws: ws.ID}
}

// entries reads the whole audit log of the workspace.
func (f *fixture) entries(t *testing.T) []parley.AuditEntry {
	t.Helper()
	var out []parley.AuditEntry
	cursor := ""
	for {
		p, err := f.st.BotAudit(context.Background(), f.owner, f.ws, "", cursor, 200)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Entries...)
		if p.NextCursor == "" {
			return out
		}
		cursor = p.NextCursor
	}
}

// gate is the real store with a switch that holds AuditBots calls until
// opened (a stalled database), and can make them panic once.
type gate struct {
	auditlog.Store
	hold    atomic.Bool
	open    chan struct{}
	calls   atomic.Int64
	panicky atomic.Bool
}

func (g *gate) AuditBots(ctx context.Context, es []parley.AuditEntry) (int, error) {
	g.calls.Add(1)
	if g.panicky.CompareAndSwap(true, false) {
		panic("store blew up")
	}
	if g.hold.Load() {
		select {
		case <-g.open:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return g.Store.AuditBots(ctx, es)
}

// TestWriterWritesEverything: entries recorded from many goroutines are all
// written, in few transactions, and Close flushes what is queued.
func TestWriterWritesEverything(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	g := &gate{Store: f.st}
	w := auditlog.New(auditlog.Config{Store: g, Logger: quiet, Registerer: reg})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range 100 {
				w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "POST /channels/{id}/messages", Target: "/x", Status: 200 + j%2})
			}
		})
	}
	wg.Wait()
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(f.entries(t)); got != 800 {
		t.Fatalf("%d entries written, want 800", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "parley_bot_audit_written_total")); got != 800 {
		t.Fatalf("written_total %v", got)
	}
	t.Logf("800 entries in %d transactions", g.calls.Load())
	// Closed: a late entry is written by its caller, not lost.
	w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "late", Status: 200})
	if got := len(f.entries(t)); got != 801 {
		t.Fatalf("after a late entry: %d, want 801", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "parley_bot_audit_sync_total")); got != 1 {
		t.Fatalf("sync_total %v, want 1", got)
	}
}

// TestWriterQueueFull: with the store stalled and the queue full, Record
// writes the entry itself instead of dropping it; once the store answers,
// everything is there.
func TestWriterQueueFull(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	g := &gate{Store: f.st, open: make(chan struct{})}
	g.hold.Store(true)
	w := auditlog.New(auditlog.Config{Store: g, Queue: 2, Logger: quiet, Registerer: reg})
	w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "a", Status: 200})
	waitFor(t, "the writer to be held in the store", func() bool { return g.calls.Load() == 1 })
	w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "b", Status: 200})
	w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "c", Status: 200})
	g.hold.Store(false) // the next call (the caller's own) goes through
	w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "d", Status: 200})
	if got := testutil.ToFloat64(counter(t, reg, "parley_bot_audit_sync_total")); got != 1 {
		t.Fatalf("sync_total %v, want 1 (the entry that found the queue full)", got)
	}
	close(g.open)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(f.entries(t)); got != 4 {
		t.Fatalf("%d entries, want 4", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "parley_bot_audit_dropped_total")); got != 0 {
		t.Fatalf("dropped %v", got)
	}
}

// TestWriterFailures: a store that fails is retried, then the batch is
// dropped and counted; a store that panics does not end the writer; a
// shutdown that cannot wait for a stalled store counts what it left.
func TestWriterFailures(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		f := newFixture(t)
		reg := prometheus.NewRegistry()
		g := &gate{Store: f.st}
		w := auditlog.New(auditlog.Config{Store: g, Backoff: time.Millisecond, Logger: quiet, Registerer: reg})
		f.st.Close()
		w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "a", Status: 200})
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := g.calls.Load(); got != 3 {
			t.Fatalf("%d attempts, want 3 (two retries)", got)
		}
		if got := testutil.ToFloat64(dropped(t, reg, "error")); got != 1 {
			t.Fatalf("dropped{error} %v, want 1", got)
		}
	})
	t.Run("panic", func(t *testing.T) {
		f := newFixture(t)
		reg := prometheus.NewRegistry()
		g := &gate{Store: f.st}
		g.panicky.Store(true)
		w := auditlog.New(auditlog.Config{Store: g, Backoff: time.Millisecond, Logger: quiet, Registerer: reg})
		w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "a", Status: 200})
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := len(f.entries(t)); got != 1 {
			t.Fatalf("%d entries after a panic and a retry, want 1", got)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		f := newFixture(t)
		reg := prometheus.NewRegistry()
		g := &gate{Store: f.st, open: make(chan struct{})}
		g.hold.Store(true)
		w := auditlog.New(auditlog.Config{Store: g, Timeout: 200 * time.Millisecond, Backoff: time.Hour, Logger: quiet, Registerer: reg})
		w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "a", Status: 200})
		waitFor(t, "the writer to be held in the store", func() bool { return g.calls.Load() == 1 })
		w.Record(context.Background(), parley.AuditEntry{BotID: f.bot, Action: "b", Status: 200})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with the store stalled: %v", err)
		}
		if got := testutil.ToFloat64(dropped(t, reg, "shutdown")); got != 2 {
			t.Fatalf("dropped{shutdown} %v, want 2", got)
		}
	})
}

func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return collector{reg, name, nil}
}

func dropped(t *testing.T, reg *prometheus.Registry, reason string) prometheus.Collector {
	t.Helper()
	return collector{reg, "parley_bot_audit_dropped_total", map[string]string{"reason": reason}}
}

// collector exposes the sum of one registered series (with the given
// labels) for testutil.ToFloat64.
type collector struct {
	reg    *prometheus.Registry
	name   string
	labels map[string]string
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc("sum", "sum", nil, nil)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := c.reg.Gather()
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != c.name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := c.labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("sum", "sum", nil, nil), prometheus.GaugeValue, sum)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
