package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"parley"
)

// Gateway serves WebSocket sessions. Create it with New, mount it at
// GET /api/v1/gateway, and stop it with Shutdown.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	store    Store
	bus      parley.EventBus
	presence Presence
	users    userLookup // who a session may see (visibility.go); nil: nobody
	now      func() time.Time
	metrics  *metrics

	parts         []*partition
	seed          maphash.Seed
	hub           *hub
	tail          *streamTail // the channels' newest events (tail.go)
	registry      *registry
	tr            *transport // nil without sockets (benchmarks)
	identifyRate  *ipLimiter
	identifyQueue *admission
	typing        *typingLimiter
	jit           *jitUsers
	deflateStats  *deflateMetrics
	viewStats     *viewMetrics
	stopHot       func() // ends the watch of hot marks
	stopHandover  func() error
	moved         movedNotes    // where handed-over sessions went
	botGen        atomic.Uint64 // CloseBots calls so far (bots.go)
	botsOff       sync.Map      // workspace id → botsOffMark: its latest CloseBots
	sweepEvery    time.Duration

	// deliverHook, when set (tests), runs before each delivery of an event
	// to a session: a place to inject a panic.
	deliverHook atomic.Pointer[func(sessionID string, e *event)]
	// dispatchHook, likewise, runs as the hub hands an event from the bus
	// to the partitions.
	dispatchHook atomic.Pointer[func(topic string, ev parley.Event)]
	// releaseHook, likewise, runs when the hub has dropped the last
	// reference on a topic, before release returns: a place for another
	// session to take the topic at that moment.
	releaseHook atomic.Pointer[func(topic string)]
	// frameHook, likewise, runs on each inbound frame before it is read.
	frameHook atomic.Pointer[func(data []byte)]

	closing atomic.Bool
	stop    chan struct{}
	wg      sync.WaitGroup // the partitions and the hub's worker

	connsMu sync.Mutex
	conns   map[*conn]struct{} // guarded by connsMu: open connections
}

// New starts a gateway: its partitions, the hub's worker and the socket
// poller.
func New(cfg Config) (*Gateway, error) {
	g, err := newGateway(cfg)
	if err != nil {
		return nil, err
	}
	if g.tr, err = newTransport(g); err != nil {
		g.stopWorkers()
		return nil, err
	}
	return g, nil
}

// newGateway is New without the socket layer.
func newGateway(cfg Config) (*Gateway, error) {
	if cfg.Store == nil || cfg.Bus == nil {
		return nil, errors.New("gateway: Config.Store and Config.Bus are required")
	}
	cfg.setDefaults()
	g := &Gateway{
		cfg:           cfg,
		log:           cfg.Logger.With("component", "gateway", "node_id", cfg.NodeID),
		store:         cfg.Store,
		bus:           cfg.Bus,
		presence:      cfg.Presence,
		users:         newUserLookup(&cfg),
		now:           cfg.Now,
		metrics:       newMetrics(cfg.Registerer),
		seed:          maphash.MakeSeed(),
		registry:      newRegistry(),
		identifyRate:  newIPLimiter(cfg.IdentifyRatePerIP),
		identifyQueue: newAdmission(cfg.MaxConcurrentIdentifies, cfg.IdentifyQueue, cfg.IdentifyQueueWait),
		typing:        newTypingLimiter(cfg.TypingInterval),
		jit:           newJITUsers(cfg.Users, cfg.Logger.With("component", "gateway", "node_id", cfg.NodeID), cfg.Registerer),
		stop:          make(chan struct{}),
		conns:         map[*conn]struct{}{},
	}
	g.deflateStats = newDeflateMetrics(cfg.Registerer)
	g.viewStats = newViewMetrics(cfg.Registerer)
	g.sweepEvery = min(time.Second, cfg.HeartbeatInterval/4, cfg.ResumeWindow/4, cfg.ReplayTTL/4)
	g.sweepEvery = max(g.sweepEvery, 5*time.Millisecond)
	g.tail = newStreamTail(cfg.StreamTail, tailAge)
	g.hub = newHub(g)
	g.hub.seq = newSequencer(g)
	g.parts = make([]*partition, cfg.Partitions)
	env := g.partitionEnv()
	for i := range g.parts {
		g.parts[i] = newPartition(env, i)
	}
	for _, p := range g.parts {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			p.run(g.stop)
		}()
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.hub.work(g.stop)
	}()
	if err := g.startHandover(); err != nil {
		g.stopWorkers()
		return nil, err
	}
	if cfg.Hot != nil {
		g.stopHot = cfg.Hot.Watch(g.hotChanged)
	}
	return g, nil
}

