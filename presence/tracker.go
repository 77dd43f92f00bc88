package presence

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/nodes"
)

// Presence values, as in the client contract.
const (
	Online  = "online"
	Away    = "away"
	Offline = "offline"
)

// Defaults for the zero values of Config.
const (
	DefaultGrace        = 30 * time.Second
	DefaultAwayAfter    = 10 * time.Minute
	DefaultHeartbeat    = 5 * time.Second
	DefaultQueryTimeout = 500 * time.Millisecond
	// DefaultNodeID names the node of a tracker without a bus.
	DefaultNodeID = "local"
)

// status is a presence value ordered so that the aggregate of several
// contributions is their maximum: online beats away beats offline.
type status uint8

const (
	stOffline status = iota
	stAway
	stOnline
)

func (s status) String() string {
	switch s {
	case stOnline:
		return Online
	case stAway:
		return Away
	}
	return Offline
}

func parseStatus(s string) (status, bool) {
	switch s {
	case Online:
		return stOnline, true
	case Away:
		return stAway, true
	case Offline:
		return stOffline, true
	}
	return stOffline, false
}

// Bus is what a tracker needs of the event bus: events on its control
// topics, one TopicMux for the watched users' topics, and the link's state
// (a reconnect makes the node announce itself again). cmd/parley gives it
// the node's bus.
type Bus interface {
	parley.EventBus
	parley.MuxBus
	parley.BusLink
}

// Config configures a Tracker. Zero values are the documented defaults.
type Config struct {
	// Bus carries presence between nodes. Nil: a single node that knows
	// only its own sessions (tests, tools).
	Bus Bus
	// NodeID names this node on the bus: unique among live nodes, as
	// nodes.ValidID says. Required with a Bus; DefaultNodeID without one.
	NodeID string
	// Grace is how long a user stays at their last presence after their
	// last session anywhere is gone (default 30 s).
	Grace time.Duration
	// AwayAfter is how long a user with sessions but no activity stays
	// online before turning away (default 10 min).
	AwayAfter time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the tracker's metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
	// Now is the clock (default time.Now); tests may pass a fake one.
	Now func() time.Time

	// Membership, when set, says which nodes are alive (package nodes);
	// the tracker then sends no heartbeats of its own. Nil: the trackers
	// announce themselves on the bus every Heartbeat.
	Membership Membership
	// Heartbeat is the interval of the trackers' own liveness
	// announcements when there is no Membership (default 5 s).
	Heartbeat time.Duration
	// NodeExpiry is how long a node may stay silent (no heartbeat, and
	// not listed by Membership) before its users' presence is let go
	// (default 3 × Heartbeat).
	NodeExpiry time.Duration
	// QueryTimeout bounds the wait for other nodes' answers before the
	// first presence of a newly watched user is reported (default 500 ms).
	// In the first min(QueryTimeout, Heartbeat) after New, while the node
	// may not know every other node yet, queries wait that long.
	QueryTimeout time.Duration
	// SweepInterval is the tick of the single goroutine that applies
	// grace, away and expiry deadlines (default: a tenth of the shortest
	// of Grace, AwayAfter and Heartbeat, between 1 ms and 1 s).
	SweepInterval time.Duration
}

// Membership is live cluster membership; *nodes.Members has it.
type Membership interface {
	// Live returns the nodes alive now (this one among them).
	Live() []nodes.Node
	// Subscribe calls fn with the live nodes now and after every change,
	// until cancel is called.
	Subscribe(fn func([]nodes.Node)) (cancel func())
}

