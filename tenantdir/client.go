package tenantdir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// Defaults of ClientConfig's zero values.
const (
	DefaultTTL            = time.Hour
	DefaultRefreshAfter   = 5 * time.Minute
	DefaultRequestTimeout = 500 * time.Millisecond
	DefaultStaleRetry     = time.Second
	DefaultMaxSize        = 100_000
)

// ClientConfig configures a Client.
type ClientConfig struct {
	NATS     NATS
	Audience Audience
	// Regions whose replicas a load asks, all at once; the first answer
	// wins.
	Regions []string
	// TTL: how long an entry lives (default an hour: changes arrive over
	// the bus, so age is no reason to drop one).
	TTL time.Duration
	// RefreshAfter: a lookup of an entry older than this answers at once
	// and reloads it in the background (refresh-ahead; default 5 min).
	RefreshAfter time.Duration
	// RequestTimeout bounds a load's wait for the replicas (default 500 ms).
	RequestTimeout time.Duration
	// StaleRetry: how often a last-known-good entry, served while no
	// replica answers, is retried in the background (default 1 s).
	StaleRetry time.Duration
	// MaxSize bounds the cache (default 100,000 workspaces).
	MaxSize int
	// Chaos, when set, can add latency to random lookups.
	Chaos      *Chaos
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Client is the directory in a node (the TCS sidecar, as a library): a
// long-lived local cache of workspace records, loaded from the replicas
// of every region at once, refreshed ahead of need, updated over the bus
// as the catalogue changes, and serving the last-known-good record when
// no replica answers. It is safe for concurrent use.
//
// Store routing (issue 17 item 4) resolves a request's shard through
// Lookup: a cached lookup is an in-memory read.
type Client struct {
	n       NATS
	aud     Audience
	regions []string
	timeout time.Duration
	chaos   *Chaos
	log     *slog.Logger
	m       *clientMetrics

	cache  *otter.Cache[string, *entry]
	latest *otter.Cache[string, Record] // records heard on the bus lately (see Load)
	// loaded holds each load's answer for a moment: otter's Get can start
	// a second load of a key when it looks the key up just before the
	// first load stores its entry and looks for a load in flight just
	// after that load finished. A load that finds its key here takes the
	// answer instead of asking the replicas again (see Load).
	loaded *otter.Cache[string, Record]
	lkg    sync.Map // workspace id -> Record: the last good answer, kept past expiry
	sub    *nats.Subscription

	// onHeard, when set (tests, benchmarks), is called with every change
	// heard and its lag since the commit.
	onHeard func(rec Record, lag time.Duration)
	// onChange is OnChange's function (nil: none).
	onChange atomic.Pointer[func(Record)]
}

// OnChange has fn called with every workspace change the client hears on
// the bus, after its cache has it: a node acts on a change of a workspace
// it serves (the gateway closes the bots of a workspace that turned
// integrations off). fn runs on the subscription's goroutine: it must not
// block. A panic in it is logged, as one applying the change is.
func (c *Client) OnChange(fn func(Record)) {
	if fn == nil {
		c.onChange.Store(nil)
		return
	}
	c.onChange.Store(&fn)
}

// entry is a cached record; stale marks a last-known-good record served
// because no replica answered.
type entry struct {
	rec   Record
	stale bool
}

// NewClient starts a client: it subscribes to its audience's changes.
func NewClient(cfg ClientConfig) (*Client, error) {
	n, err := cfg.NATS.check()
	if err != nil {
		return nil, err
	}
	if len(cfg.Regions) == 0 {
		return nil, errors.New("tenantdir: client needs at least one region")
	}
	for _, r := range cfg.Regions {
		if err := checkID("region", r); err != nil {
			return nil, err
		}
	}
	ttl := orDefault(cfg.TTL, DefaultTTL)
	refresh := orDefault(cfg.RefreshAfter, DefaultRefreshAfter)
	staleRetry := orDefault(cfg.StaleRetry, DefaultStaleRetry)
	size := cfg.MaxSize
	if size <= 0 {
		size = DefaultMaxSize
	}
	c := &Client{n: n, aud: cfg.Audience, regions: cfg.Regions, chaos: cfg.Chaos, log: cfg.Logger,
		timeout: orDefault(cfg.RequestTimeout, DefaultRequestTimeout), m: newClientMetrics(cfg.Registerer)}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("component", "tenantdir-client")
	c.cache, err = otter.New(&otter.Options[string, *entry]{
		MaximumSize:      size,
		ExpiryCalculator: otter.ExpiryWriting[string, *entry](ttl),
		RefreshCalculator: otter.RefreshWritingFunc(func(e otter.Entry[string, *entry]) time.Duration {
			if e.Value.stale {
				return staleRetry
			}
			return refresh
		}),
		StatsRecorder: statsRecorder{c.m},
		Logger:        otterLogger{c.log},
	})
	if err != nil {
		return nil, fmt.Errorf("tenantdir: cache: %w", err)
	}
	c.latest = otter.Must(&otter.Options[string, Record]{
		MaximumSize:      10_000,
		ExpiryCalculator: otter.ExpiryWriting[string, Record](10 * time.Second),
	})
	c.loaded = otter.Must(&otter.Options[string, Record]{
		MaximumSize:      10_000,
		ExpiryCalculator: otter.ExpiryWriting[string, Record](min(justLoaded, ttl/2)),
	})
	if c.sub, err = n.Conn.Subscribe(n.workspaceChangesOf(c.aud), c.heard); err != nil {
		return nil, fmt.Errorf("tenantdir: subscribe to changes: %w", err)
	}
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Close stops following changes; the cache stays readable.
func (c *Client) Close() error {
	err := c.sub.Unsubscribe()
	c.cache.StopAllGoroutines()
	c.latest.StopAllGoroutines()
	c.loaded.StopAllGoroutines()
	return err
}

// Lookup returns a workspace's record: from the cache (an in-memory read),
// or loaded from the first region's replica to answer (one load per key
// however many ask at once). When no replica answers it returns the
// last-known-good record, counted in parley_tenantdir_stale_serves_total;
// with none, an EUNAVAILABLE error. An unknown workspace is ENOTFOUND.
func (c *Client) Lookup(ctx context.Context, ws string) (Record, error) {
	if d := c.chaos.lookupDelay(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Record{}, ctx.Err()
		}
	}
	e, err := c.cache.Get(ctx, ws, loader{c})
	if err == nil {
		if e.stale {
			c.m.staleServes.Inc()
		}
		return e.rec, nil
	}
	if errors.Is(err, otter.ErrNotFound) {
		return Record{}, parley.Errorf(parley.ENOTFOUND, "workspace %s is not in the directory", ws)
	}
	if v, ok := c.lkg.Load(ws); ok {
		// Keep serving it, retried in the background every StaleRetry.
		c.cache.SetIfAbsent(ws, &entry{rec: v.(Record), stale: true})
		c.m.staleServes.Inc()
		return v.(Record), nil
	}
	return Record{}, parley.Errorf(parley.EUNAVAILABLE, "directory: %v", err)
}

// Invalidate drops a workspace's cached record (its last-known-good is
// kept).
func (c *Client) Invalidate(ws string) {
	c.loaded.Invalidate(ws)
	c.cache.Invalidate(ws)
}

// loader is the client's otter.Loader.
type loader struct{ c *Client }

// justLoaded is how long a load's answer answers another load of its key
// (Client.loaded; at most half the TTL): long enough to cover otter's
// window between a load storing its entry and leaving its in-flight
// table, even on a machine that preempts the loader there, and short
// enough that the answer is as fresh as a cached one.
const justLoaded = 50 * time.Millisecond

// Load asks every region, unless a load of the key has just answered.
func (l loader) Load(ctx context.Context, ws string) (*entry, error) {
	return l.load(ctx, ws, true)
}

// load asks every region; with shared, a load of ws that answered within
// justLoaded answers this one too.
func (l loader) load(ctx context.Context, ws string, shared bool) (*entry, error) {
	c := l.c
	rec, ok := Record{}, false
	if shared {
		rec, ok = c.loaded.GetIfPresent(ws)
	}
	if !ok {
		var err error
		if rec, err = c.ask(ctx, ws); err != nil {
			return nil, err
		}
		c.loaded.Set(ws, rec)
	}
	// A change heard while this load was in flight found no entry to
	// replace; it wins if newer.
	if heard, ok := c.latest.GetIfPresent(ws); ok && heard.Version > rec.Version {
		if heard.Removed {
			return nil, otter.ErrNotFound
		}
		rec = heard
	}
	c.lkg.Store(ws, rec)
	return &entry{rec: rec}, nil
}

// Reload is the refresh-ahead. When no replica answers, the old record
// stays, marked stale (so retried every StaleRetry and counted as a stale
// serve).
func (l loader) Reload(ctx context.Context, ws string, old *entry) (*entry, error) {
	c := l.c
	e, err := l.load(ctx, ws, false) // a refresh asks, whatever was loaded lately
	if err == nil || errors.Is(err, otter.ErrNotFound) {
		return e, err
	}
	c.m.reloadFailures.Inc()
	return &entry{rec: old.rec, stale: true}, nil
}

// ask races the regions' replicas: the first record wins; not_found only
// when no region has it.
func (c *Client) ask(ctx context.Context, ws string) (Record, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	type answer struct {
		rec      Record
		notFound bool
		err      error
	}
	answers := make(chan answer, len(c.regions))
	for _, region := range c.regions {
		go func() {
			a := answer{}
			msg, err := c.n.Conn.RequestWithContext(ctx, c.n.lookupSubject(c.aud, region), []byte(ws))
			var rep lookupReply
			switch {
			case err != nil:
				a.err = fmt.Errorf("region %s: %w", region, err)
			case json.Unmarshal(msg.Data, &rep) != nil:
				a.err = fmt.Errorf("region %s: undecodable answer", region)
			case rep.Record != nil:
				a.rec = *rep.Record
			case rep.Error == "not_found":
				a.notFound = true
			default:
				a.err = fmt.Errorf("region %s: %s", region, rep.Error)
			}
			result := "ok"
			switch {
			case a.notFound:
				result = "not_found"
			case a.err != nil && ctx.Err() == context.Canceled:
				result = "late"
			case a.err != nil:
				result = "error"
			}
			c.m.replica.WithLabelValues(region, result).Inc()
			answers <- a
		}()
	}
	var errs []error
	notFound := false
	for range c.regions {
		a := <-answers
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.notFound:
			notFound = true
		default:
			c.m.loads.WithLabelValues("ok").Inc()
			c.m.loadSeconds.Observe(time.Since(start).Seconds())
			return a.rec, nil
		}
	}
	if notFound {
		c.m.loads.WithLabelValues("not_found").Inc()
		return Record{}, otter.ErrNotFound
	}
	c.m.loads.WithLabelValues("error").Inc()
	return Record{}, fmt.Errorf("no directory replica answered: %w", errors.Join(errs...))
}

