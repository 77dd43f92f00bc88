// Package order puts the durable events of a channel back into seq order on
// one node. The bus may lose, duplicate or reorder events (several api nodes
// publish, a slow subscription drops); the Sequencer delivers each durable
// event of a tracked channel exactly once and in seq order, holding back
// early events briefly and filling any gap that does not close by itself
// from the store's per-channel log.
//
// It is pure logic over two functions, Fetch and Deliver: it must not know
// about NATS, sessions, sockets or SQL.
package order

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// Defaults for the zero values of Config.
const (
	DefaultHoldBack     = 50 * time.Millisecond
	DefaultFetchLimit   = 200
	DefaultMaxHeld      = 1024
	DefaultFetchRetries = 4
	DefaultRetryBackoff = 25 * time.Millisecond
	DefaultRetryPause   = time.Second
	DefaultFetchTimeout = 5 * time.Second
	maxRetryBackoff     = time.Second
)

// Config is what a Sequencer needs. Fetch and Deliver are required; every
// other zero value is a documented default.
type Config struct {
	// Fetch returns up to limit events of the channel with seq > afterSeq,
	// in ascending seq order (the store's ChannelLog).
	Fetch func(ctx context.Context, channelID string, afterSeq int64, limit int) ([]parley.Event, error)
	// Deliver receives the ordered stream. It is never called concurrently
	// for one channel (different channels may be delivered concurrently),
	// and is called without any lock of the Sequencer held, so it may call
	// the Sequencer back. It should not block for long: while it runs, the
	// channel's later events queue up behind it.
	Deliver func(parley.Event)
	// HoldBack is how long an early event waits for the gap before it to
	// close by itself before the gap is fetched (default 50 ms).
	HoldBack time.Duration
	// FetchLimit is the page size of one Fetch (default 200).
	FetchLimit int
	// MaxHeld bounds the early events held per channel (default 1024).
	// Past it the gap is fetched at once and further early events are not
	// kept: the fetch brings them.
	MaxHeld int
	// FetchRetries is how many times a failed Fetch is retried, with
	// doubling backoff from RetryBackoff (default 4 and 25 ms), before the
	// fill gives up and tries again RetryPause later (default 1 s). A
	// parley.ENOTFOUND error (the channel is gone) is not retried.
	FetchRetries int
	RetryBackoff time.Duration
	RetryPause   time.Duration
	// FetchTimeout bounds one Fetch call (default 5 s).
	FetchTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Sequencer orders the events of the channels it tracks. All methods are
// safe for concurrent use.
//
// Goroutines: the Sequencer starts at most one fill goroutine per channel,
// owned by the Sequencer and waited for by Close; hold-back timers run their
// short callbacks on the runtime's timer goroutines and are stopped by
// Untrack and Close. Deliver runs on whichever goroutine finds the channel's
// ready queue idle: a Push caller or the fill goroutine; other callers only
// append to the queue and return.
type Sequencer struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics
	ctx    context.Context // cancelled by Close: ends fetches and backoffs
	cancel context.CancelFunc
	wg     sync.WaitGroup // fill goroutines

	mu     sync.RWMutex
	chans  map[string]*channel // guarded by mu
	closed bool                // guarded by mu
}

// channel is the ordering state of one tracked channel.
type channel struct {
	id     string
	ctx    context.Context // cancelled when the channel is untracked
	cancel context.CancelFunc
	// gone is set (under mu) once the channel is untracked; the drainer
	// also reads it without mu between two deliveries.
	gone atomic.Bool

	mu       sync.Mutex
	pos      int64                  // highest seq accepted for delivery; guarded by mu
	maxSeen  int64                  // highest seq known to exist; guarded by mu
	held     map[int64]parley.Event // early events, seq > pos+1; guarded by mu
	ready    []parley.Event         // accepted, not yet delivered, in order; guarded by mu
	spare    []parley.Event         // the drainer's previous batch, reused; guarded by mu
	draining bool                   // a goroutine is delivering ready; guarded by mu
	filling  bool                   // the fill goroutine runs; guarded by mu
	timer    *time.Timer            // the armed hold-back timer, or nil; guarded by mu
	// catchUpWant counts CatchUp calls; catchUpDone is the count that the
	// last fetch reaching the end of the log had seen when it started.
	catchUpWant, catchUpDone uint64 // guarded by mu
}

