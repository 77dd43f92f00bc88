// Package shardstore routes a parley.Store over several PostgreSQL shards
// (issue 17 item 4, docs/directory.md#store-routing-item-4).
//
// The Router resolves each call's workspace, through the tenant directory
// (tenantdir.Client.Lookup) for a workspace id and through an immutable
// id -> workspace cache for channel, message and thread-root ids (filled on
// a miss by asking every shard at once and taking the one that has it),
// and runs the call on that shard's store: one *sqlstore.Store per shard,
// opened lazily from the directory's api-audience DSN, each behind its own
// storeguard.Guard (bulkheads, breaker, metrics labelled by shard id).
//
// Accounts and sessions live in the control database, which is the
// default shard (the node's own database); a user's row is copied to each
// other shard that holds one of their workspaces, because memberships
// refer to it, and profile changes are made on every shard holding a copy.
//
// The package must not join across shards on a request path: a call that
// spans workspaces (ListWorkspaces, UsersBatch, Sync, DeletedWorkspaces)
// asks each shard for its part and merges the answers. It must not decide
// placement policy (tenantdir.Catalogue.Place does) nor move workspaces
// (the mover does; it uses Shard and WriteAllowed).
package shardstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/sqlstore"
	"parley/storeguard"
	"parley/tenantdir"
)

// Directory resolves a workspace to its record; *tenantdir.Client (api
// audience) is one.
type Directory interface {
	Lookup(ctx context.Context, workspaceID string) (tenantdir.Record, error)
}

// Catalogue is what the router asks the control database: the shards (for
// their DSNs, and to know whom to ask for an id), a placement (with its
// slug) for a new workspace, its removal when the creation failed or the
// workspace was purged, and the freeing of a deleted workspace's slug.
// *tenantdir.Catalogue is one.
type Catalogue interface {
	Shards(ctx context.Context) ([]tenantdir.Shard, error)
	Place(ctx context.Context, p tenantdir.Placement) (tenantdir.Record, error)
	Unplace(ctx context.Context, workspaceID, shard string) (tenantdir.Record, error)
	FreeSlug(ctx context.Context, workspaceID, slug string) error
}

// Config is what New needs. Default, DefaultShard, Directory, Catalogue,
// Open and Live are required.
type Config struct {
	// Default is the node's own database: the control database of
	// accounts and sessions, the live configuration, and the shard of
	// every workspace the directory does not know.
	Default *sqlstore.Store
	// DefaultShard is the default store's shard id in the catalogue. A
	// shard whose DSN is empty is the default store too.
	DefaultShard string
	Directory    Directory
	Catalogue    Catalogue
	// Region is where new workspaces are placed.
	Region string
	// Open opens a shard's store from its DSN (OpenShard with the node's
	// settings).
	Open func(ctx context.Context, dsn string) (*sqlstore.Store, error)
	// Live gives the guards their thresholds.
	Live       parley.LiveConfigSource
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// ShardListTTL is how long the catalogue's shard list is kept
	// (default 5 s).
	ShardListTTL time.Duration
	// ScatterTimeout bounds a search of every shard for an id (default
	// 2 s): a shard that has not answered by then makes a miss 503.
	ScatterTimeout time.Duration
	// NegativeTTL is how long an id every shard answered not found for is
	// remembered as unknown (default 5 s; negative: not at all).
	NegativeTTL time.Duration
	// Now is the negative cache's clock (default time.Now); tests move it.
	Now func() time.Time
	// RetireAfter bounds the wait for the calls in flight on a shard's
	// store replaced because its DSN changed (default 1 min); the old store
	// is closed then.
	RetireAfter time.Duration
}

// negativeMax bounds the negative cache: ids are client input, so a
// client sending random ones evicts older entries rather than growing it.
const negativeMax = 100_000