// heard applies a change published by the relay (the bus's
// invalidation): a cached record is replaced by a newer one at once.
func (c *Client) heard(m *nats.Msg) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("tenant directory client: panic applying a change", "panic", v)
		}
	}()
	var ch Change
	if err := json.Unmarshal(m.Data, &ch); err != nil || ch.Workspace == nil {
		c.log.Warn("tenant directory client: undecodable change", "subject", m.Subject)
		return
	}
	rec := *ch.Workspace
	if !rec.ChangedAt.IsZero() {
		lag := time.Since(rec.ChangedAt)
		c.m.invalLag.Observe(lag.Seconds())
		if c.onHeard != nil {
			c.onHeard(rec, lag)
		}
	}
	if heard, ok := c.latest.GetIfPresent(rec.WorkspaceID); ok && heard.Version > rec.Version {
		return // a newer change was heard and applied already
	}
	c.latest.Set(rec.WorkspaceID, rec)
	changed := false
	c.cache.ComputeIfPresent(rec.WorkspaceID, func(old *entry) (*entry, otter.ComputeOp) {
		if !old.stale && old.rec.Version >= rec.Version {
			return old, otter.CancelOp
		}
		changed = true
		if rec.Removed {
			// The placement is gone: the next lookup asks the replicas
			// (not_found), and a load in flight sees the tombstone in
			// latest.
			return nil, otter.InvalidateOp
		}
		return &entry{rec: rec}, otter.WriteOp
	})
	if changed {
		c.m.invalidations.Inc()
	}
	defer func() {
		if fn := c.onChange.Load(); fn != nil {
			(*fn)(rec)
		}
	}()
	if old, ok := c.lkg.Load(rec.WorkspaceID); ok && old.(Record).Version < rec.Version {
		if rec.Removed {
			c.lkg.Delete(rec.WorkspaceID)
		} else {
			c.lkg.Store(rec.WorkspaceID, rec)
		}
	}
}

// statsRecorder feeds otter's statistics to the client's metrics.
type statsRecorder struct{ m *clientMetrics }

func (s statsRecorder) RecordHits(n int)                { s.m.hits.Add(float64(n)) }
func (s statsRecorder) RecordMisses(n int)              { s.m.misses.Add(float64(n)) }
func (s statsRecorder) RecordEviction(uint32)           {}
func (s statsRecorder) RecordLoadSuccess(time.Duration) {}
func (s statsRecorder) RecordLoadFailure(time.Duration) {}

// otterLogger sends otter's warnings to slog.
type otterLogger struct{ log *slog.Logger }

func (l otterLogger) Warn(ctx context.Context, msg string, err error) {
	l.log.WarnContext(ctx, "tenant directory cache: "+msg, "err", err)
}

func (l otterLogger) Error(ctx context.Context, msg string, err error) {
	l.log.ErrorContext(ctx, "tenant directory cache: "+msg, "err", err)
}
