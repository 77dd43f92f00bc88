// Package storeguard puts bulkheads and a circuit breaker around every call
// of a parley.Store (docs/store-guard.md).
//
// Every method has a purpose (writes, history reads, search, boot, other
// reads). Each purpose has a bounded number of calls in flight on this
// node: a call finding its purpose full waits a few milliseconds at most,
// then fails with EUNAVAILABLE, so that a slow database fills one
// purpose's slots and not every request goroutine of the node (the
// bulkheads of LINE's storage tier, Discord's fail-fast semaphores).
//
// One circuit breaker per database (sony/gobreaker) watches the calls that
// run: a call that fails for the server's reasons (not a client error such
// as ENOTFOUND), or that is still running after the slow-call threshold,
// is a failure. When the failures reach a rate over a rolling window the
// breaker opens and every call fails at once, with Retry-After saying when
// it will try again; after the open period a few probe calls go through
// (half-open) and their success closes it.
//
// The thresholds are live keys (parley.StoreGuardConfig) read on every
// call; the breaker is rebuilt, closed, when its window or open period
// changes. In dry run nothing is rejected; what would have been is counted
// and logged.
package storeguard

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"parley"
)

// Purpose is the class of a store call; each has its own bulkhead.
type Purpose int

const (
	Write   Purpose = iota // changes
	History                // messages, replies, pins, events, sync, threads
	Search                 // full-text search
	Boot                   // boot, session channels, directories, the gateway's fills
	Read                   // every other read (sessions, profiles, channels)
	numPurposes
)

var purposeNames = [numPurposes]string{"write", "history", "search", "boot", "read"}

func (p Purpose) String() string { return purposeNames[p] }

// limit returns the bulkhead size of p in c.
func (p Purpose) limit(c *parley.StoreGuardConfig) int {
	switch p {
	case Write:
		return c.StoreGuardWrites
	case History:
		return c.StoreGuardHistory
	case Search:
		return c.StoreGuardSearch
	case Boot:
		return c.StoreGuardBoot
	}
	return c.StoreGuardReads
}

// heavy reports whether p's calls are heavy reads whose latency grows with
// what they read (a workspace's boot, a search), not only with the
// database's health: they may wait longer for a slot, and count as slow
// only past heavySlow times the slow-call threshold, so that a connect
// storm (thousands of boots at once on a busy node) is queued and served
// rather than taken for a failing database.
func (p Purpose) heavy() bool { return p == Boot || p == Search }

// heavyWait and heavySlow scale the wait for a slot and the slow-call
// threshold of heavy calls (defaults: 500 ms and 2 s).
const (
	heavyWait = 25
	heavySlow = 4
)

