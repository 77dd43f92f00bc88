// Package hot detects hot channels (ARCHITECTURE §8, docs/hot-channels.md):
// a per-channel sliding-window rate of the durable events a node sees,
// against the live thresholds hot_on_rate and hot_off_rate (hysteresis).
// A node that finds a channel hot shares the mark over the bus and renews it
// while the channel stays hot; the other nodes take the mark and let it lapse
// hot_ttl_seconds after its last renewal, so that a node that dies does not
// keep a channel hot. Detector implements parley.HotChannels.
package hot

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/promutil"
)

// Topic is the bus topic of the hot marks (node-to-node, raw JSON).
const Topic = "hot.marks"

// DefaultMaxChannels bounds the channels one detector measures at once.
const DefaultMaxChannels = 100_000

// Config configures a Detector.
type Config struct {
	// Live gives hot_enabled, hot_dry_run, hot_on_rate, hot_off_rate,
	// hot_window_seconds and hot_ttl_seconds, read on every evaluation;
	// required.
	Live parley.LiveConfigSource
	// Bus shares the marks with the other nodes; nil: this node alone.
	Bus parley.RawBus
	// NodeID names this node in its marks; required with Bus.
	NodeID string
	// Logger defaults to slog.Default().
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now defaults to time.Now (tests pin the clock).
	Now func() time.Time
	// Interval is how often rates are evaluated, marks renewed and lapsed
	// marks expired; default 250ms. Negative: never on its own (tests call
	// evaluate).
	Interval time.Duration
	// MaxChannels bounds the channels measured at once (default
	// DefaultMaxChannels); events of further channels are not counted
	// until idle ones are forgotten.
	MaxChannels int
}

// Channel is one hot channel as this node sees it (the admin listing).
type Channel struct {
	ChannelID string    `json:"channel_id"`
	Rate      float64   `json:"rate"` // durable events per second
	Since     time.Time `json:"since"`
	// Source is "local" (this node measured it), "remote" (another node's
	// mark) or "dry_run" (this node would mark it, in dry run).
	Source    string     `json:"source"`
	NodeID    string     `json:"node_id"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"` // remote marks only
}

// local is what a node measures of one channel: two fixed windows of
// counts whose weighted sum slides (prev counts for the part of the window
// not yet covered by cur).
type local struct {
	lastSeq   int64
	winStart  time.Time
	cur, prev int
	lastEvent time.Time
	hot       bool // over the on rate and not yet below the off rate
	since     time.Time
	rate      float64 // at the last evaluation
}

// remote is another node's mark.
type remote struct {
	rate    float64
	since   time.Time
	expires time.Time
}

// message is what goes on Topic: the channels a node marks hot (renewed)
// and those it no longer does.
type message struct {
	Node  string      `json:"node"`
	TTLMs int64       `json:"ttl_ms"`
	On    []markEntry `json:"on,omitempty"`
	Off   []string    `json:"off,omitempty"`
}

type markEntry struct {
	Channel string    `json:"c"`
	Rate    float64   `json:"r"`
	Since   time.Time `json:"s"`
}

// transition is one change of a channel's mark in this node's view.
type transition struct {
	channel string
	on      bool
	source  string
}

// Detector measures the rates of channels and holds this node's view of
// the cluster's hot marks. It is safe for concurrent use.
type Detector struct {
	cfg Config
	log *slog.Logger
	now func() time.Time
	max int

	// emitMu orders the changes of the view and their Watch calls: one
	// evaluation or bus message at a time computes and reports its changes.
	emitMu sync.Mutex

	mu        sync.Mutex
	chans     map[string]*local
	remotes   map[string]map[string]remote // channel → node → mark
	view      map[string]string            // hot channels → source of the mark
	watchers  map[int]func(string, bool)
	nextWatch int
	published map[string]bool // channels this node announced on
	lastRenew time.Time

	// hot is the view for Hot: copied on each change (rare), read per event.
	hot atomic.Pointer[map[string]struct{}]

	m       metrics
	unsub   func() error
	stop    chan struct{}
	done    chan struct{}
	closing sync.Once
}

