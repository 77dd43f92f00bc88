// Package nodes announces this Parley node on the bus and keeps the live
// list of the cluster's nodes. Every node publishes a heartbeat on topic
// parley.NodesTopic every Interval and a goodbye when it stops; a node not heard
// from for three intervals is dropped. Readers get the list through one
// atomic pointer, rebuilt only when membership changes, so a lookup costs a
// load.
//
// It must not know about NATS (it takes the root's parley.RawBus), sessions or
// storage; what a node does with the list (a ring, a handover) is up to the
// caller.
package nodes

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"parley"
)

// DefaultInterval is the heartbeat period unless Config.Interval says
// otherwise.
const DefaultInterval = 2 * time.Second

// ExpiryIntervals is how many heartbeat periods a node may stay silent
// before it is dropped.
const ExpiryIntervals = 3

// Node is one Parley process as it announces itself.
type Node struct {
	ID        string    `json:"node_id"`
	WSURL     string    `json:"ws_url,omitempty"`
	APIURL    string    `json:"api_url,omitempty"`
	Roles     []string  `json:"roles,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (n Node) equal(o Node) bool {
	return n.ID == o.ID && n.WSURL == o.WSURL && n.APIURL == o.APIURL &&
		slices.Equal(n.Roles, o.Roles) && n.StartedAt.Equal(o.StartedAt)
}

// Config is what Start needs. Bus and Self.ID are required.
type Config struct {
	// Bus carries heartbeats and goodbyes, on parley.NodesTopic.
	Bus parley.RawBus
	// Self is this node; StartedAt defaults to Now() at Start.
	Self Node
	// Interval is the heartbeat period (default 2 s); a node is dropped
	// after ExpiryIntervals of them without a heartbeat.
	Interval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now; it stamps heartbeats as they arrive and
	// decides expiry.
	Now func() time.Time
}

// message is a heartbeat or goodbye on the wire: the node's fields and op.
type message struct {
	Op string `json:"op"`
	Node
}

const (
	opHeartbeat = "heartbeat"
	opGoodbye   = "goodbye"
)

// Members is the live membership seen from this node. Its methods are safe
// for concurrent use.
//
// Goroutines: Start starts one heartbeat goroutine, ended and waited for by
// Close; bus messages are handled on the bus's subscription goroutine.
// Subscribers are called one change at a time, in order, from either.
type Members struct {
	bus      parley.RawBus
	self     Node
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger
	unsub    func() error
	quit     chan struct{} // closed by Close
	done     chan struct{} // closed when the heartbeat goroutine ends
	once     sync.Once

	live atomic.Pointer[[]Node] // sorted by ID, self included; never modified once stored

	mu      sync.Mutex
	peers   map[string]*peer       // other nodes by ID; guarded by mu
	version uint64                 // counts membership changes; guarded by mu
	subs    map[uint64]*subscriber // guarded by mu
	nextSub uint64                 // guarded by mu

	notifyMu sync.Mutex // serialises calls to subscribers

	sendMu sync.Mutex // serialises announcements
	gone   bool       // guarded by sendMu: the goodbye is out, nothing may follow it
}

type subscriber struct {
	fn   func([]Node)
	seen uint64 // the version it last got; guarded by Members.notifyMu
}

type peer struct {
	node     Node
	lastSeen time.Time
}

// ValidID checks a node id: 1 to 64 letters, digits, '-' or '_' (it becomes
// a token of bus subjects and of session ids).
func ValidID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("node id %q: want 1 to 64 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("node id %q: only letters, digits, '-' and '_'", id)
		}
	}
	return nil
}

// Start announces cfg.Self and follows the other nodes' announcements.
func Start(cfg Config) (*Members, error) {
	if cfg.Bus == nil {
		return nil, errors.New("nodes: Config.Bus is required")
	}
	if err := ValidID(cfg.Self.ID); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Self.StartedAt.IsZero() {
		cfg.Self.StartedAt = cfg.Now()
	}
	cfg.Self.StartedAt = cfg.Self.StartedAt.UTC()
	cfg.Self.Roles = slices.Clone(cfg.Self.Roles)
	m := &Members{
		bus:      cfg.Bus,
		self:     cfg.Self,
		interval: cfg.Interval,
		now:      cfg.Now,
		log:      cfg.Logger.With("component", "nodes", "node_id", cfg.Self.ID),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		peers:    map[string]*peer{},
		subs:     map[uint64]*subscriber{},
	}
	m.live.Store(&[]Node{m.self})
	unsub, err := cfg.Bus.SubscribeRaw(parley.NodesTopic, m.receive)
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	m.unsub = unsub
	m.send(opHeartbeat)
	go m.run()
	return m, nil
}

// Self returns this node.
func (m *Members) Self() Node { return m.self }

// Live returns the live nodes, this one included, sorted by ID. The slice is
// shared: callers must not modify it.
func (m *Members) Live() []Node { return *m.live.Load() }

// Subscribe calls fn with the live list now and after every change, one
// call at a time and in order. fn must not call Subscribe; it may cancel.
func (m *Members) Subscribe(fn func([]Node)) (cancel func()) {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.mu.Lock()
	id := m.nextSub
	m.nextSub++
	m.subs[id] = &subscriber{fn: fn, seen: m.version}
	list := m.Live()
	m.mu.Unlock()
	fn(list)
	return func() {
		m.mu.Lock()
		delete(m.subs, id)
		m.mu.Unlock()
	}
}

// Close stops the heartbeats, tells the other nodes this one is leaving,
// and stops following them. Subscribers get no further calls.
func (m *Members) Close() {
	m.once.Do(func() {
		close(m.quit)
		<-m.done
		if err := m.unsub(); err != nil {
			m.log.Warn("nodes: unsubscribe", "err", err)
		}
		m.send(opGoodbye)
		m.mu.Lock()
		clear(m.subs)
		m.mu.Unlock()
	})
}

// run heartbeats and expires silent nodes until Close.
func (m *Members) run() {
	defer close(m.done)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.quit:
			return
		case <-t.C:
			m.send(opHeartbeat)
			m.sweep()
		}
	}
}

func (m *Members) send(op string) {
	// A heartbeat after the goodbye (an answer to a newcomer whose
	// announcement was being handled while Close ran) would bring this
	// node back to life on every other node until it expired.
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	if m.gone {
		return
	}
	if op == opGoodbye {
		m.gone = true
	}
	data, err := json.Marshal(message{Op: op, Node: m.self})
	if err == nil {
		err = m.bus.PublishRaw(parley.NodesTopic, data)
	}
	if err != nil {
		m.log.Warn("nodes: announce failed", "op", op, "err", err)
	}
}

// receive handles one announcement from the bus.
func (m *Members) receive(data []byte) {
	var msg message
	if err := json.Unmarshal(data, &msg); err != nil || ValidID(msg.ID) != nil {
		m.log.Warn("nodes: bad announcement", "err", err, "len", len(data))
		return
	}
	if msg.ID == m.self.ID {
		if !msg.StartedAt.Equal(m.self.StartedAt) {
			m.log.Error("nodes: another process announces this node's id", "their_started_at", msg.StartedAt)
		}
		return
	}
	now := m.now()
	m.mu.Lock()
	p := m.peers[msg.ID]
	changed, newcomer := false, false
	switch msg.Op {
	case opHeartbeat:
		switch {
		case p == nil:
			m.peers[msg.ID] = &peer{node: msg.Node, lastSeen: now}
			changed, newcomer = true, true
		case !p.node.equal(msg.Node):
			p.node, p.lastSeen = msg.Node, now
			changed = true
		default:
			p.lastSeen = now
		}
	case opGoodbye:
		// A goodbye of an earlier process with this id (a restart) does not
		// remove the new one.
		if p != nil && !msg.StartedAt.Before(p.node.StartedAt) {
			delete(m.peers, msg.ID)
			changed = true
		}
	default:
		m.mu.Unlock()
		m.log.Debug("nodes: unknown announcement", "op", msg.Op)
		return
	}
	if changed {
		m.rebuildLocked()
	}
	m.mu.Unlock()
	if changed {
		m.log.Info("nodes: membership changed", "op", msg.Op, "peer", msg.ID, "live", len(m.Live()))
		m.notify()
	}
	if newcomer {
		// Answer at once, so that the newcomer need not wait an interval
		// to learn of this node.
		m.send(opHeartbeat)
	}
}

// sweep drops the nodes silent for longer than ExpiryIntervals.
func (m *Members) sweep() {
	deadline := m.now().Add(-ExpiryIntervals * m.interval)
	m.mu.Lock()
	var gone []string
	for id, p := range m.peers {
		if p.lastSeen.Before(deadline) {
			delete(m.peers, id)
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		m.rebuildLocked()
	}
	m.mu.Unlock()
	if len(gone) > 0 {
		m.log.Warn("nodes: expired", "peers", strings.Join(gone, ","), "live", len(m.Live()))
		m.notify()
	}
}

// rebuildLocked stores a fresh sorted list; m.mu is held.
func (m *Members) rebuildLocked() {
	list := make([]Node, 0, len(m.peers)+1)
	list = append(list, m.self)
	for _, p := range m.peers {
		list = append(list, p.node)
	}
	slices.SortFunc(list, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	m.live.Store(&list)
	m.version++
}

// notify hands the newest list to the subscribers unless they have it.
func (m *Members) notify() {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.mu.Lock()
	v, list := m.version, m.Live()
	subs := make([]*subscriber, 0, len(m.subs))
	for _, sub := range m.subs {
		subs = append(subs, sub)
	}
	m.mu.Unlock()
	for _, sub := range subs {
		if sub.seen < v {
			sub.seen = v
			sub.fn(list)
		}
	}
}