// ServeHTTP upgrades GET /api/v1/gateway to a WebSocket connection.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.closing.Load() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "gateway shutting down", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !g.originAllowed(r) {
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	c := &conn{g: g, ip: g.clientIP(r), inbound: g.newInboundLimiter()}
	c.helloMu.Lock()
	c.timer = time.AfterFunc(g.cfg.IdentifyTimeout, func() {
		c.helloMu.Lock() // orders this after the upgrade's writes
		c.helloMu.Unlock()
		c.identifyTimedOut()
	})
	// Counted before the upgrade: the socket may close (and be forgotten)
	// as soon as it is registered with the poller.
	g.connsMu.Lock()
	g.conns[c] = struct{}{}
	g.connsMu.Unlock()
	g.metrics.connections.Inc()
	if err := g.tr.upgrade(w, r, c); err != nil {
		c.timer.Stop()
		c.helloMu.Unlock()
		g.connClosed(c)
		g.log.Warn("gateway upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	c.writeJSON(helloFrame{
		Op:            parley.OpHello,
		HeartbeatMS:   g.cfg.HeartbeatInterval.Milliseconds(),
		ResumeWindowS: int64(g.cfg.ResumeWindow / time.Second),
	})
	c.helloDone.Store(true)
	c.helloMu.Unlock()
	if g.closing.Load() {
		c.goAway()
	}
}

// goAway tells the client to reconnect (to another node, after a random
// pause so that a node's clients do not all come back at once) and closes
// the socket with 1001; the session stays resumable as long as the node
// lives.
func (c *conn) goAway() {
	c.writeJSON(reconnectFrame{Op: parley.OpReconnect, Reason: "shutdown", RetryAfterMS: retryAfterMS(0, 5*time.Second)})
	c.closeWith(parley.CloseGoingAway, "server shutting down")
}

// connClosed forgets a closed connection.
func (g *Gateway) connClosed(c *conn) {
	g.connsMu.Lock()
	_, ok := g.conns[c]
	delete(g.conns, c)
	g.connsMu.Unlock()
	if ok {
		g.metrics.connections.Dec()
	}
}

func (g *Gateway) openConns() []*conn {
	g.connsMu.Lock()
	defer g.connsMu.Unlock()
	out := make([]*conn, 0, len(g.conns))
	for c := range g.conns {
		out = append(out, c)
	}
	return out
}

// Shutdown stops taking connections, tells every client to reconnect
// (with jitter, so that they do not all come back at once) and closes its
// socket with 1001, then waits until the sockets are gone or ctx ends.
// While another node is live it then goes on answering handovers (and
// following the sessions' topics, so that what they miss is handed over
// too) for Config.DrainHandover, or until it holds no session, and stops
// the gateway. The sessions not taken by then die with the node.
func (g *Gateway) Shutdown(ctx context.Context) error {
	if g.closing.Swap(true) {
		return nil
	}
	for _, c := range g.openConns() {
		if c.helloDone.Load() { // else mid-upgrade: ServeHTTP sends it away after hello
			c.goAway()
		}
	}
	var err error
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(g.openConns()) > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
		}
	}
	if err == nil {
		g.lingerForHandovers(ctx)
	}
	if g.stopHandover != nil {
		g.stopHandover()
	}
	if g.tr != nil {
		g.tr.stop()
	}
	g.hub.unsubscribeAll()
	g.hub.seq.Close()
	g.stopWorkers()
	if err != nil {
		return errors.New("gateway shutdown: connections still open when the deadline passed")
	}
	return nil
}

