// Package recent answers the fetch spike of a hot channel (LINE: each event
// makes every member fetch) without the store. Each node keeps the latest
// events of every channel its hot-channel detector marks hot, fed from the
// bus, and answers /events and /sync from that buffer when it holds the
// whole range asked for (gap-free); anything else falls through to the
// store. Identical concurrent event reads of one channel that do reach the
// store share one query. Authorization is the store's rule, taken from the
// query cache before anything is answered or shared
// (docs/recent-buffer.md).
package recent

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"parley"
	"parley/internal/promutil"
)

// Access authorizes a read of a channel for actor with the store's rule:
// nil when actor may read it, ENOTFOUND when not (another workspace, a
// private channel actor is not in, a guest outside the channel). The query
// cache's CanRead is one.
type Access func(ctx context.Context, actor, channelID string) error

// Config configures a Buffer.
type Config struct {
	// Store is the store whose reads the buffer answers or coalesces;
	// ChannelLog fills a buffer's tail. Required.
	Store parley.Store
	// Bus carries the channel topics a buffer follows. Required.
	Bus parley.EventBus
	// Hot says which channels to buffer. Required.
	Hot parley.HotChannels
	// Access authorizes every read answered from a buffer or shared with
	// another caller. Required.
	Access Access
	// Live gives recent_enabled, recent_dry_run and recent_events.
	Live       parley.LiveConfigSource
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Buffer keeps the recent events of the hot channels and answers reads
// from them. Wrap puts it in front of a store.
type Buffer struct {
	cfg Config
	log *slog.Logger
	m   metrics

	mu    sync.Mutex
	chans map[string]*chanBuf
	jobs  []job
	wake  chan struct{}

	flights singleflight.Group

	unwatch func()
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// chanBuf holds one channel's events (lo, hi], contiguous and ascending;
// lo == hi is empty. A buffer answers nothing until its first event.
type chanBuf struct {
	mu      sync.Mutex
	started bool
	lo, hi  int64
	events  []parley.Event
	filling bool
	unsub   func() error
}

type job struct {
	channel string
	on      bool // start (true) or drop (false) the channel's buffer
	fill    bool // read the tail before lo from the store
}

type metrics struct {
	reads     *prometheus.CounterVec
	coalesced prometheus.Counter
	queries   *prometheus.CounterVec
	fills     *prometheus.CounterVec
	channels  prometheus.Gauge
	panics    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	return metrics{
		reads: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_recent_reads_total",
			Help: "Channel reads of /events and /sync by whether the recent-events buffer answered them (hit), could not (miss) or would have in dry run (dry_run_hit)."},
			[]string{"op", "result"})),
		coalesced: promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_recent_coalesced_reads_total", Help: "Event reads that shared another caller's identical store query."})),
		queries: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_recent_store_queries_total", Help: "Event reads this layer sent to the store, by operation (fills included)."},
			[]string{"op"})),
		fills: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_recent_fills_total", Help: "Reads of a buffer's tail from the store, by outcome."},
			[]string{"result"})),
		channels: promutil.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_recent_buffered_channels", Help: "Hot channels whose recent events this node buffers."})),
		panics: promutil.Panics(reg),
	}
}