// Tracker keeps the presence of the users with sessions on this node, and
// the aggregated presence (over every node) of the users watched here. It
// is safe for concurrent use.
type Tracker struct {
	node      string
	boot      int64 // this incarnation, unix ns at New; orders restarts
	grace     int64
	awayAfter int64
	hbEvery   int64 // 0 when Membership says who is alive
	expiry    int64
	qTimeout  int64
	// startupWait bounds the window after start in which queries do not
	// trust the set of known nodes to be complete.
	startupWait int64
	now         func() int64
	log         *slog.Logger
	m           *metrics
	bus         Bus // nil: single node
	members     Membership

	// mux carries the per-user presence topics (nil without a bus).
	mux parley.TopicMux
	// subscribe subscribes a user's topic on mux; tests wrap it to count
	// subscriptions.
	subscribe func(topic string, fn func(parley.Event)) (func() error, error)
	// onTopic is t.onChanged, kept as one func value so that a watched
	// user's subscription does not allocate a closure.
	onTopic func(parley.Event)

	mu           sync.Mutex
	closed       bool                    // guarded by mu
	v            uint64                  // guarded by mu; version of this node's last change
	local        map[string]*localUser   // guarded by mu; users with sessions here (or in grace)
	deadlines    deadlineHeap            // guarded by mu; grace and away deadlines
	manual       map[string]int64        // guarded by mu; users set away by hand → when
	watched      map[string]*watchedUser // guarded by mu; users some local watch wants
	peers        map[string]*peer        // guarded by mu; other nodes
	purges       []purge                 // guarded by mu; dead nodes' contributions to drop
	queries      map[uint64]*query       // guarded by mu; outstanding queries
	nextQID      uint64                  // guarded by mu
	startupUntil int64                   // guarded by mu; until then queries wait for the timeout
	youngUntil   int64                   // guarded by mu; until then nodes met are asked about every watched user
	nextAlive    int64                   // guarded by mu; next heartbeat
	manualSynced bool                    // guarded by mu; asked a peer for the manual-away set
	notes        []note                  // guarded by mu; pending watcher notifications
	out          []parley.Event          // guarded by mu; to publish once mu is released
	unsubs       []func() error          // guarded by mu; control subscriptions

	wake          chan struct{} // signals the dispatcher
	done          chan struct{} // closed by Close
	wg            sync.WaitGroup
	stopMembers   func()
	wasConnected  bool // owned by the sweeper
	everConnected bool // owned by the sweeper
}

// localUser is a user with at least one session on this node, or in grace
// after the last one left. It is small on purpose: one per connected user.
type localUser struct {
	id          string
	sessions    []string // usually one to three
	lastActive  int64    // unix ns of the last activity (or connect)
	goneAt      int64    // unix ns when the last session left; 0 while any remain
	v           uint64   // version of status
	status      status   // this node's contribution, as published
	awayQueued  bool     // an away deadline is in the heap
	graceQueued bool     // a grace deadline is in the heap
	deleted     bool     // removed from local; its deadlines are void
}