// lingerForHandovers keeps the draining node answering handover requests
// (Shutdown): its clients wait their retry_after before they reconnect to
// another node, which then asks this one for their sessions. It ends when
// the node holds no session, or when Config.DrainHandover passes without a
// session taken (counted from the start, and again from each session
// taken: a node taking thousands of sessions at once admits them a few at a
// time, and the last ones come back long after the first), and in any case
// after MaxLingerFactor times DrainHandover or when ctx ends.
func (g *Gateway) lingerForHandovers(ctx context.Context) {
	if g.stopHandover == nil || g.cfg.DrainHandover <= 0 || g.cfg.LiveNodes == nil ||
		len(g.cfg.LiveNodes()) < 2 || g.registry.len() == 0 {
		return
	}
	held := g.registry.len()
	g.log.Info("gateway draining: answering handovers", "sessions", held, "idle_for", g.cfg.DrainHandover)
	idle := time.NewTimer(g.cfg.DrainHandover)
	defer idle.Stop()
	most := time.NewTimer(MaxLingerFactor * g.cfg.DrainHandover)
	defer most.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for left := held; left > 0; {
		select {
		case <-ctx.Done():
			g.log.Info("gateway drained: shutdown deadline", "sessions_held", held, "sessions_left", left)
			return
		case <-idle.C:
			g.log.Info("gateway drained: no handover for a while", "sessions_held", held, "sessions_left", left)
			return
		case <-most.C:
			g.log.Info("gateway drained: longest linger", "sessions_held", held, "sessions_left", left)
			return
		case <-tick.C:
			if n := g.registry.len(); n < left {
				left = n
				idle.Reset(g.cfg.DrainHandover)
			}
		}
	}
	g.log.Info("gateway drained", "sessions_held", held, "sessions_left", 0)
}

// MaxLingerFactor bounds a drain's linger for handovers: at most this many
// times Config.DrainHandover, however steadily sessions are taken.
const MaxLingerFactor = 6

func (g *Gateway) stopWorkers() {
	if g.stopHot != nil {
		g.stopHot()
	}
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	g.wg.Wait()
}

func (g *Gateway) newSession(id, userID, workspaceID, tokenHash string) *session {
	return newSession(id, userID, workspaceID, tokenHash, g.partitionOf(id))
}

func (g *Gateway) presenceConnect(s *session) {
	if g.presence != nil {
		g.presence.Connect(s.userID, s.id)
	}
}

func (g *Gateway) presenceDisconnect(s *session) {
	if g.presence != nil {
		g.presence.Disconnect(s.userID, s.id)
	}
}

func (g *Gateway) presenceActivity(s *session) {
	if g.presence != nil {
		g.presence.Activity(s.userID, s.id)
	}
}

// registry finds the node's sessions by id, for resume.
type registry struct {
	mu   sync.RWMutex
	byID map[string]*session // guarded by mu
}

func newRegistry() *registry { return &registry{byID: map[string]*session{}} }

func (r *registry) add(s *session) {
	r.mu.Lock()
	r.byID[s.id] = s
	r.mu.Unlock()
}

func (r *registry) get(id string) *session {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

func (r *registry) remove(s *session) {
	r.mu.Lock()
	if r.byID[s.id] == s {
		delete(r.byID, s.id)
	}
	r.mu.Unlock()
}

func (r *registry) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byID)
}

// typingEvent builds the bus event of a typing op.
func typingEvent(workspaceID, channelID, threadRootID, userID string, now time.Time) parley.Event {
	data, _ := json.Marshal(struct {
		ChannelID    string `json:"channel_id"`
		ThreadRootID string `json:"thread_root_id,omitempty"`
		UserID       string `json:"user_id"`
	}{channelID, threadRootID, userID})
	return parley.Event{
		WorkspaceID: workspaceID,
		ChannelID:   channelID,
		Type:        parley.EventTypingStarted,
		Data:        data,
		CreatedAt:   now,
		Topics:      []string{parley.TopicChannel(channelID)},
	}
}