type metrics struct {
	hot         prometheus.Gauge
	tracked     prometheus.Gauge
	transitions *prometheus.CounterVec
	dryRun      *prometheus.CounterVec
	untracked   prometheus.Counter
	busErrors   prometheus.Counter
	panics      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) metrics {
	return metrics{
		hot: promutil.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_hot_channels", Help: "Channels hot now in this node's view (its own marks and other nodes')."})),
		tracked: promutil.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_hot_tracked_channels", Help: "Channels whose rate this node measures now (idle ones are forgotten)."})),
		transitions: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_hot_transitions_total", Help: "Changes of a channel's hot mark in this node's view, by direction and by whose mark it was."},
			[]string{"to", "source"})),
		dryRun: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_hot_dry_run_transitions_total", Help: "Transitions this node would have made in dry run, by direction."},
			[]string{"to"})),
		untracked: promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_hot_untracked_events_total", Help: "Durable events not measured because the detector already measured its maximum of channels."})),
		busErrors: promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_hot_bus_errors_total", Help: "Hot marks that could not be published or were unreadable."})),
		panics: promutil.Panics(reg),
	}
}

// New starts a detector: it subscribes to the other nodes' marks and, unless
// cfg.Interval is negative, evaluates on its own. Close stops it.
func New(cfg Config) (*Detector, error) {
	if cfg.Live == nil {
		return nil, fmt.Errorf("hot: Live is required")
	}
	if cfg.Bus != nil && cfg.NodeID == "" {
		return nil, fmt.Errorf("hot: NodeID is required with a bus")
	}
	d := &Detector{cfg: cfg, log: cfg.Logger, now: cfg.Now, max: cfg.MaxChannels,
		chans: map[string]*local{}, remotes: map[string]map[string]remote{}, view: map[string]string{},
		watchers: map[int]func(string, bool){}, published: map[string]bool{},
		m: newMetrics(cfg.Registerer), stop: make(chan struct{}), done: make(chan struct{})}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.log = d.log.With("component", "hot")
	if d.now == nil {
		d.now = time.Now
	}
	if d.max <= 0 {
		d.max = DefaultMaxChannels
	}
	d.hot.Store(&map[string]struct{}{})
	if cfg.Bus != nil {
		unsub, err := cfg.Bus.SubscribeRaw(Topic, d.receive)
		if err != nil {
			return nil, fmt.Errorf("hot: subscribe marks: %w", err)
		}
		d.unsub = unsub
	}
	interval := cfg.Interval
	if interval == 0 {
		interval = 250 * time.Millisecond
	}
	if interval < 0 {
		close(d.done)
		return d, nil
	}
	go d.run(interval)
	return d, nil
}

func (d *Detector) run(interval time.Duration) {
	defer close(d.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.safely("evaluate", d.evaluate)
		}
	}
}

// safely runs fn, counting and logging a panic instead of dying of it.
func (d *Detector) safely(what string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			d.m.panics.WithLabelValues("hot").Inc()
			d.log.Error("hot detector panicked", "in", what, "panic", r)
		}
	}()
	fn()
}

// Close stops evaluating, announces that this node's marks are off and
// leaves the bus.
func (d *Detector) Close() {
	d.closing.Do(func() {
		close(d.stop)
		<-d.done
		if d.unsub != nil {
			_ = d.unsub()
		}
		d.mu.Lock()
		off := slices.Sorted(maps.Keys(d.published))
		d.published = map[string]bool{}
		d.mu.Unlock()
		if len(off) > 0 {
			d.publish(message{Off: off})
		}
	})
}

// Observe counts one durable event of the channel; a seq at or below the
// last one counted is ignored (several paths may report one event).
func (d *Detector) Observe(channelID string, seq int64) {
	lc := d.cfg.Live.LiveConfig()
	if !lc.HotEnabled || seq <= 0 {
		return
	}
	now := d.now()
	window := windowOf(lc)
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.chans[channelID]
	if c == nil {
		if len(d.chans) >= d.max {
			d.m.untracked.Inc()
			return
		}
		c = &local{winStart: now}
		d.chans[channelID] = c
		d.m.tracked.Set(float64(len(d.chans)))
	}
	if seq <= c.lastSeq {
		return
	}
	c.lastSeq = seq
	c.advance(now, window)
	c.cur++
	c.lastEvent = now
}

// Hot reports whether the channel is hot now in this node's view (false in
// dry run and when detection is off).
func (d *Detector) Hot(channelID string) bool {
	_, ok := (*d.hot.Load())[channelID]
	return ok
}