// Router is a parley.Store over every shard of the catalogue.
type Router struct {
	cfg      Config
	log      *slog.Logger
	m        *metrics
	def      *pool
	ids      *otter.Cache[string, string]   // channel/message id -> workspace id (immutable)
	unknown  *otter.Cache[string, struct{}] // ids no shard had, for NegativeTTL; nil when off
	placed   sync.Map                       // workspace id -> shard id, placed by this node (directory lag)
	copies   sync.Map                       // shard id + "/" + user id -> struct{}: the copy exists
	retrying sync.Map                       // key -> struct{}: a retry running in the background (later)
	done     chan struct{}                  // closed by Close: retries stop
	listGen  atomic.Int64                   // bumped when the shard list's ids or DSNs change
	retiring sync.WaitGroup                 // stores replaced after a DSN change, not closed yet
	mu       sync.Mutex
	pools    map[string]*pool // shard id -> pool; guarded by mu
	opening  map[string]*opening
	list     shardList
	presence parley.PresenceSnapshot // given to every shard's store; guarded by mu
}

var _ parley.Store = (*Router)(nil)

// pool is one shard's store and its guard.
type pool struct {
	id  string
	dsn string // what it was opened on
	s   *sqlstore.Store
	g   *storeguard.Guard
	own bool // opened by the router (closed by Close)
}

// opening is a shard being opened: later callers wait for it.
type opening struct {
	dsn  string
	done chan struct{}
	p    *pool
	err  error
	at   time.Time
}

type shardList struct {
	mu     sync.Mutex
	at     time.Time
	shards []tenantdir.Shard
}

// New returns a router whose default shard is cfg.Default.
func New(cfg Config) (*Router, error) {
	if cfg.Default == nil || cfg.Directory == nil || cfg.Catalogue == nil || cfg.Open == nil || cfg.Live == nil || cfg.DefaultShard == "" {
		return nil, errors.New("shardstore: Default, DefaultShard, Directory, Catalogue, Open and Live are required")
	}
	if cfg.ShardListTTL <= 0 {
		cfg.ShardListTTL = 5 * time.Second
	}
	if cfg.ScatterTimeout <= 0 {
		cfg.ScatterTimeout = 2 * time.Second
	}
	if cfg.NegativeTTL == 0 {
		cfg.NegativeTTL = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RetireAfter <= 0 {
		cfg.RetireAfter = time.Minute
	}
	r := &Router{cfg: cfg, log: cfg.Logger, pools: map[string]*pool{}, opening: map[string]*opening{}, done: make(chan struct{})}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.log = r.log.With("component", "shardstore")
	r.m = newMetrics(cfg.Registerer)
	r.def = &pool{id: cfg.DefaultShard, s: cfg.Default, g: r.guard(cfg.DefaultShard, cfg.Default)}
	r.pools[cfg.DefaultShard] = r.def
	var err error
	r.ids, err = otter.New(&otter.Options[string, string]{MaximumSize: 1_000_000})
	if err != nil {
		return nil, fmt.Errorf("shardstore: id cache: %w", err)
	}
	if cfg.NegativeTTL > 0 {
		r.unknown, err = otter.New(&otter.Options[string, struct{}]{MaximumSize: negativeMax,
			ExpiryCalculator: otter.ExpiryWriting[string, struct{}](cfg.NegativeTTL), Clock: clock{cfg.Now}})
		if err != nil {
			return nil, fmt.Errorf("shardstore: negative id cache: %w", err)
		}
	}
	go r.refresh()
	return r, nil
}

func (r *Router) guard(shard string, s *sqlstore.Store) *storeguard.Guard {
	return storeguard.New(storeguard.Config{Store: s, Live: r.cfg.Live, Database: shard,
		Logger: r.log, Registerer: r.cfg.Registerer})
}

// OpenShard opens a shard's store on dsn with the settings of base (the
// node's publisher, live configuration, caps…): what a node does for each
// shard, and what a process without a router (the mover's CLI) can do.
func OpenShard(ctx context.Context, base sqlstore.Config, dsn string) (*sqlstore.Store, error) {
	if dsn == "" {
		return nil, errors.New("shardstore: a shard with an empty DSN is the node's own database")
	}
	base.Path, base.PostgresURL = "", dsn
	s, err := sqlstore.Open(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("open shard: %w", err)
	}
	return s, nil
}

// Shard returns the store of the shard with that id, opening it on first
// use (its DSN comes from the catalogue); the default shard's id, or a
// shard with an empty DSN, gives the node's own store. Store routing and
// the mover share the one pool per shard of a node.
func (r *Router) Shard(ctx context.Context, shardID string) (*sqlstore.Store, error) {
	p, err := r.poolByID(ctx, shardID)
	if err != nil {
		return nil, err
	}
	return p.s, nil
}

// Guard returns the guard of the shard with that id (opening it as Shard
// does): its breaker's State, for tests and the admin page.
func (r *Router) Guard(ctx context.Context, shardID string) (*storeguard.Guard, error) {
	p, err := r.poolByID(ctx, shardID)
	if err != nil {
		return nil, err
	}
	return p.g, nil
}

func (r *Router) poolByID(ctx context.Context, shardID string) (*pool, error) {
	return r.poolFor(ctx, shardID, "", false)
}

// poolFor returns a shard's pool: the open one, else one opened on the
// shard list's DSN (the catalogue's, read ShardListTTL ago at most), else,
// with hint, on hintDSN (a directory record's: a shard newer than the
// list).
func (r *Router) poolFor(ctx context.Context, shardID, hintDSN string, hint bool) (*pool, error) {
	if p := r.cached(shardID); p != nil {
		return p, nil
	}
	for _, s := range r.shards(ctx) {
		if s.ID == shardID {
			return r.pool(ctx, s.ID, s.DSN)
		}
	}
	if hint {
		return r.pool(ctx, shardID, hintDSN)
	}
	return nil, parley.Errorf(parley.ENOTFOUND, "shard %s is not in the catalogue", shardID)
}

func (r *Router) cached(shardID string) *pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pools[shardID]
}

