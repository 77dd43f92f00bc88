package querycache

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"parley"
)

// Store is what the cache reads: whole directories on first use, the
// workspace of a channel it has not seen, and, for /users/batch, the users
// it cannot vouch for itself (parley.Store has all three).
type Store interface {
	parley.DirectoryService
	UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error)
}

// The cache is one of the two implementations of the directory queries
// (the store's is the other), and the gateway's just-in-time users
// directory.
var _ parley.DirectoryQueries = (*Cache)(nil)

// Bus is what the cache needs of the event bus: one TopicMux for every
// workspace's directory topic, and Flush, which returns once the bus has
// seen a new subscription. cmd/parley gives it the node's bus.
type Bus interface {
	parley.MuxBus
	parley.BusLink
}

// Defaults for the zero values of Config.
const (
	DefaultWarmFor     = 10 * time.Minute
	DefaultLoadTimeout = time.Minute
)

// Config is what New needs. Store and Bus are required; every other zero
// value is a documented default.
type Config struct {
	Store Store
	Bus   Bus
	// WarmFor is how long a workspace stays loaded after its last query
	// (default 10 minutes).
	WarmFor time.Duration
	// SweepEvery is how often idle workspaces are looked for (default
	// WarmFor/10, at most a minute).
	SweepEvery time.Duration
	// LoadTimeout bounds one workspace load (default 1 minute). A load runs
	// for every request waiting on it, so it does not end with the first
	// requester's context.
	LoadTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the cache's metrics; nil: none.
	Registerer prometheus.Registerer
	// Now defaults to time.Now; tests move it to expire workspaces.
	Now func() time.Time
}

// Cache is one node's query cache. Create it with New; it is safe for
// concurrent use.
type Cache struct {
	store       Store
	bus         Bus
	log         *slog.Logger
	now         func() time.Time
	warmFor     time.Duration
	loadTimeout time.Duration
	metrics     *metrics

	mux    parley.TopicMux // every dir.<ws> subscription; its goroutine applies events
	flight singleflight.Group

	// writeMu serialises every change: event application, installing a
	// loaded workspace, eviction. Changes lock a workspace's mu after it.
	writeMu sync.Mutex
	users   map[string]*sharedUser // guarded by writeMu; every user of every warm workspace
	nusers  atomic.Int64           // len(users), readable without writeMu
	closed  bool                   // guarded by writeMu

	mu       sync.RWMutex          // guards the two maps below; held after writeMu when both are
	wss      map[string]*workspace // workspace id → workspace, loading or ready
	channels map[string]*workspace // channel id → its ready workspace

	stop chan struct{} // closed by Close
	done chan struct{} // closed when the sweeper returns
}

// New starts a cache: its bus Mux and its sweeper. Close stops both.
func New(cfg Config) *Cache {
	if cfg.Store == nil || cfg.Bus == nil {
		panic("querycache: Config.Store and Config.Bus are required")
	}
	c := &Cache{
		store:       cfg.Store,
		bus:         cfg.Bus,
		log:         cfg.Logger,
		now:         cfg.Now,
		warmFor:     cfg.WarmFor,
		loadTimeout: cfg.LoadTimeout,
		users:       map[string]*sharedUser{},
		wss:         map[string]*workspace{},
		channels:    map[string]*workspace{},
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("component", "querycache")
	if c.now == nil {
		c.now = time.Now
	}
	if c.warmFor <= 0 {
		c.warmFor = DefaultWarmFor
	}
	if c.loadTimeout <= 0 {
		c.loadTimeout = DefaultLoadTimeout
	}
	sweep := cfg.SweepEvery
	if sweep <= 0 {
		sweep = min(c.warmFor/10, time.Minute)
	}
	c.metrics = newMetrics(cfg.Registerer, c)
	c.mux = cfg.Bus.NewMux(0, c.onEvent)
	go c.sweeper(sweep)
	return c
}

// Close stops the sweeper and unsubscribes from every topic. Warm
// workspaces still answer afterwards, frozen; loading new ones fails.
func (c *Cache) Close() {
	c.writeMu.Lock()
	if c.closed {
		c.writeMu.Unlock()
		return
	}
	c.closed = true
	c.writeMu.Unlock()
	close(c.stop)
	<-c.done
	c.mux.Close()
}

// acquire returns the ready workspace, loading it first if needed, and
// marks it used.
func (c *Cache) acquire(ctx context.Context, workspaceID string) (*workspace, error) {
	c.mu.RLock()
	w := c.wss[workspaceID]
	c.mu.RUnlock()
	c.metrics.lookup(w != nil && w.ready.Load())
	if w == nil || !w.ready.Load() {
		v, err, _ := c.flight.Do(workspaceID, func() (any, error) {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.loadTimeout)
			defer cancel()
			return c.load(lctx, workspaceID)
		})
		if err != nil {
			return nil, err
		}
		w = v.(*workspace)
	}
	w.touch(c.now())
	return w, nil
}

