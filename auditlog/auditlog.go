// Package auditlog writes the bot audit log (docs/integrations.md) off the
// request path: a bot's write is answered without waiting for its audit
// entry, and the entries of many requests go to the database in one
// transaction.
//
// Durability: an entry is queued in memory (bounded) and written within a
// batch's round trip. When the queue is full, or the writer is closed, the
// caller writes its entry itself (synchronously, as before): back-pressure,
// not loss. A batch the store refuses is retried; one that still fails is
// dropped and counted (parley_bot_audit_dropped_total), as are entries left
// when Close's context ends. Close flushes what is queued, so a graceful
// shutdown loses nothing; a crash loses at most what was queued then.
//
// This package must not know about HTTP or SQL: it takes entries and hands
// them to a Store.
package auditlog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/promutil"
)

// Store records audit entries; parley.IntegrationStore has it.
type Store interface {
	AuditBots(ctx context.Context, entries []parley.AuditEntry) (int, error)
}

// Config configures a Writer. Zero values are the documented defaults.
type Config struct {
	Store Store
	// Queue bounds the entries waiting (default 4096).
	Queue int
	// Batch bounds the entries of one transaction (default 256).
	Batch int
	// Retries of a failed batch before it is dropped (default 2), Backoff
	// the wait before the first (default 100 ms, doubling).
	Retries int
	Backoff time.Duration
	// Timeout bounds one write (default 5 s).
	Timeout    time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Writer queues entries and writes them in batches; safe for concurrent
// use. Its one goroutine is started by New and ended by Close.
type Writer struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	mu     sync.RWMutex // guards closed and sends on q
	closed bool
	q      chan parley.AuditEntry
	done   chan struct{} // closed when the goroutine has drained q
	abort  chan struct{} // closed by Close when its context ends: drop the rest

	written prometheus.Counter
	sync    prometheus.Counter
	dropped *prometheus.CounterVec
}

// New starts a Writer.
func New(cfg Config) *Writer {
	if cfg.Queue <= 0 {
		cfg.Queue = 4096
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 2
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Writer{cfg: cfg, log: cfg.Logger, now: time.Now,
		q: make(chan parley.AuditEntry, cfg.Queue), done: make(chan struct{}), abort: make(chan struct{})}
	w.written = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_bot_audit_written_total", Help: "Bot audit entries written to the database."}))
	w.sync = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_bot_audit_sync_total", Help: "Bot audit entries the request wrote itself (the queue was full or closed)."}))
	w.dropped = promutil.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_bot_audit_dropped_total", Help: "Bot audit entries lost: the store refused them after retries (error), or shutdown ended first (shutdown)."},
		[]string{"reason"}))
	for _, r := range []string{"error", "shutdown"} {
		w.dropped.WithLabelValues(r)
	}
	promutil.Register(cfg.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "parley_bot_audit_queued", Help: "Bot audit entries waiting to be written."},
		func() float64 { return float64(len(w.q)) }))
	go w.run()
	return w
}

// Record queues e (its ID and At are set now when empty). It does not wait
// for the database unless the queue is full or the writer closed; then it
// writes e itself, bounded by ctx and the write timeout.
func (w *Writer) Record(ctx context.Context, e parley.AuditEntry) {
	if e.ID == "" {
		e.ID = parley.NewID(parley.PrefixAuditEntry)
	}
	if e.At.IsZero() {
		e.At = w.now()
	}
	w.mu.RLock()
	if !w.closed {
		select {
		case w.q <- e:
			w.mu.RUnlock()
			return
		default:
		}
	}
	w.mu.RUnlock()
	w.sync.Inc()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Timeout)
	defer cancel()
	n, err := w.cfg.Store.AuditBots(ctx, []parley.AuditEntry{e})
	if err != nil {
		w.dropped.WithLabelValues("error").Inc()
		w.log.Warn("bot audit entry not written", "bot_id", e.BotID, "action", e.Action, "err", err)
		return
	}
	w.written.Add(float64(n))
}

// Close stops queueing (later entries are written by their callers) and
// waits until what is queued is written, or until ctx ends: what is left
// then is dropped and counted.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.q)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		close(w.abort)
		<-w.done
		return fmt.Errorf("bot audit: flush at shutdown: %w", ctx.Err())
	}
}

// run is the writer's goroutine: it takes what is queued, up to a batch,
// and writes it in one transaction.
func (w *Writer) run() {
	defer close(w.done)
	batch := make([]parley.AuditEntry, 0, w.cfg.Batch)
	for e := range w.q {
		batch = append(batch[:0], e)
	more:
		for len(batch) < w.cfg.Batch {
			select {
			case e, ok := <-w.q:
				if !ok {
					break more
				}
				batch = append(batch, e)
			default:
				break more
			}
		}
		w.flush(batch)
	}
}

// flush writes one batch, retrying; a panic in the store is a failed
// attempt, not the end of the process.
func (w *Writer) flush(batch []parley.AuditEntry) {
	select {
	case <-w.abort:
		w.dropped.WithLabelValues("shutdown").Add(float64(len(batch)))
		return
	default:
	}
	backoff := w.cfg.Backoff
	var err error
	for attempt := 0; ; attempt++ {
		var n int
		if n, err = w.write(batch); err == nil {
			w.written.Add(float64(n))
			return
		}
		if attempt == w.cfg.Retries {
			break
		}
		select {
		case <-time.After(backoff):
		case <-w.abort:
			w.dropped.WithLabelValues("shutdown").Add(float64(len(batch)))
			return
		}
		backoff *= 2
	}
	w.dropped.WithLabelValues("error").Add(float64(len(batch)))
	w.log.Warn("bot audit entries not written", "entries", len(batch), "err", err)
}

func (w *Writer) write(batch []parley.AuditEntry) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bot audit: store panicked: %v", p)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
	defer cancel()
	return w.cfg.Store.AuditBots(ctx, batch)
}