// retryOpen is how long a failed open of a shard is remembered: calls in
// that time fail at once rather than each dialling a database that is down.
const retryOpen = time.Second

// pool returns the shard's pool, opening it on dsn on first use (one open
// per shard however many ask). An open still running on another DSN (the
// shard's DSN changed meanwhile) is not joined: a new one starts, and the
// old one's store is closed when it is done.
func (r *Router) pool(ctx context.Context, shardID, dsn string) (*pool, error) {
	if shardID == r.cfg.DefaultShard || dsn == "" {
		return r.def, nil
	}
	r.mu.Lock()
	if p := r.pools[shardID]; p != nil {
		r.mu.Unlock()
		return p, nil
	}
	o := r.opening[shardID]
	if o != nil {
		select {
		case <-o.done:
			if time.Since(o.at) >= retryOpen {
				o = nil // failed a while ago: try again
			}
		default:
		}
		if o != nil && o.dsn != dsn {
			o = nil
		}
	}
	if o == nil {
		o = &opening{dsn: dsn, done: make(chan struct{}), at: time.Now()}
		r.opening[shardID] = o
		r.mu.Unlock()
		go r.open(shardID, dsn, o)
		r.mu.Lock()
	}
	r.mu.Unlock()
	select {
	case <-o.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("open shard %s: %w", shardID, ctx.Err())
	}
	if o.err != nil {
		return nil, o.err
	}
	return o.p, nil
}