// New starts a buffer: it follows the hot marks of cfg.Hot. Close stops it.
func New(cfg Config) (*Buffer, error) {
	if cfg.Store == nil || cfg.Bus == nil || cfg.Hot == nil || cfg.Access == nil || cfg.Live == nil {
		return nil, errors.New("recent: Store, Bus, Hot, Access and Live are required")
	}
	b := &Buffer{cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer), chans: map[string]*chanBuf{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.log = b.log.With("component", "recent")
	b.unwatch = cfg.Hot.Watch(func(channelID string, on bool) { b.enqueue(job{channel: channelID, on: on}) })
	go b.run()
	return b, nil
}

// Close stops following the hot marks and drops every buffer.
func (b *Buffer) Close() {
	b.once.Do(func() {
		b.unwatch()
		close(b.stop)
		<-b.done
		b.mu.Lock()
		chans := b.chans
		b.chans = map[string]*chanBuf{}
		b.mu.Unlock()
		for _, c := range chans {
			if c.unsub != nil {
				_ = c.unsub()
			}
		}
		b.m.channels.Set(0)
	})
}

func (b *Buffer) enqueue(j job) {
	b.mu.Lock()
	b.jobs = append(b.jobs, j)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// run does the jobs one at a time: starting and dropping buffers, filling
// their tails from the store.
func (b *Buffer) run() {
	defer close(b.done)
	for {
		select {
		case <-b.stop:
			return
		case <-b.wake:
		}
		for {
			b.mu.Lock()
			if len(b.jobs) == 0 {
				b.mu.Unlock()
				break
			}
			j := b.jobs[0]
			b.jobs = b.jobs[1:]
			b.mu.Unlock()
			b.safely(func() { b.do(j) })
		}
	}
}

func (b *Buffer) safely(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			b.m.panics.WithLabelValues("recent").Inc()
			b.log.Error("recent buffer panicked", "panic", r)
		}
	}()
	fn()
}

func (b *Buffer) do(j job) {
	switch {
	case j.fill:
		b.fill(j.channel)
	case j.on:
		b.mu.Lock()
		_, ok := b.chans[j.channel]
		b.mu.Unlock()
		if ok || !b.cfg.Hot.Hot(j.channel) {
			return
		}
		c := &chanBuf{}
		unsub, err := b.cfg.Bus.Subscribe(parley.TopicChannel(j.channel), func(ev parley.Event) { b.take(j.channel, c, ev) })
		if err != nil {
			b.log.Warn("recent buffer not started", "channel_id", j.channel, "err", err)
			return
		}
		c.mu.Lock()
		c.unsub = unsub
		c.mu.Unlock()
		b.mu.Lock()
		b.chans[j.channel] = c
		b.m.channels.Set(float64(len(b.chans)))
		b.mu.Unlock()
		b.log.Info("recent buffer started", "channel_id", j.channel)
	default:
		b.mu.Lock()
		c := b.chans[j.channel]
		delete(b.chans, j.channel)
		b.m.channels.Set(float64(len(b.chans)))
		b.mu.Unlock()
		if c != nil {
			c.mu.Lock()
			unsub := c.unsub
			c.mu.Unlock()
			if unsub != nil {
				_ = unsub()
			}
			b.log.Info("recent buffer dropped", "channel_id", j.channel)
		}
	}
}

// limit is the live size of a buffer.
func (b *Buffer) limit() int {
	return max(1, b.cfg.Live.LiveConfig().RecentEvents)
}

// take adds an event heard on the channel's topic. The first event starts
// the buffer just before it; an event past a gap restarts it there. Either
// way the tail before it is read from the store.
func (b *Buffer) take(channelID string, c *chanBuf, ev parley.Event) {
	if ev.Seq <= 0 || ev.ChannelID != channelID {
		return // typing and other ephemeral events
	}
	ev = normalize(ev)
	limit := b.limit()
	c.mu.Lock()
	fill := false
	switch {
	case !c.started || ev.Seq > c.hi+1:
		c.started, c.lo, c.hi, c.events = true, ev.Seq-1, ev.Seq, []parley.Event{ev}
		fill = c.lo > 0 && !c.filling
		c.filling = c.filling || fill
	case ev.Seq == c.hi+1:
		c.events = append(c.events, ev)
		c.hi = ev.Seq
		if len(c.events) > limit {
			drop := len(c.events) - limit
			c.events = append(c.events[:0:0], c.events[drop:]...)
			c.lo += int64(drop)
		}
	}
	c.mu.Unlock()
	if fill {
		b.enqueue(job{channel: channelID, fill: true})
	}
}