// New starts a tracker: its sweeper and dispatcher goroutines and, with a
// bus, its control subscriptions and first heartbeat.
func New(cfg Config) (*Tracker, error) {
	if cfg.NodeID == "" && cfg.Bus == nil {
		cfg.NodeID = DefaultNodeID
	}
	if cfg.NodeID == "" {
		return nil, errors.New("presence: NodeID is required with a Bus")
	}
	if err := nodes.ValidID(cfg.NodeID); err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.AwayAfter <= 0 {
		cfg.AwayAfter = DefaultAwayAfter
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.NodeExpiry <= 0 {
		cfg.NodeExpiry = 3 * cfg.Heartbeat
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = min(cfg.Grace, cfg.AwayAfter, cfg.Heartbeat) / 10
		cfg.SweepInterval = max(time.Millisecond, min(cfg.SweepInterval, time.Second))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	clock := cfg.Now
	if clock == nil {
		clock = time.Now
	}
	t := &Tracker{
		node:        cfg.NodeID,
		grace:       int64(cfg.Grace),
		awayAfter:   int64(cfg.AwayAfter),
		expiry:      int64(cfg.NodeExpiry),
		qTimeout:    int64(cfg.QueryTimeout),
		startupWait: int64(cfg.Heartbeat),
		now:         func() int64 { return clock().UnixNano() },
		log:         cfg.Logger.With("component", "presence", "node", cfg.NodeID),
		m:           newMetrics(cfg.Registerer),
		bus:         cfg.Bus,
		members:     cfg.Membership,
		local:       make(map[string]*localUser),
		manual:      make(map[string]int64),
		watched:     make(map[string]*watchedUser),
		peers:       make(map[string]*peer),
		queries:     make(map[uint64]*query),
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	t.boot = time.Now().UnixNano() // wall time, not the test clock: it orders restarts
	t.onTopic = t.onChanged
	t.subscribe = func(string, func(parley.Event)) (func() error, error) { return nil, nil }
	if t.bus != nil {
		// One Mux for every watched user's topic: a callback subscription
		// per user would cost a goroutine each.
		t.mux = t.bus.NewMux(0, func(ev parley.Event) { t.onTopic(ev) })
		t.subscribe = func(topic string, _ func(parley.Event)) (func() error, error) {
			if err := t.mux.Subscribe(topic); err != nil {
				return nil, err
			}
			return func() error { return t.mux.Unsubscribe(topic) }, nil
		}
		if t.members == nil {
			t.hbEvery = int64(cfg.Heartbeat)
		}
		if err := t.startBus(); err != nil {
			return nil, err
		}
	}
	t.wg.Add(2)
	go t.sweepLoop(cfg.SweepInterval)
	go t.dispatchLoop()
	t.log.Debug("presence tracker started", "grace", cfg.Grace, "away_after", cfg.AwayAfter)
	return t, nil
}

// Close stops the tracker and tells the other nodes this node is gone:
// they keep its users' presence for Grace (their clients are reconnecting
// elsewhere), then let it go. Watch callbacks stop.
func (t *Tracker) Close() { t.stop(true) }

// stop ends the tracker; bye=false is a crash as far as the other nodes
// can tell (tests).
func (t *Tracker) stop(bye bool) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	for id, wu := range t.watched {
		t.unsubscribeUser(id, wu)
	}
	unsubs := t.unsubs
	t.unsubs = nil
	t.mu.Unlock()

	close(t.done)
	t.wg.Wait()
	if t.stopMembers != nil {
		t.stopMembers()
	}
	for _, u := range unsubs {
		if err := u(); err != nil {
			t.log.Debug("presence unsubscribe", "err", err)
		}
	}
	if t.mux != nil {
		t.mux.Close()
	}
	if bye && t.bus != nil {
		t.publish([]parley.Event{t.ctlEvent(parley.EventPresenceBye, parley.TopicPresenceControl, ctlMsg{})})
	}
}

// Connect records a new session of userID on this node. The user is online
// (or away, if set away by hand) at once, everywhere.
func (t *Tracker) Connect(userID, sessionID string) {
	now := t.now()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	u := t.local[userID]
	if u == nil {
		u = &localUser{id: userID}
		t.local[userID] = u
		t.m.localUsers.Inc()
	}
	if !slices.Contains(u.sessions, sessionID) {
		u.sessions = append(u.sessions, sessionID)
	}
	u.lastActive = now
	u.goneAt = 0
	t.queueAway(u)
	t.setStatus(u, t.localStatus(u, now))
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}

// Disconnect records that a session of userID on this node is gone. When it
// was the user's last one here, this node keeps reporting the user for
// Grace, then reports them offline; the user is offline once no node
// reports them.
func (t *Tracker) Disconnect(userID, sessionID string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.local[userID]
	if t.closed || u == nil {
		return
	}
	i := slices.Index(u.sessions, sessionID)
	if i < 0 {
		return
	}
	u.sessions = slices.Delete(u.sessions, i, i+1)
	if len(u.sessions) == 0 {
		u.goneAt = now
		if !u.graceQueued {
			u.graceQueued = true
			t.deadlines.push(deadline{at: now + t.grace, u: u, kind: dlGrace})
		}
	}
}

// Activity records client activity other than heartbeats on a session of
// userID: an away user (not away by hand) is online again.
func (t *Tracker) Activity(userID, sessionID string) {
	now := t.now()
	t.mu.Lock()
	u := t.local[userID]
	if t.closed || u == nil {
		t.mu.Unlock()
		return
	}
	u.lastActive = now
	t.queueAway(u)
	if u.status == stAway {
		t.setStatus(u, t.localStatus(u, now))
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}

// SetAway sets or clears the user's manual away, on every node. While set,
// a user with sessions is away whatever their activity.
func (t *Tracker) SetAway(userID string, away bool) {
	now := t.now()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	at := now
	if cur, ok := t.manual[userID]; ok && at <= cur {
		at = cur + 1
	}
	if t.applyManual(userID, away, at, now) && t.bus != nil {
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceManual, parley.TopicPresenceControl, ctlMsg{UserID: userID, Away: away, At: at}))
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}

// Status returns the user's presence: aggregated over every node when the
// user is watched on this node, else as far as this node's own sessions
// tell (a user with sessions only on other nodes then reads offline).
func (t *Tracker) Status(userID string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wu := t.watched[userID]; wu != nil && wu.synced {
		return wu.status.String()
	}
	if u := t.local[userID]; u != nil {
		return u.status.String()
	}
	return Offline
}

// localStatus is this node's view of a local user, grace aside.
func (t *Tracker) localStatus(u *localUser, now int64) status {
	if _, ok := t.manual[u.id]; ok {
		return stAway
	}
	if now-u.lastActive >= t.awayAfter {
		return stAway
	}
	return stOnline
}

// setStatus changes this node's contribution for u: it is published on the
// user's presence topic and folded into the local aggregate.
func (t *Tracker) setStatus(u *localUser, s status) {
	if u.status == s {
		return
	}
	u.status = s
	t.v++
	u.v = t.v
	if t.bus != nil {
		t.out = append(t.out, t.changedEvent(u))
	}
	t.m.changes.Inc()
	t.userChanged(u.id)
}

// queueAway makes sure an away deadline is pending for u. Activity does
// not move the deadline: when it fires early, it is put back at
// lastActive+AwayAfter, so a busy user costs one heap entry per AwayAfter.
func (t *Tracker) queueAway(u *localUser) {
	if !u.awayQueued {
		u.awayQueued = true
		t.deadlines.push(deadline{at: u.lastActive + t.awayAfter, u: u, kind: dlAway})
	}
}

// fireAway runs at an away deadline of u.
func (t *Tracker) fireAway(u *localUser, now int64) {
	u.awayQueued = false
	if u.deleted {
		return
	}
	if now-u.lastActive < t.awayAfter {
		t.queueAway(u)
		return
	}
	t.setStatus(u, t.localStatus(u, now))
}

// fireGrace runs at a grace deadline of u: with no session back, the user
// is offline on this node and forgotten.
func (t *Tracker) fireGrace(u *localUser, now int64) {
	u.graceQueued = false
	if u.deleted || len(u.sessions) > 0 {
		return
	}
	if now-u.goneAt < t.grace {
		u.graceQueued = true
		t.deadlines.push(deadline{at: u.goneAt + t.grace, u: u, kind: dlGrace})
		return
	}
	u.deleted = true
	delete(t.local, u.id)
	t.m.localUsers.Dec()
	t.setStatus(u, stOffline)
}

// applyManual records a manual-away change made at `at` (last writer
// wins) and re-evaluates the user. It reports whether anything changed.
func (t *Tracker) applyManual(userID string, away bool, at, now int64) bool {
	cur, ok := t.manual[userID]
	if away {
		if ok && at <= cur {
			return false
		}
		t.manual[userID] = at
	} else {
		if !ok || at < cur {
			return false
		}
		delete(t.manual, userID)
	}
	if u := t.local[userID]; u != nil {
		t.setStatus(u, t.localStatus(u, now))
	}
	t.userChanged(userID)
	return true
}

func (t *Tracker) takeOut() []parley.Event {
	out := t.out
	t.out = nil
	return out
}

func (t *Tracker) publish(events []parley.Event) {
	if len(events) == 0 || t.bus == nil {
		return
	}
	t.bus.Publish(events)
}