// open opens a shard in the background (not under a caller's context: a
// caller that gives up does not fail the others').
func (r *Router) open(shardID, dsn string, o *opening) {
	defer close(o.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	s, err := r.cfg.Open(ctx, dsn)
	if err != nil {
		r.m.opens.WithLabelValues(shardID, "error").Inc()
		r.log.Warn("shard did not open", "shard", shardID, "err", err)
		o.err = parley.Errorf(parley.EUNAVAILABLE, "shard %s is unavailable; try again shortly", shardID)
		r.mu.Lock()
		o.at = time.Now()
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	current := r.opening[shardID] == o
	select {
	case <-r.done:
		current = false // closed meanwhile: nobody would close it
	default:
	}
	if !current {
		r.mu.Unlock()
		// Superseded by an open on the shard's new DSN (or the router
		// closed): its waiters try again, on the new one.
		r.log.Info("shard opened on a DSN no longer current; closed", "shard", shardID)
		o.err = parley.Errorf(parley.EUNAVAILABLE, "shard %s is changing its database; try again shortly", shardID)
		if err := s.Close(); err != nil {
			r.log.Warn("close a superseded shard store", "shard", shardID, "err", err)
		}
		return
	}
	o.p = &pool{id: shardID, dsn: dsn, s: s, g: r.guard(shardID, s), own: true}
	if r.presence != nil {
		s.SetPresence(r.presence)
	}
	r.pools[shardID] = o.p
	delete(r.opening, shardID)
	r.mu.Unlock()
	r.m.opens.WithLabelValues(shardID, "ok").Inc()
	r.log.Info("shard opened", "shard", shardID, "took", time.Since(start))
}

// shards returns the catalogue's shards, kept ShardListTTL; the last list
// read when the catalogue does not answer; the default shard alone when
// there has never been one. A list whose shards or DSNs differ from the
// last one drops the negative id cache (a new shard may hold ids the
// others said they lacked) and replaces the stores of shards whose DSN
// changed.
func (r *Router) shards(ctx context.Context) []tenantdir.Shard {
	l := &r.list
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shards != nil && time.Since(l.at) < r.cfg.ShardListTTL {
		return l.shards
	}
	got, err := r.cfg.Catalogue.Shards(ctx)
	if err != nil {
		r.log.Warn("shard list not read; using the last one", "err", err)
		if l.shards == nil {
			return []tenantdir.Shard{{ID: r.cfg.DefaultShard}}
		}
		l.at = time.Now().Add(-r.cfg.ShardListTTL + time.Second) // retry in a second
		return l.shards
	}
	if !sameShards(l.shards, got) {
		r.listGen.Add(1)
		if r.unknown != nil {
			r.unknown.InvalidateAll()
		}
		r.reopenChanged(got)
	}
	l.shards, l.at = got, time.Now()
	return got
}

// sameShards reports whether two shard lists name the same shards with
// the same DSNs.
func sameShards(a, b []tenantdir.Shard) bool {
	if len(a) != len(b) {
		return false
	}
	dsn := make(map[string]string, len(a))
	for _, s := range a {
		dsn[s.ID] = s.DSN
	}
	for _, s := range b {
		if d, ok := dsn[s.ID]; !ok || d != s.DSN {
			return false
		}
	}
	return true
}

// reopenChanged replaces the pool of every shard whose DSN is no longer
// the one it was opened on: new calls open (and wait for) a store on the
// new DSN; the old store is closed once the calls running on it are done
// (retire). The default shard is the node's own database whatever the
// catalogue says.
func (r *Router) reopenChanged(shards []tenantdir.Shard) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return // closed: Close closes the pools
	default:
	}
	for _, s := range shards {
		p := r.pools[s.ID]
		if p == nil || !p.own || p.dsn == s.DSN {
			continue
		}
		delete(r.pools, s.ID)
		r.log.Info("shard's DSN changed; reopening it", "shard", s.ID)
		r.retiring.Add(1)
		go r.retire(p)
		if s.DSN != "" {
			// Opened now, not at the next call, so that the first
			// call after the change does not wait for the dial.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r.pool(ctx, s.ID, s.DSN) // a failure is logged and counted by open
			}()
		}
	}
}