// fill reads the events before the buffer's lo from the store and puts
// them in front when the buffer still starts there.
func (b *Buffer) fill(channelID string) {
	b.mu.Lock()
	c := b.chans[channelID]
	b.mu.Unlock()
	if c == nil {
		return
	}
	limit := b.limit()
	c.mu.Lock()
	lo, have := c.lo, len(c.events)
	c.mu.Unlock()
	n := int64(max(0, limit-have))
	from := max(0, lo-n)
	var evs []parley.Event
	var err error
	if lo > from {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b.m.queries.WithLabelValues("fill").Inc()
		evs, err = b.cfg.Store.ChannelLog(ctx, channelID, from, int(lo-from))
		cancel()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	again := false
	switch {
	case err != nil:
		b.m.fills.WithLabelValues("error").Inc()
		b.log.Warn("recent buffer fill failed", "channel_id", channelID, "err", err)
	case !contiguous(evs, from, lo):
		b.m.fills.WithLabelValues("gap").Inc() // deleted or not yet visible rows: serve from lo
	case c.lo != lo:
		b.m.fills.WithLabelValues("moved").Inc()
		again = c.lo > 0 // the buffer restarted past a gap meanwhile
	default:
		b.m.fills.WithLabelValues("ok").Inc()
		for i := range evs {
			evs[i] = normalize(evs[i])
		}
		c.events = append(evs, c.events...)
		c.lo = from
		if len(c.events) > limit {
			drop := len(c.events) - limit
			c.events = append(c.events[:0:0], c.events[drop:]...)
			c.lo += int64(drop)
		}
	}
	c.filling = again
	if again {
		b.enqueue(job{channel: channelID, fill: true})
	}
}

// contiguous reports whether evs are exactly the seqs (from, to].
func contiguous(evs []parley.Event, from, to int64) bool {
	if int64(len(evs)) != to-from {
		return false
	}
	for i, ev := range evs {
		if ev.Seq != from+int64(i)+1 {
			return false
		}
	}
	return true
}

// normalize makes a bus event look as the store reads it back.
func normalize(ev parley.Event) parley.Event {
	ev.Topics = nil
	ev.CreatedAt = time.UnixMicro(ev.CreatedAt.UnixMicro()).UTC()
	return ev
}

// window returns the buffered events (after, after+limit] of a channel when
// the buffer holds them gap-free up to its newest event; ok false when it
// cannot answer, buffered false when the channel has no buffer.
func (b *Buffer) window(channelID string, after int64, limit int) (evs []parley.Event, hi int64, buffered, ok bool) {
	b.mu.Lock()
	c := b.chans[channelID]
	b.mu.Unlock()
	if c == nil {
		return nil, 0, false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started || after < c.lo || after > c.hi {
		return nil, 0, true, false
	}
	start := int(after - c.lo)
	end := min(len(c.events), start+limit)
	return append([]parley.Event(nil), c.events[start:end]...), c.hi, true, true
}

// mode is what the live keys allow now.
func (b *Buffer) mode() (on, dry bool) {
	lc := b.cfg.Live.LiveConfig()
	return lc.RecentEnabled && !lc.RecentDryRun, lc.RecentEnabled && lc.RecentDryRun
}

// Wrap returns s with its ListEvents and Sync answered through b.
func (b *Buffer) Wrap(s parley.Store) parley.Store { return &store{Store: s, b: b} }

type store struct {
	parley.Store
	b *Buffer
}

// ListEvents answers from the channel's buffer when it can, else from the
// store, sharing an identical concurrent store read.
func (s *store) ListEvents(ctx context.Context, actor, channelID string, afterSeq int64, limit int) (*parley.EventPage, error) {
	b := s.b
	on, dry := b.mode()
	if (!on && !dry) || afterSeq < 0 {
		return s.Store.ListEvents(ctx, actor, channelID, afterSeq, limit)
	}
	limit = parley.ClampLimit(limit)
	evs, _, buffered, ok := b.window(channelID, afterSeq, limit)
	if dry {
		if ok {
			b.m.reads.WithLabelValues("events", "dry_run_hit").Inc()
		}
		return s.Store.ListEvents(ctx, actor, channelID, afterSeq, limit)
	}
	if err := b.cfg.Access(ctx, actor, channelID); err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return nil, err
		}
		return s.Store.ListEvents(ctx, actor, channelID, afterSeq, limit) // the cache could not say
	}
	if ok {
		b.m.reads.WithLabelValues("events", "hit").Inc()
		page := &parley.EventPage{Events: evs}
		if page.Events == nil {
			page.Events = []parley.Event{}
		}
		if len(evs) == limit {
			page.NextCursor = strconv.FormatInt(evs[len(evs)-1].Seq, 10)
		}
		return page, nil
	}
	if buffered {
		b.m.reads.WithLabelValues("events", "miss").Inc()
	}
	// actor may read the channel: share the read with the others asking
	// the same now. The page does not depend on who asks.
	key := channelID + "\x00" + strconv.FormatInt(afterSeq, 10) + "\x00" + strconv.Itoa(limit)
	v, err, shared := b.flights.Do(key, func() (any, error) {
		b.m.queries.WithLabelValues("events").Inc()
		return s.Store.ListEvents(context.WithoutCancel(ctx), actor, channelID, afterSeq, limit)
	})
	if shared {
		b.m.coalesced.Inc()
	}
	if err != nil && shared {
		// Another caller's failure (a refusal, a cancelled context) is
		// not necessarily this actor's answer: ask for it alone.
		b.m.queries.WithLabelValues("events").Inc()
		return s.Store.ListEvents(ctx, actor, channelID, afterSeq, limit)
	}
	if err != nil {
		return nil, err
	}
	page := v.(*parley.EventPage)
	if shared { // each caller gets its own copy to marshal
		cp := *page
		cp.Events = append([]parley.Event{}, page.Events...)
		page = &cp
	}
	return page, nil
}