// Config is what New needs. Store and Live are required.
type Config struct {
	Store parley.Store
	Live  parley.LiveConfigSource
	// Database names the database in metrics and logs ("postgres",
	// "sqlite"); the breaker is this database's.
	Database   string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Guard is a parley.Store that guards every call of the store it wraps.
type Guard struct {
	s        parley.Store
	live     parley.LiveConfigSource
	db       string
	log      *slog.Logger
	metrics  *metrics
	bulkhead [numPurposes]bulkhead

	mu  sync.Mutex // serialises rebuilding the breaker
	brk atomic.Pointer[breaker]

	lastDryLog atomic.Int64 // unix nanos of the last dry-run log line

	calls   inFlight    // every call running, for Drain
	drained atomic.Bool // set by Drain: calls are refused
}

var _ parley.Store = (*Guard)(nil)

// New returns a guard around cfg.Store.
func New(cfg Config) *Guard {
	if cfg.Store == nil || cfg.Live == nil {
		panic("storeguard: Config.Store and Config.Live are required")
	}
	g := &Guard{s: cfg.Store, live: cfg.Live, db: cfg.Database, log: cfg.Logger}
	if g.db == "" {
		g.db = "default"
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.metrics = newMetrics(cfg.Registerer, g.db)
	for i := range g.bulkhead {
		g.bulkhead[i].init()
	}
	c := cfg.Live.LiveConfig().StoreGuardConfig
	g.breakerFor(&c)
	return g
}

// Unwrap returns the guarded store.
func (g *Guard) Unwrap() parley.Store { return g.s }

// State returns the breaker's state: "closed", "half-open" or "open".
func (g *Guard) State() string { return g.brk.Load().cb.State().String() }

// breaker is one gobreaker with the settings it was built with.
type breaker struct {
	cb              *gobreaker.TwoStepCircuitBreaker[struct{}]
	openFor, window time.Duration
	openedAt        atomic.Int64 // unix nanos of the last opening
}

// probes is how many calls a half-open breaker lets through; that many
// successes in a row close it.
const probes = 3

// errSlow is what a call still running at the slow-call threshold reports
// to the breaker.
var errSlow = errors.New("storeguard: slow call")

// breakerFor returns the breaker for c's window and open period, building
// a new (closed) one when they changed.
func (g *Guard) breakerFor(c *parley.StoreGuardConfig) *breaker {
	openFor := time.Duration(c.StoreGuardOpenSeconds) * time.Second
	window := time.Duration(c.StoreGuardWindowSeconds) * time.Second
	if b := g.brk.Load(); b != nil && b.openFor == openFor && b.window == window {
		return b
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if b := g.brk.Load(); b != nil && b.openFor == openFor && b.window == window {
		return b
	}
	b := &breaker{openFor: openFor, window: window}
	bucket := time.Second
	if window < 2*bucket {
		bucket = 0 // a fixed window
	}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         g.db,
		MaxRequests:  probes,
		Interval:     window,
		BucketPeriod: bucket,
		Timeout:      openFor,
		ReadyToTrip:  g.readyToTrip,
		IsExcluded:   excluded,
		IsSuccessful: func(err error) bool { return !failed(err) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.openedAt.Store(time.Now().UnixNano())
			}
			g.metrics.transition(from, to)
			lvl := slog.LevelWarn
			if to == gobreaker.StateClosed {
				lvl = slog.LevelInfo
			}
			g.log.Log(context.Background(), lvl, "store breaker changed state",
				"database", g.db, "from", from.String(), "to", to.String())
		},
	})
	if old := g.brk.Load(); old != nil && old.cb.State() != gobreaker.StateClosed {
		g.metrics.transition(old.cb.State(), gobreaker.StateClosed)
		g.log.Info("store breaker rebuilt closed: its window or open period changed", "database", g.db)
	}
	g.brk.Store(b)
	g.metrics.state.Set(0)
	return b
}

// readyToTrip opens the breaker after the given number of failures in a
// row, or when at least the minimum of calls ended in the window and the
// failed share of them reaches the rate.
func (g *Guard) readyToTrip(n gobreaker.Counts) bool {
	c := g.live.LiveConfig().StoreGuardConfig
	if n.ConsecutiveFailures >= uint32(c.StoreGuardConsecutiveFailures) {
		return true
	}
	ended := uint64(n.TotalSuccesses) + uint64(n.TotalFailures)
	return ended >= uint64(c.StoreGuardMinCalls) &&
		uint64(n.TotalFailures)*100 >= uint64(c.StoreGuardErrorRatePct)*ended
}

// excluded: a call the client gave up on tells nothing about the
// database.
func excluded(err error) bool { return errors.Is(err, context.Canceled) }

// failed reports whether err is the database's failure: an internal error
// or the store's own EUNAVAILABLE. Client errors (ENOTFOUND, EINVALID,
// EFORBIDDEN, conflicts, caps…) are successes of the database.
func failed(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errSlow) {
		return true
	}
	switch parley.ErrorCode(err) {
	case parley.EINTERNAL, parley.EUNAVAILABLE:
		return true
	}
	return false
}

// Unavailable is the error of a call the guard failed fast: its code is
// EUNAVAILABLE (503) and RetryAfter says when to try again (httpapi turns
// it into Retry-After).
type Unavailable struct {
	err   *parley.Error
	retry time.Duration
	// Reason is "bulkhead" or "breaker".
	Reason string
}

func (u *Unavailable) Error() string             { return u.err.Error() }
func (u *Unavailable) Unwrap() error             { return u.err }
func (u *Unavailable) RetryAfter() time.Duration { return u.retry }