// channelWorkspace returns the ready workspace that has the channel,
// asking the store which one it is when no warm workspace has it.
func (c *Cache) channelWorkspace(ctx context.Context, channelID string) (*workspace, error) {
	c.mu.RLock()
	w := c.channels[channelID]
	c.mu.RUnlock()
	if w != nil {
		c.metrics.lookup(true)
		w.touch(c.now())
		return w, nil
	}
	wsID, err := c.store.ChannelWorkspace(ctx, channelID)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, wsID)
}

// sweeper evicts the workspaces nobody has asked about for warmFor.
func (c *Cache) sweeper(every time.Duration) {
	defer close(c.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.sweep()
		}
	}
}

// sweep evicts every ready workspace idle for longer than warmFor.
func (c *Cache) sweep() {
	cutoff := c.now().Add(-c.warmFor).UnixNano()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.RLock()
	var idle []*workspace
	for _, w := range c.wss {
		if w.ready.Load() && w.lastUsed.Load() < cutoff {
			idle = append(idle, w)
		}
	}
	c.mu.RUnlock()
	for _, w := range idle {
		c.evictLocked(w, "idle")
	}
}

// evictLocked drops a workspace: off the maps, off the bus, and its users'
// references. Queries already holding it finish on the detached copy.
// Caller holds writeMu.
func (c *Cache) evictLocked(w *workspace, reason string) {
	c.mu.RLock()
	current := c.wss[w.id] == w
	c.mu.RUnlock()
	if !current {
		return
	}
	w.mu.RLock()
	ids := make([]string, 0, len(w.chans))
	for _, ch := range w.chans {
		if ch != nil {
			ids = append(ids, ch.id)
		}
	}
	var users []*sharedUser
	if w.ready.Load() {
		users = slices.Clone(w.users)
	}
	w.mu.RUnlock()
	c.mu.Lock()
	delete(c.wss, w.id)
	for _, id := range ids {
		if c.channels[id] == w {
			delete(c.channels, id)
		}
	}
	c.mu.Unlock()
	if err := c.mux.Unsubscribe(parley.TopicDirectory(w.id)); err != nil {
		c.log.Warn("unsubscribe", "workspace_id", w.id, "err", err)
	}
	for _, su := range users {
		if su != nil {
			c.releaseLocked(su)
		}
	}
	c.metrics.evictions.WithLabelValues(reason).Inc()
	c.log.Debug("workspace evicted", "workspace_id", w.id, "reason", reason)
}

// releaseLocked drops one workspace's reference to a user. Caller holds
// writeMu.
func (c *Cache) releaseLocked(su *sharedUser) {
	su.refs--
	if su.refs <= 0 {
		delete(c.users, su.rec.Load().id)
		c.nusers.Add(-1)
	}
}

// Stats are counts for tests and the admin page.
type Stats struct {
	Workspaces int // ready or loading
	Users      int // distinct users held, over every workspace
	Loads      int64
	Events     int64
}

// Stats returns the cache's current counts.
func (c *Cache) Stats() Stats {
	users := int(c.nusers.Load())
	c.mu.RLock()
	n := len(c.wss)
	c.mu.RUnlock()
	return Stats{Workspaces: n, Users: users, Loads: c.metrics.loadCount.Load(), Events: c.metrics.eventCount.Load()}
}

// errClosed is what loads answer after Close.
var errClosed = parley.Errorf(parley.EUNAVAILABLE, "query cache is shutting down")

// wsNotFound is the answer for a workspace the actor is not in.
func wsNotFound() error { return parley.Errorf(parley.ENOTFOUND, "workspace not found") }

// chNotFound is the answer for a channel the actor cannot see.
func chNotFound() error { return parley.Errorf(parley.ENOTFOUND, "channel not found") }

func wrap(op string, err error) error {
	if err == nil || parley.ErrorCode(err) != parley.EINTERNAL {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