// Watch calls fn on every change of a channel's mark in this node's view
// until cancel is called. fn runs on the detector's goroutines and must not
// block; it may call Hot.
func (d *Detector) Watch(fn func(channelID string, on bool)) (cancel func()) {
	d.mu.Lock()
	id := d.nextWatch
	d.nextWatch++
	d.watchers[id] = fn
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.watchers, id)
		d.mu.Unlock()
	}
}

// Channels lists the hot channels of this node's view, its own marks first
// (and in dry run those it would mark), then other nodes', by channel id.
func (d *Detector) Channels() []Channel {
	lc := d.cfg.Live.LiveConfig()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Channel
	for _, id := range slices.Sorted(maps.Keys(d.chans)) {
		c := d.chans[id]
		if !c.hot {
			continue
		}
		src := "local"
		if lc.HotDryRun {
			src = "dry_run"
		}
		out = append(out, Channel{ChannelID: id, Rate: c.rate, Since: c.since, Source: src, NodeID: d.cfg.NodeID})
	}
	for _, id := range slices.Sorted(maps.Keys(d.remotes)) {
		for _, node := range slices.Sorted(maps.Keys(d.remotes[id])) {
			r := d.remotes[id][node]
			exp := r.expires
			out = append(out, Channel{ChannelID: id, Rate: r.rate, Since: r.since, Source: "remote", NodeID: node, ExpiresAt: &exp})
		}
	}
	return out
}

// windowOf is the live sliding window.
func windowOf(lc parley.LiveConfig) time.Duration {
	return time.Duration(max(1, lc.HotWindowSeconds)) * time.Second
}

func ttlOf(lc parley.LiveConfig) time.Duration {
	return time.Duration(max(1, lc.HotTTLSeconds)) * time.Second
}

// advance moves c's windows forward to now.
func (c *local) advance(now time.Time, window time.Duration) {
	el := now.Sub(c.winStart)
	if el < window {
		return
	}
	if el < 2*window {
		c.prev = c.cur
	} else {
		c.prev = 0
	}
	c.cur = 0
	c.winStart = c.winStart.Add(el / window * window)
}

// rateAt is c's rate over the sliding window ending at now, in events per
// second.
func (c *local) rateAt(now time.Time, window time.Duration) float64 {
	c.advance(now, window)
	frac := float64(now.Sub(c.winStart)) / float64(window)
	return (float64(c.prev)*(1-frac) + float64(c.cur)) / window.Seconds()
}

// evaluate measures every channel against the live thresholds, renews this
// node's marks, expires lapsed marks of other nodes, forgets idle channels
// and reports the changes of the view.
func (d *Detector) evaluate() {
	lc := d.cfg.Live.LiveConfig()
	now := d.now()
	window, ttl := windowOf(lc), ttlOf(lc)
	effective := lc.HotEnabled && !lc.HotDryRun

	d.emitMu.Lock()
	defer d.emitMu.Unlock()
	d.mu.Lock()
	var dry []transition
	var on []markEntry
	var off []string
	for id, c := range d.chans {
		if lc.HotEnabled {
			c.rate = c.rateAt(now, window)
		} else {
			c.rate = 0
		}
		switch {
		case !c.hot && lc.HotEnabled && c.rate >= float64(lc.HotOnRate):
			c.hot, c.since = true, now
			if !effective {
				dry = append(dry, transition{id, true, "dry_run"})
			}
		case c.hot && (!lc.HotEnabled || c.rate < float64(lc.HotOffRate)):
			c.hot = false
			if !effective {
				dry = append(dry, transition{id, false, "dry_run"})
			}
		}
		if effective && c.hot {
			on = append(on, markEntry{id, c.rate, c.since})
		}
		if d.published[id] && !(effective && c.hot) {
			off = append(off, id)
			delete(d.published, id)
		}
		if !c.hot && now.Sub(c.lastEvent) > 2*window {
			delete(d.chans, id)
		}
	}
	for id := range d.published { // a channel forgotten while published
		if _, ok := d.chans[id]; !ok {
			off = append(off, id)
			delete(d.published, id)
		}
	}
	d.m.tracked.Set(float64(len(d.chans)))
	for id, nodes := range d.remotes {
		for node, r := range nodes {
			if !now.Before(r.expires) {
				delete(nodes, node)
			}
		}
		if len(nodes) == 0 {
			delete(d.remotes, id)
		}
	}
	// Publish the marks that are new now, and renew all of them a few
	// times per TTL.
	renew := now.Sub(d.lastRenew) >= ttl/3
	if renew {
		d.lastRenew = now
	}
	var send []markEntry
	for _, e := range on {
		if renew || !d.published[e.Channel] {
			send = append(send, e)
		}
		d.published[e.Channel] = true
	}
	changes := d.recompute(effective)
	watchers := slices.Collect(maps.Values(d.watchers))
	d.mu.Unlock()

	if len(send) > 0 || len(off) > 0 {
		slices.Sort(off)
		d.publish(message{TTLMs: ttl.Milliseconds(), On: send, Off: off})
	}
	for _, t := range dry {
		d.m.dryRun.WithLabelValues(onOff(t.on)).Inc()
		d.log.Info("hot channel (dry run)", "channel_id", t.channel, "on", t.on)
	}
	d.report(changes, watchers)
}