// Sync answers the channels whose buffers hold what is asked and sends the
// others to the store in one call.
func (s *store) Sync(ctx context.Context, actor string, channels map[string]int64) (map[string]parley.SyncResult, error) {
	b := s.b
	on, dry := b.mode()
	if !on && !dry || len(channels) > parley.MaxSyncChannels {
		return s.Store.Sync(ctx, actor, channels)
	}
	for _, seq := range channels {
		if seq < 0 {
			return s.Store.Sync(ctx, actor, channels) // its error
		}
	}
	out := make(map[string]parley.SyncResult, len(channels))
	rest := make(map[string]int64, len(channels))
	for id, after := range channels {
		evs, hi, buffered, ok := b.window(id, after, parley.MaxSyncEvents+1)
		if !ok {
			if buffered && !dry {
				b.m.reads.WithLabelValues("sync", "miss").Inc()
			}
			rest[id] = after
			continue
		}
		if dry {
			b.m.reads.WithLabelValues("sync", "dry_run_hit").Inc()
			rest[id] = after
			continue
		}
		if err := b.cfg.Access(ctx, actor, id); err != nil {
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				out[id] = parley.SyncResult{Error: parley.ENOTFOUND}
			} else {
				rest[id] = after
			}
			continue
		}
		b.m.reads.WithLabelValues("sync", "hit").Inc()
		if hi-after > parley.MaxSyncEvents {
			out[id] = parley.SyncResult{TooFar: true, LastSeq: hi}
		} else {
			if evs == nil {
				evs = []parley.Event{}
			}
			out[id] = parley.SyncResult{Events: evs}
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	b.m.queries.WithLabelValues("sync").Inc()
	more, err := s.Store.Sync(ctx, actor, rest)
	if err != nil {
		return nil, err
	}
	for id, r := range more {
		out[id] = r
	}
	return out, nil
}