// New returns a Sequencer tracking no channel.
func New(cfg Config) *Sequencer {
	if cfg.Fetch == nil || cfg.Deliver == nil {
		panic("order: Config.Fetch and Config.Deliver are required")
	}
	if cfg.HoldBack <= 0 {
		cfg.HoldBack = DefaultHoldBack
	}
	if cfg.FetchLimit <= 0 {
		cfg.FetchLimit = DefaultFetchLimit
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.FetchRetries <= 0 {
		cfg.FetchRetries = DefaultFetchRetries
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.RetryPause <= 0 {
		cfg.RetryPause = DefaultRetryPause
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sequencer{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "order"),
		m:      newMetrics(cfg.Registerer),
		ctx:    ctx,
		cancel: cancel,
		chans:  map[string]*channel{},
	}
}

// Track starts ordering a channel whose events up to lastSeq are already
// delivered (or not wanted): later events with seq <= the position are
// duplicates. Tracking a channel that is already tracked changes nothing.
func (s *Sequencer) Track(channelID string, lastSeq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if _, ok := s.chans[channelID]; ok {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.chans[channelID] = &channel{id: channelID, ctx: ctx, cancel: cancel, pos: lastSeq, maxSeen: lastSeq}
}

// Untrack stops ordering a channel: its held events are dropped, its timer
// stopped and its fetch cancelled. A Deliver call already under way for the
// channel may still finish after Untrack returns; no later one starts.
func (s *Sequencer) Untrack(channelID string) {
	s.mu.Lock()
	c := s.chans[channelID]
	delete(s.chans, channelID)
	s.mu.Unlock()
	if c != nil {
		s.retire(c)
	}
}

// Position returns the highest seq of the channel accepted for delivery,
// and whether the channel is tracked.
func (s *Sequencer) Position(channelID string) (int64, bool) {
	c := s.lookup(channelID)
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pos, true
}

// Settled reports whether a tracked channel has no fill under way and no
// catch-up still to run: every event the store had when its last CatchUp
// was asked for has been fetched. False for a channel not tracked.
func (s *Sequencer) Settled(channelID string) bool {
	c := s.lookup(channelID)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.filling && c.catchUpDone >= c.catchUpWant
}

// Close untracks every channel and waits for the fill goroutines to end.
// Push, Track and CatchUp do nothing afterwards.
func (s *Sequencer) Close() {
	s.mu.Lock()
	chans := s.chans
	s.chans = map[string]*channel{}
	s.closed = true
	s.mu.Unlock()
	for _, c := range chans {
		s.retire(c)
	}
	s.cancel()
	s.wg.Wait()
}

func (s *Sequencer) lookup(channelID string) *channel {
	s.mu.RLock()
	c := s.chans[channelID]
	s.mu.RUnlock()
	return c
}

// retire marks c gone and releases what it holds.
func (s *Sequencer) retire(c *channel) {
	c.mu.Lock()
	c.gone.Store(true)
	c.stopTimerLocked()
	s.m.heldBack.Sub(float64(len(c.held)))
	c.held = nil
	clear(c.ready)
	c.ready = c.ready[:0]
	c.mu.Unlock()
	c.cancel()
}

// Push takes an event from the bus: in any order, possibly twice, possibly
// never. Events of untracked channels are ignored; events with seq 0
// (ephemeral, like typing.started) go to Deliver without ordering.
func (s *Sequencer) Push(ev parley.Event) {
	c := s.lookup(ev.ChannelID)
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.gone.Load() {
		c.mu.Unlock()
		return
	}
	switch {
	case ev.Seq == 0:
		c.ready = append(c.ready, ev)
	case ev.Seq < 0:
		c.mu.Unlock()
		s.log.Warn("event with a negative seq ignored", "channel_id", c.id, "seq", ev.Seq, "type", ev.Type)
		return
	case ev.Seq <= c.pos:
		c.mu.Unlock()
		s.m.duplicates.Inc()
		return
	case ev.Seq == c.pos+1:
		c.pos = ev.Seq
		c.maxSeen = max(c.maxSeen, ev.Seq)
		c.ready = append(c.ready, ev)
		if len(c.held) > 0 || c.maxSeen > c.pos {
			s.releaseLocked(c)
		}
	default:
		s.holdLocked(c, ev)
	}
	s.drainLocked(c)
}

// CatchUp fetches whatever the store has after the channel's position now,
// page by page to the end of its log. It is meant for the moment right after
// the node subscribed to the channel's topic: events committed before the
// subscription took effect never come from the bus.
func (s *Sequencer) CatchUp(channelID string) {
	c := s.lookup(channelID)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.catchUpWant++
	s.startFillLocked(c)
	c.mu.Unlock()
}

// holdLocked keeps an early event until the gap before it closes, or sends
// for the gap when too much is held already.
func (s *Sequencer) holdLocked(c *channel, ev parley.Event) {
	c.maxSeen = max(c.maxSeen, ev.Seq)
	if _, dup := c.held[ev.Seq]; dup {
		s.m.duplicates.Inc()
		return
	}
	if len(c.held) >= s.cfg.MaxHeld {
		// Not kept: the fill fetches it with the gap.
		s.startFillLocked(c)
		return
	}
	if c.held == nil {
		c.held = make(map[int64]parley.Event)
	}
	c.held[ev.Seq] = ev
	s.m.heldBack.Inc()
	s.armLocked(c, s.cfg.HoldBack)
}

// releaseLocked moves the held events that now follow the position into the
// ready queue, and stops waiting once no gap is left.
func (s *Sequencer) releaseLocked(c *channel) {
	released := 0
	for {
		ev, ok := c.held[c.pos+1]
		if !ok {
			break
		}
		delete(c.held, ev.Seq)
		c.pos = ev.Seq
		c.ready = append(c.ready, ev)
		released++
	}
	if released > 0 {
		s.m.heldBack.Sub(float64(released))
	}
	if c.pos >= c.maxSeen {
		c.stopTimerLocked()
	}
}

// drainLocked delivers the ready queue unless another goroutine already
// does. It is called with c.mu held and returns with it released; Deliver
// runs without the lock.
func (s *Sequencer) drainLocked(c *channel) {
	if c.draining {
		c.mu.Unlock()
		return
	}
	c.draining = true
	for len(c.ready) > 0 && !c.gone.Load() {
		batch := c.ready
		c.ready = c.spare[:0]
		c.mu.Unlock()
		for i := range batch {
			if c.gone.Load() {
				break
			}
			s.cfg.Deliver(batch[i])
		}
		clear(batch) // drop references to payloads
		c.mu.Lock()
		c.spare = batch[:0]
	}
	c.draining = false
	c.mu.Unlock()
}