// call runs fn under p's bulkhead and the breaker.
func call[T any](g *Guard, ctx context.Context, p Purpose, fn func(context.Context) (T, error)) (T, error) {
	g.calls.begin()
	defer g.calls.end()
	// Checked after begin: a call that finds the guard not drained is
	// counted before Drain reads the count, so Drain waits for it.
	if g.drained.Load() {
		var zero T
		g.metrics.failedFast.WithLabelValues(p.String(), "drained").Inc()
		return zero, g.drainedError()
	}
	lc := g.live.LiveConfig()
	c := &lc.StoreGuardConfig
	if !c.StoreGuardEnabled {
		return fn(ctx)
	}
	var zero T
	m := g.metrics
	bh := &g.bulkhead[p]
	wait := time.Duration(c.StoreGuardWaitMs) * time.Millisecond
	slowAfter := time.Duration(c.StoreGuardSlowCallMs) * time.Millisecond
	if p.heavy() {
		wait, slowAfter = wait*heavyWait, slowAfter*heavySlow
	}
	if !bh.acquire(ctx, p.limit(c), wait) {
		if !c.StoreGuardDryRun {
			m.failedFast.WithLabelValues(p.String(), "bulkhead").Inc()
			return zero, &Unavailable{Reason: "bulkhead", retry: time.Second,
				err: parley.Errorf(parley.EUNAVAILABLE, "the database is busy with %s calls; try again shortly", p)}
		}
		g.dryRun(p, "bulkhead")
		bh.force()
	}
	m.inFlight[p].Inc()
	defer func() {
		m.inFlight[p].Dec()
		bh.release()
	}()

	b := g.breakerFor(c)
	done, err := b.cb.Allow()
	if err != nil {
		if !c.StoreGuardDryRun {
			m.failedFast.WithLabelValues(p.String(), "breaker").Inc()
			return zero, &Unavailable{Reason: "breaker", retry: b.retryAfter(),
				err: parley.Errorf(parley.EUNAVAILABLE, "the database is failing; try again shortly")}
		}
		g.dryRun(p, "breaker")
		done = nil // the breaker did not count this call
	}

	// report tells the breaker the call's outcome once: at the slow-call
	// threshold if it is still running then, else when it ends.
	var once atomic.Bool
	report := func(err error) {
		if once.CompareAndSwap(false, true) && done != nil {
			done(err)
		}
	}
	slow := time.AfterFunc(slowAfter, func() {
		if once.Load() {
			return
		}
		m.slow[p].Inc()
		report(errSlow)
	})
	ok := false
	defer func() {
		slow.Stop()
		if !ok { // fn panicked
			report(errors.New("storeguard: store call panicked"))
		}
	}()
	v, err := fn(ctx)
	ok = true
	if failed(err) && !excluded(err) {
		m.failures[p].Inc()
	}
	report(err)
	if Lost(err) {
		// The connection to the database broke under the call: the
		// database is unavailable, not the request wrong (503, not 500).
		return v, &Unavailable{Reason: "connection", retry: time.Second,
			err: parley.Errorf(parley.EUNAVAILABLE, "the database connection failed; try again shortly")}
	}
	return v, err
}

// Lost reports whether err is a broken connection to the database (reset,
// closed, refused, timed out at the network, or ended by the server), or a
// lost race the store's retries did not win (deadlock, serialization), as
// opposed to an error the database answered with that trying again would
// not change. The guard turns such an error into a 503 under
// its calls; the HTTP layer does the same for calls made while the guard
// is off.
func Lost(err error) bool {
	if err == nil || parley.ErrorCode(err) != parley.EINTERNAL || excluded(err) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// No connection could be made (refused, the database not
		// accepting connections, too many clients): unavailable.
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The server ended the connection (an administrator's
		// pg_terminate_backend, a shutdown, a crash recovery) or has no
		// connection slot left: unavailable for now, not a wrong request.
		// A deadlock or serialization failure that outlived the store's
		// retries is the same for the caller: try again shortly.
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53300", "40P01", "40001":
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// retryAfter is what is left of the open period (at least a second).
func (b *breaker) retryAfter() time.Duration {
	left := b.openFor - time.Since(time.Unix(0, b.openedAt.Load()))
	if left < time.Second {
		return time.Second
	}
	return left
}

// dryRun counts a call that would have been rejected and logs it, at most
// once a second.
func (g *Guard) dryRun(p Purpose, reason string) {
	g.metrics.dryRun.WithLabelValues(p.String(), reason).Inc()
	now := time.Now().UnixNano()
	last := g.lastDryLog.Load()
	if now-last >= int64(time.Second) && g.lastDryLog.CompareAndSwap(last, now) {
		g.log.Warn("store guard dry run: would have failed a call fast", "database", g.db,
			"purpose", p.String(), "reason", reason)
	}
}

// bulkhead bounds the calls in flight of one purpose. Its limit is the
// live one given on each acquire, so a change applies at once (calls
// already in flight above a lowered limit finish).
type bulkhead struct {
	mu       sync.Mutex
	inFlight int
	waiters  int
	freed    chan struct{} // closed and replaced on a release that has waiters
}

func (b *bulkhead) init() { b.freed = make(chan struct{}) }

// acquire takes a slot if one is free under limit, else waits up to wait
// for one (with no more waiters than limit). It reports whether it got one.
func (b *bulkhead) acquire(ctx context.Context, limit int, wait time.Duration) bool {
	b.mu.Lock()
	if b.inFlight < limit {
		b.inFlight++
		b.mu.Unlock()
		return true
	}
	if wait <= 0 || b.waiters >= limit {
		b.mu.Unlock()
		return false
	}
	b.waiters++
	freed := b.freed
	b.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-freed:
			b.mu.Lock()
			if b.inFlight < limit {
				b.inFlight++
				b.waiters--
				b.mu.Unlock()
				return true
			}
			freed = b.freed
			b.mu.Unlock()
			continue
		case <-t.C:
		case <-ctx.Done():
		}
		b.mu.Lock()
		b.waiters--
		b.mu.Unlock()
		return false
	}
}