// retire closes a shard's store that new calls no longer reach, once the
// calls already on it have returned, or after RetireAfter (or at Close)
// if some still run: those then fail, as they would on a restart.
func (r *Router) retire(p *pool) {
	defer r.retiring.Done()
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RetireAfter)
	defer cancel()
	go func() {
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	result := "drained"
	if err := p.g.Drain(ctx); err != nil {
		result = "bound"
		r.log.Warn("closing a replaced shard store with calls still running", "shard", p.id, "err", err)
	}
	if err := p.s.Close(); err != nil {
		r.log.Warn("close a replaced shard store", "shard", p.id, "err", err)
	}
	r.m.retired.WithLabelValues(p.id, result).Inc()
	r.log.Info("replaced shard store closed", "shard", p.id, "result", result)
}

// refresh reads the shard list every ShardListTTL, so that a changed DSN
// is acted on even when no call needs the list.
func (r *Router) refresh() {
	t := time.NewTicker(r.cfg.ShardListTTL)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShardListTTL)
			r.shards(ctx)
			cancel()
		}
	}
}

// pools opens (or finds) every shard's pool, the default one first,
// returning those that opened and the ids of those that did not. Shards
// with an empty DSN are the default one.
func (r *Router) allPools(ctx context.Context) (ps []*pool, failed []string) {
	ps = append(ps, r.def)
	seen := map[*pool]bool{r.def: true}
	for _, s := range r.shards(ctx) {
		p, err := r.pool(ctx, s.ID, s.DSN)
		if err != nil {
			failed = append(failed, s.ID)
			continue
		}
		if !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	return ps, failed
}

// SetPresence gives every shard's store, and those opened later, the
// presence tracker (@here reaches the members it says are active).
func (r *Router) SetPresence(p parley.PresenceSnapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.presence = p
	for _, pl := range r.pools {
		pl.s.SetPresence(p)
	}
}

// Close closes the shards the router opened (not the default store,
// which is its owner's).
func (r *Router) Close() error {
	r.mu.Lock()
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	var errs []error
	for id, p := range r.pools {
		if p.own {
			if err := p.s.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close shard %s: %w", id, err))
			}
		}
	}
	r.pools = map[string]*pool{r.cfg.DefaultShard: r.def}
	r.mu.Unlock()
	// Stores replaced after a DSN change: done is closed, so they stop
	// waiting for their calls and close now.
	r.retiring.Wait()
	r.ids.StopAllGoroutines()
	if r.unknown != nil {
		r.unknown.StopAllGoroutines()
	}
	return errors.Join(errs...)
}

// ReadOnlyError is the error of a write to a workspace that is read-only
// (a move's switch window, or maintenance): 503 with Retry-After, while
// reads keep working.
type ReadOnlyError struct {
	Workspace string
	err       *parley.Error
}

func (e *ReadOnlyError) Error() string { return e.err.Error() }
func (e *ReadOnlyError) Unwrap() error { return e.err }

// RetryAfter is how long a client should wait before trying again: the
// read-only window of a move is meant to last about a second.
func (e *ReadOnlyError) RetryAfter() time.Duration { return time.Second }

// WriteAllowed returns nil when the workspace of rec takes writes now
// (active, or moving: writes go to rec.ShardID, the source), and a
// *ReadOnlyError (EUNAVAILABLE) when it is read_only.
func WriteAllowed(rec tenantdir.Record) error {
	if rec.Status != tenantdir.StatusReadOnly {
		return nil
	}
	return &ReadOnlyError{Workspace: rec.WorkspaceID,
		err: parley.Errorf(parley.EUNAVAILABLE, "workspace %s is read-only for a moment; try again shortly", rec.WorkspaceID)}
}