// recompute rebuilds the view from this node's marks and the other nodes'
// and returns what changed. mu is held.
func (d *Detector) recompute(effective bool) []transition {
	next := map[string]string{}
	if effective {
		for id, c := range d.chans {
			if c.hot {
				next[id] = "local"
			}
		}
		for id := range d.remotes {
			if _, ok := next[id]; !ok {
				next[id] = "remote"
			}
		}
	}
	var changes []transition
	for id, src := range next {
		if _, was := d.view[id]; !was {
			changes = append(changes, transition{id, true, src})
		}
	}
	for id, src := range d.view {
		if _, is := next[id]; !is {
			changes = append(changes, transition{id, false, src}) // whose mark went last
		}
	}
	d.view = next
	if len(changes) == 0 {
		return nil
	}
	hot := make(map[string]struct{}, len(next))
	for id := range next {
		hot[id] = struct{}{}
	}
	d.hot.Store(&hot)
	d.m.hot.Set(float64(len(next)))
	slices.SortFunc(changes, func(a, b transition) int {
		if a.channel < b.channel {
			return -1
		}
		if a.channel > b.channel {
			return 1
		}
		return 0
	})
	return changes
}

// report counts, logs and tells the watchers of changes. emitMu is held.
func (d *Detector) report(changes []transition, watchers []func(string, bool)) {
	for _, t := range changes {
		d.m.transitions.WithLabelValues(onOff(t.on), t.source).Inc()
		d.log.Info("hot channel", "channel_id", t.channel, "on", t.on, "source", t.source)
		for _, fn := range watchers {
			d.safely("watch", func() { fn(t.channel, t.on) })
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// publish sends m from this node; failures are counted and logged (the
// next renewal tries again).
func (d *Detector) publish(m message) {
	if d.cfg.Bus == nil {
		return
	}
	m.Node = d.cfg.NodeID
	data, err := json.Marshal(m)
	if err == nil {
		err = d.cfg.Bus.PublishRaw(Topic, data)
	}
	if err != nil {
		d.m.busErrors.Inc()
		d.log.Warn("hot mark not published", "err", err)
	}
}

// receive takes another node's marks.
func (d *Detector) receive(data []byte) {
	d.safely("receive", func() {
		var m message
		if err := json.Unmarshal(data, &m); err != nil || m.Node == "" {
			d.m.busErrors.Inc()
			d.log.Warn("unreadable hot mark", "err", err)
			return
		}
		if m.Node == d.cfg.NodeID {
			return
		}
		lc := d.cfg.Live.LiveConfig()
		ttl := time.Duration(m.TTLMs) * time.Millisecond
		if ttl <= 0 {
			ttl = ttlOf(lc)
		}
		now := d.now()
		d.emitMu.Lock()
		defer d.emitMu.Unlock()
		d.mu.Lock()
		for _, e := range m.On {
			nodes := d.remotes[e.Channel]
			if nodes == nil {
				nodes = map[string]remote{}
				d.remotes[e.Channel] = nodes
			}
			nodes[m.Node] = remote{rate: e.Rate, since: e.Since, expires: now.Add(ttl)}
		}
		for _, id := range m.Off {
			if nodes := d.remotes[id]; nodes != nil {
				delete(nodes, m.Node)
				if len(nodes) == 0 {
					delete(d.remotes, id)
				}
			}
		}
		effective := lc.HotEnabled && !lc.HotDryRun
		changes := d.recompute(effective)
		watchers := slices.Collect(maps.Values(d.watchers))
		d.mu.Unlock()
		d.report(changes, watchers)
	})
}