// force takes a slot over the limit (dry run).
func (b *bulkhead) force() {
	b.mu.Lock()
	b.inFlight++
	b.mu.Unlock()
}

func (b *bulkhead) release() {
	b.mu.Lock()
	b.inFlight--
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
}

// String describes the guard for logs.
func (g *Guard) String() string { return fmt.Sprintf("storeguard(%s)", g.db) }

// Drain refuses every call from now on (503, reason "drained") and
// returns once the calls already in flight have returned, or with ctx's
// error if some still run then. Store routing drains the guard of a
// shard's store it replaced (the shard's DSN changed) before closing that
// store, so that no call is cut or runs on a closed store: one that
// resolved the old store a moment before is refused and retried by its
// client on the new one.
func (g *Guard) Drain(ctx context.Context) error {
	g.drained.Store(true)
	return g.calls.idle(ctx)
}

// Hold counts a call made outside the guard's bulkheads and breaker (an
// export, long by design) as in flight for Drain until release is called;
// on a drained guard it is refused as a call would be.
func (g *Guard) Hold() (release func(), err error) {
	g.calls.begin()
	if g.drained.Load() {
		g.calls.end()
		return nil, g.drainedError()
	}
	var once sync.Once
	return func() { once.Do(g.calls.end) }, nil
}

func (g *Guard) drainedError() error {
	return &Unavailable{Reason: "drained", retry: time.Second,
		err: parley.Errorf(parley.EUNAVAILABLE, "the database is being switched over; try again shortly")}
}

// inFlight counts calls in flight. The count is an atomic on the call
// path; the lock is taken only when a call ends at zero while someone
// waits in idle.
type inFlight struct {
	n       atomic.Int64
	waiting atomic.Bool // set (for good) by the first idle
	mu      sync.Mutex
	waiters []chan struct{} // guarded by mu
}

func (f *inFlight) begin() { f.n.Add(1) }

func (f *inFlight) end() {
	if f.n.Add(-1) == 0 && f.waiting.Load() {
		f.mu.Lock()
		if f.n.Load() == 0 {
			for _, w := range f.waiters {
				close(w)
			}
			f.waiters = nil
		}
		f.mu.Unlock()
	}
}

func (f *inFlight) idle(ctx context.Context) error {
	f.mu.Lock()
	// waiting is set before n is read: an end that brings n to zero
	// after this read sees it and wakes us.
	f.waiting.Store(true)
	if f.n.Load() == 0 {
		f.mu.Unlock()
		return nil
	}
	w := make(chan struct{})
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("storeguard: %d calls still in flight: %w", f.n.Load(), ctx.Err())
	}
}

// Run runs fn under p's bulkhead and the breaker, as the guard runs the
// store's own methods: for calls a wrapper of the store makes outside
// parley.Store (store routing's lookups of which workspace an id is in).
func (g *Guard) Run(ctx context.Context, p Purpose, fn func(context.Context) error) error {
	_, err := call(g, ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}