// idShape is what a workspace, channel or message id may look like; any
// other string names nothing, and is answered without asking a shard.
var idShape = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// route returns the pool of a workspace's shard, with its record (the
// zero record, active, for a workspace the directory does not know).
func (r *Router) route(ctx context.Context, ws string) (*pool, tenantdir.Record, error) {
	if ws == "" {
		return r.def, tenantdir.Record{}, nil // the store says what is missing
	}
	if !idShape.MatchString(ws) {
		return nil, tenantdir.Record{}, parley.Errorf(parley.ENOTFOUND, "workspace not found")
	}
	rec, err := r.cfg.Directory.Lookup(ctx, ws)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		if sh, ok := r.placed.Load(ws); ok {
			// Placed by this node a moment ago; the directory's
			// projection has not applied it yet.
			p, err := r.poolByID(ctx, sh.(string))
			return p, tenantdir.Record{WorkspaceID: ws, ShardID: sh.(string), Status: tenantdir.StatusActive}, err
		}
		r.m.routed.WithLabelValues(r.cfg.DefaultShard, "fallback").Inc()
		return r.def, tenantdir.Record{}, nil
	}
	if err != nil {
		return nil, rec, fmt.Errorf("route workspace %s: %w", ws, err)
	}
	p, err := r.poolFor(ctx, rec.ShardID, rec.DSN, true)
	if err != nil {
		return nil, rec, err
	}
	r.m.routed.WithLabelValues(p.id, "directory").Inc()
	return p, rec, nil
}

// routeWrite is route for a write: a read-only workspace refuses it.
func (r *Router) routeWrite(ctx context.Context, ws string) (*pool, error) {
	p, rec, err := r.route(ctx, ws)
	if err != nil {
		return nil, err
	}
	if err := WriteAllowed(rec); err != nil {
		r.m.readOnly.Inc()
		return nil, err
	}
	return p, nil
}

// kinds of ids the cache resolves.
const (
	kindChannel = "channel"
	kindMessage = "message"
	kindFile    = "file"
	kindUpload  = "upload"
)

// workspaceOf returns the workspace of a channel, message, file or upload
// id (workspaceBy with the shard's lookup of that kind).
func (r *Router) workspaceOf(ctx context.Context, kind, id string) (string, error) {
	return r.workspaceBy(ctx, kind, id, func(ctx context.Context, p *pool) (string, error) {
		switch kind {
		case kindChannel:
			return p.s.ChannelWorkspace(ctx, id)
		case kindMessage:
			return p.s.MessageWorkspace(ctx, id)
		case kindFile:
			return p.s.FileWorkspace(ctx, id)
		default:
			return p.s.UploadWorkspace(ctx, id)
		}
	})
}

// workspaceBy returns the workspace of an id of kind: from the cache, or
// by asking every shard at once with ask, under its guard (one search per
// id however many ask). An id no shard has is ENOTFOUND, and is
// remembered as such for NegativeTTL: ids are drawn by the server, and a
// client learns one only once its row has committed, so an id every shard
// said it lacks is a guess or a stale id, not one about to appear
// (docs/directory.md, "How a request finds its shard"). When a shard did
// not answer and none had it, EUNAVAILABLE, not remembered.
func (r *Router) workspaceBy(ctx context.Context, kind, id string, ask func(context.Context, *pool) (string, error)) (string, error) {
	if !idShape.MatchString(id) {
		return "", parley.Errorf(parley.ENOTFOUND, "%s not found", kind)
	}
	key := kind + ":" + id
	if r.unknown != nil {
		if _, ok := r.unknown.GetIfPresent(key); ok {
			r.m.idUnknown.WithLabelValues(kind).Inc()
			return "", parley.Errorf(parley.ENOTFOUND, "%s not found", kind)
		}
	}
	ws, err := r.ids.Get(ctx, key, otter.LoaderFunc[string, string](func(ctx context.Context, _ string) (string, error) {
		r.m.idMisses.WithLabelValues(kind).Inc()
		gen := r.listGen.Load()
		ws, err := r.scatterFind(ctx, kind, func(ctx context.Context, p *pool) (string, error) {
			var ws string
			err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
				ws, err = ask(ctx, p)
				return err
			})
			return ws, err
		})
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			// Not remembered if the shard list changed during the
			// search: a shard it did not ask may have the id.
			if r.unknown != nil && r.listGen.Load() == gen {
				r.unknown.Set(key, struct{}{})
			}
			return "", otter.ErrNotFound
		}
		return ws, err
	}))
	if errors.Is(err, otter.ErrNotFound) {
		return "", parley.Errorf(parley.ENOTFOUND, "%s not found", kind)
	}
	return ws, err
}

// clock is the negative cache's time source: Config.Now.
type clock struct{ now func() time.Time }

func (c clock) NowNano() int64                        { return c.now().UnixNano() }
func (c clock) Tick(d time.Duration) <-chan time.Time { return time.Tick(d) }

// scatterFind asks every shard at once and returns the first answer; all
// ENOTFOUND is ENOTFOUND; none found with a shard failing is EUNAVAILABLE.
func (r *Router) scatterFind(ctx context.Context, what string, ask func(context.Context, *pool) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ScatterTimeout)
	defer cancel()
	ps, failed := r.allPools(ctx)
	type answer struct {
		v   string
		err error
		p   *pool
	}
	ch := make(chan answer, len(ps))
	for _, p := range ps {
		go func() {
			v, err := ask(ctx, p)
			ch <- answer{v, err, p}
		}()
	}
	var firstErr error
	for range ps {
		a := <-ch
		switch {
		case a.err == nil:
			return a.v, nil
		case parley.ErrorCode(a.err) == parley.ENOTFOUND:
		default:
			failed = append(failed, a.p.id)
			if firstErr == nil {
				firstErr = a.err
			}
		}
	}
	if len(failed) > 0 {
		r.log.Warn("a shard did not answer while looking for an id", "what", what, "shards", failed, "err", firstErr)
		return "", parley.Errorf(parley.EUNAVAILABLE, "shard %s is unavailable; try again shortly", failed[0])
	}
	return "", parley.Errorf(parley.ENOTFOUND, "%s not found", what)
}

// routeID routes a call about a channel or message id.
func (r *Router) routeID(ctx context.Context, kind, id string, write bool) (*pool, error) {
	ws, err := r.workspaceOf(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	if write {
		return r.routeWrite(ctx, ws)
	}
	p, _, err := r.route(ctx, ws)
	return p, err
}

// each runs fn on every shard at once (the default first in the result)
// and returns the answers of those that answered; the others are logged
// and counted as a partial answer of op.
func each[T any](r *Router, ctx context.Context, op string, fn func(context.Context, *pool) (T, error)) ([]T, error) {
	got, _, err := eachPartial(r, ctx, op, fn)
	return got, err
}

// eachPartial is each, also naming the shards left out of the answer.
func eachPartial[T any](r *Router, ctx context.Context, op string, fn func(context.Context, *pool) (T, error)) ([]T, []string, error) {
	ps, failed := r.allPools(ctx)
	out := make([]T, len(ps))
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { out[i], errs[i] = fn(ctx, p) })
	}
	wg.Wait()
	got := out[:0]
	for i, err := range errs {
		switch {
		case err == nil:
			got = append(got, out[i])
		case i == 0 || parley.ErrorCode(err) != parley.EINTERNAL && parley.ErrorCode(err) != parley.EUNAVAILABLE:
			// The control database's answer, or a client error
			// (EINVALID…): the call's answer.
			return nil, nil, err
		default:
			failed = append(failed, ps[i].id)
		}
	}
	if len(failed) > 0 {
		r.m.partial.WithLabelValues(op).Inc()
		r.log.Warn("shards left out of a call across workspaces", "op", op, "shards", failed)
	}
	return got, failed, nil
}
