package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"parley"
)

// ConnectOptions configure a gateway connection. Only Handler is required;
// every zero value is a documented default.
type ConnectOptions struct {
	// Handler receives the events, one call at a time, never concurrently,
	// from a goroutine of the Conn. Per channel, durable events come in seq
	// order with no gaps and no duplicates; other events pass through as
	// they arrive. It should return quickly: while it runs, the Conn's later
	// events wait in memory (see MaxQueue). It may call any method of the
	// Conn, Close included.
	Handler func(Event)
	// Channels are tracked from the start, each with the last seq the
	// application already has: on every new session (the first one
	// included) the Conn catches them up with /sync.
	Channels map[string]int64
	// DeclaredOnly restricts ordering and gap filling to the channels the
	// application declared (Channels, TrackChannel) and those the user joins
	// or creates while connected; durable events of any other channel pass
	// through unchecked. By default a channel is also tracked from the first
	// of its events that only its members receive (a message, reaction or
	// pin), from that event's seq. Directory copies of other public
	// channels' lifecycle events never start tracking (see startsTracking).
	DeclaredOnly bool
	// URLs are the gateway URLs to use, in turn: the Conn moves to the next
	// after a failed attempt. Default: the Client's WSURL override, else the
	// gateway of each of its base URLs (WithFallbackURLs).
	URLs []string
	// Header is sent with every upgrade request (an Origin, say).
	Header http.Header
	// LocalAddr, an IP address such as "127.0.0.2", is the local address
	// the sockets leave from (ws:// URLs only); "" lets the system choose.
	// A load tester spreads many sockets over several addresses this way.
	LocalAddr string
	// MinBackoff and MaxBackoff bound the jittered exponential wait between
	// reconnect attempts (defaults 250 ms and 30 s).
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts is how many reconnect attempts in a row may fail before
	// the Conn gives up and closes with an error; 0 means never give up.
	MaxAttempts int
	// HandshakeTimeout bounds a dial plus hello plus identify or resume
	// (default 10 s).
	HandshakeTimeout time.Duration
	// MaxQueue bounds the events received but not yet handled (default
	// 65536). Past it the Conn drops the socket, and resumes once the
	// handler has worked through half of them: nothing is lost, the server
	// replays the rest.
	MaxQueue int
	// OnState, if set, is told of session changes. It runs on the Conn's
	// internal goroutines and must not block.
	OnState func(State, error)
}

// State is a change in a Conn's session.
type State uint8

const (
	// StateReady: identified, a new session (the first, or one after the
	// old session could not be resumed). Tracked channels are caught up
	// with /sync; an application that follows channels it does not track
	// should boot again after a StateReady that follows a drop.
	StateReady State = iota + 1
	// StateResumed: the session was resumed after a drop.
	StateResumed
	// StateDisconnected: the socket dropped; the Conn is reconnecting.
	StateDisconnected
	// StateClosed: the Conn is finished (Close, or Err says why).
	StateClosed
)

func (s State) String() string {
	switch s {
	case StateReady:
		return "ready"
	case StateResumed:
		return "resumed"
	case StateDisconnected:
		return "disconnected"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", s)
}

// Stats are a Conn's counters since Connect.
type Stats struct {
	Reconnects        int64 // sessions re-established after a drop
	Resumes           int64 // successful resumes
	InvalidSessions   int64 // invalid_session answers (then identify + catch-up)
	HeartbeatTimeouts int64 // sockets dropped for silence after a heartbeat
	CatchUps          int64 // /sync catch-up rounds
	GapsFilled        int64 // channel seq gaps filled from /events
	GapsUnfillable    int64 // gaps that could not be filled (access lost, or the log would not serve them)
	Summaries         int64 // channel.summary events: passive channels' positions moved without their events
	DuplicatesDropped int64 // durable events dropped as already delivered
	SGaps             int64 // frames whose s was not the last s + 1 (a server fault)
	Delivered         int64 // events handed to the handler
}

// ErrNotConnected is returned by ops sent while no session is live.
var ErrNotConnected = errors.New("gateway: not connected")

// ErrClosed is returned by a closed Conn.
var ErrClosed = errors.New("gateway: connection closed")

// ErrTooManyInView: a PresenceSub of more users than a session may have in
// view.
var ErrTooManyInView = errors.New("gateway: too many users in view")

// Conn is a gateway connection: a session that survives socket drops. It is
// safe for concurrent use.
//
// An idle Conn holds no goroutine: frames arrive on the shared engine's
// goroutines, a delivery goroutine runs only while there are events to
// hand over, and a reconnect goroutine only while reconnecting.
type Conn struct {
	client      *Client
	workspaceID string
	opts        ConnectOptions
	handler     func(Event)
	ctx         context.Context // ends at Close
	cancel      context.CancelFunc
	done        chan struct{}

	stats struct {
		reconnects, resumes, invalidSessions, heartbeatTimeouts, catchUps,
		gapsFilled, gapsUnfillable, duplicates, sGaps, delivered, summaries atomic.Int64
	}

	mu         sync.Mutex
	closed     bool          // guarded by mu
	err        error         // why the Conn ended; guarded by mu
	cur        *socket       // the socket in use; guarded by mu
	live       bool          // cur has finished its handshake; guarded by mu
	sessionID  string        // guarded by mu
	userID     string        // guarded by mu
	lastS      int64         // the last session seq received; guarded by mu
	urlIdx     int           // guarded by mu
	reconnect  bool          // a reconnect goroutine runs; guarded by mu
	running    int           // goroutines that must end before done closes; guarded by mu
	focus      []string      // the last Focus, sent again on every session; guarded by mu
	focusSet   bool          // Focus was called; guarded by mu
	presence   []string      // the last PresenceSub, likewise; guarded by mu
	presSet    bool          // PresenceSub was called; guarded by mu
	queue      []item        // events waiting for the handler; guarded by mu
	spare      []item        // guarded by mu
	pending    int           // items queued or being handled; guarded by mu
	draining   bool          // a delivery goroutine runs; guarded by mu
	lowWater   chan struct{} // closed when pending falls to MaxQueue/2; guarded by mu
	overflowed bool          // guarded by mu

	// beforeDial, when set (tests only), runs before every dial; guarded
	// by mu.
	beforeDial func()

	// chans is the per-channel position, owned by the delivery goroutine
	// (one at a time); cmu guards it for readers such as Positions.
	cmu   sync.Mutex
	chans map[string]*chanState
}

// Connect opens a gateway session for the client's user in a workspace:
// it dials, reads hello, identifies and waits for ready, retrying within ctx
// as it would after a drop. ctx bounds only this first connection; the Conn
// then lives until Close or a fatal error.
func (c *Client) Connect(ctx context.Context, workspaceID string, opts ConnectOptions) (*Conn, error) {
	if opts.Handler == nil {
		return nil, errors.New("client: ConnectOptions.Handler is required")
	}
	if len(opts.URLs) == 0 {
		opts.URLs = c.gatewayURLs()
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 250 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = 65536
	}
	cctx, cancel := context.WithCancel(context.Background())
	conn := &Conn{
		client:      c,
		workspaceID: workspaceID,
		opts:        opts,
		handler:     opts.Handler,
		ctx:         cctx,
		cancel:      cancel,
		done:        make(chan struct{}),
		chans:       make(map[string]*chanState, len(opts.Channels)),
	}
	for id, seq := range opts.Channels {
		conn.chans[id] = &chanState{last: max(seq, 0)}
	}
	// The first connection runs here, bounded by both ctx and the Conn.
	first, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(cctx, stop)()
	if err := conn.connectLoop(first, true, nil); err != nil {
		conn.finish(err)
		return nil, err
	}
	return conn, nil
}

// connectLoop establishes a session, retrying with jittered exponential
// backoff, until it succeeds, ctx ends, or an error says not to retry.
// cause is why the previous socket ended (nil for the first connection).
func (c *Conn) connectLoop(ctx context.Context, first bool, cause error) error {
	last := cause
	if rr := (*reconnectRequest)(nil); errors.As(cause, &rr) && rr.elsewhere {
		c.nextURL() // a draining node: its sessions are handed over from the next
	}
	for attempt := 0; ; attempt++ {
		if wait := c.delay(attempt, first, last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		if err := c.waitQueueLow(ctx); err != nil {
			return err
		}
		err := c.establish(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isFatal(err) {
			return err
		}
		c.logger().Debug("gateway: connect attempt failed", "attempt", attempt+1, "err", err)
		if c.opts.MaxAttempts > 0 && attempt+1 >= c.opts.MaxAttempts {
			return fmt.Errorf("gateway: giving up after %d attempts: %w", attempt+1, err)
		}
		if rr := (*reconnectRequest)(nil); !errors.As(err, &rr) || rr.elsewhere {
			c.nextURL()
		}
		last = err
	}
}

// nextURL moves the following attempts to the next of Options.URLs.
func (c *Conn) nextURL() {
	c.mu.Lock()
	c.urlIdx = (c.urlIdx + 1) % len(c.opts.URLs)
	c.mu.Unlock()
}

// delay is the wait before attempt n (0-based). A first connection starts at
// once; after a drop the first attempt waits a random moment below
// MinBackoff, so that clients dropped together do not return together. A
// reconnect op's retry_after is honoured, plus jitter; otherwise the wait
// doubles per attempt up to MaxBackoff, with jitter over its upper half.
func (c *Conn) delay(n int, first bool, last error) time.Duration {
	var rr *reconnectRequest
	if errors.As(last, &rr) {
		return rr.after + rand.N(rr.after/4+c.opts.MinBackoff)
	}
	if n == 0 {
		if first {
			return 0
		}
		return rand.N(c.opts.MinBackoff)
	}
	d := c.opts.MinBackoff << min(n, 20)
	if d <= 0 || d > c.opts.MaxBackoff {
		d = c.opts.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// isFatal reports whether an attempt's error means giving up.
func isFatal(err error) bool {
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce.fatal()
	}
	return errors.Is(err, ErrClosed)
}

// establish opens one socket and runs the handshake on it: hello, then
// resume when there is a session to resume (falling back to identify on
// invalid_session), else identify.
func (c *Conn) establish(ctx context.Context) (err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	url := c.opts.URLs[c.urlIdx]
	hook := c.beforeDial
	c.mu.Unlock()
	if hook != nil {
		hook()
	}

	s, err := dialSocket(ctx, c, url, c.opts.Header, c.opts.HandshakeTimeout)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.close(parley.CloseNormal, "closed")
		return ErrClosed
	}
	c.cur, c.live = s, false
	c.mu.Unlock()
	defer func() {
		if err != nil {
			s.abort()
		}
	}()

	hello, err := s.await(ctx, c.opts.HandshakeTimeout, parley.OpHello)
	if err != nil {
		return err
	}
	s.startHeartbeat(hello.HeartbeatMS)
	token := c.client.Token()

	c.mu.Lock()
	sessionID, lastS := c.sessionID, c.lastS
	c.mu.Unlock()
	if sessionID != "" {
		if err := s.sendJSON(resumeFrame{Op: parley.OpResume, Token: token, SessionID: sessionID, Seq: lastS}); err != nil {
			return err
		}
		f, err := s.await(ctx, c.opts.HandshakeTimeout, parley.OpResumed, parley.OpInvalidSession)
		if err != nil {
			var ce *CloseError
			if errors.As(err, &ce) && ce.Code == parley.CloseInvalidSeq {
				c.resetSession()
			}
			return err
		}
		if f.Op == parley.OpResumed {
			return c.goLive(s, StateResumed)
		}
		// invalid_session: onInvalidSession has dropped the session; the
		// socket stays open for a fresh identify.
	}
	if err := s.sendJSON(identifyFrame{Op: parley.OpIdentify, Token: token, WorkspaceID: c.workspaceID}); err != nil {
		return err
	}
	if _, err := s.await(ctx, c.opts.HandshakeTimeout, parley.OpReady); err != nil {
		return err
	}
	return c.goLive(s, StateReady)
}

// goLive marks s as the live socket after its handshake and sends it the
// session's view state (focus, presence subscriptions).
func (c *Conn) goLive(s *socket, st State) error {
	c.mu.Lock()
	if c.cur != s || c.closed {
		c.mu.Unlock()
		return errors.New("gateway: socket closed during handshake")
	}
	c.live = true
	focus, focusSet := c.focus, c.focusSet
	presence, presSet := c.presence, c.presSet
	c.mu.Unlock()
	if st == StateResumed {
		c.stats.resumes.Add(1)
	}
	if focusSet {
		_ = s.sendJSON(focusFrame{Op: parley.OpFocus, ChannelIDs: nonNilStrings(focus)})
	}
	if presSet {
		_ = s.sendJSON(presenceSubFrame{Op: parley.OpPresenceSub, UserIDs: nonNilStrings(presence)})
	}
	c.notify(st, nil)
	return nil
}

// onReady takes the new session (called on the socket's frame goroutine,
// before any of the session's events): s restarts at 1, and every tracked
// channel is caught up before the new session's events are handled.
func (c *Conn) onReady(s *socket, f inFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != s || c.closed {
		return
	}
	c.sessionID, c.userID, c.lastS = f.SessionID, f.UserID, 0
	c.enqueueLocked(item{kind: itemCatchUp})
}

// onInvalidSession drops the session that could not be resumed.
func (c *Conn) onInvalidSession(s *socket, f inFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != s || c.closed {
		return
	}
	c.stats.invalidSessions.Add(1)
	c.logger().Debug("gateway: invalid session", "reason", f.Reason)
	c.sessionID, c.lastS = "", 0
}

func (c *Conn) resetSession() {
	c.mu.Lock()
	c.sessionID, c.lastS = "", 0
	c.mu.Unlock()
}

// onEvent takes an event frame off socket s: it checks the session seq and
// queues the event for the handler.
func (c *Conn) onEvent(s *socket, sq int64, t string, d []byte, users []parley.User) {
	chID, seq := channelPosition(d)
	var drop *socket
	c.mu.Lock()
	if c.cur != s || c.closed {
		c.mu.Unlock()
		return
	}
	if sq != c.lastS+1 {
		c.stats.sGaps.Add(1)
		c.logger().Warn("gateway: session seq discontinuity", "want", c.lastS+1, "got", sq)
		if sq <= c.lastS {
			c.mu.Unlock()
			return // a frame this session already had
		}
	}
	c.lastS = sq
	c.enqueueLocked(item{kind: itemEvent, ev: Event{S: sq, Type: t, ChannelID: chID, Seq: seq, Data: d, Users: users}})
	if c.pending > c.opts.MaxQueue && !c.overflowed {
		c.overflowed = true
		c.logger().Warn("gateway: handler too slow, dropping the socket to resume later", "queued", c.pending)
		drop = c.detachLocked()
	}
	c.mu.Unlock()
	if drop != nil {
		drop.abort()
	}
}

// onHeartbeatTimeout drops a socket that stayed silent after a heartbeat.
func (c *Conn) onHeartbeatTimeout(s *socket) {
	c.mu.Lock()
	if c.cur != s || c.closed {
		c.mu.Unlock()
		return
	}
	c.stats.heartbeatTimeouts.Add(1)
	c.logger().Debug("gateway: heartbeat timeout")
	c.mu.Unlock()
	s.abort()
}

// onSocketClosed reacts to the end of socket s: when it was live, a
// reconnect starts; during a handshake the handshake's goroutine sees it.
func (c *Conn) onSocketClosed(s *socket) {
	err := s.endError()
	c.mu.Lock()
	if c.cur != s || c.closed {
		c.mu.Unlock()
		return
	}
	wasLive := c.live
	c.cur, c.live = nil, false
	var ce *CloseError
	if errors.As(err, &ce) && ce.Code == parley.CloseInvalidSeq {
		c.sessionID, c.lastS = "", 0
	}
	if !wasLive {
		c.mu.Unlock()
		return
	}
	if isFatal(err) {
		c.mu.Unlock()
		c.finish(err)
		return
	}
	c.startReconnectLocked(err)
	c.mu.Unlock()
	c.logger().Debug("gateway: socket dropped", "err", err)
}

// detachLocked takes the live socket out of use and starts a reconnect; it
// returns the socket for the caller to close after unlocking.
func (c *Conn) detachLocked() *socket {
	s := c.cur
	if s == nil || !c.live {
		return nil
	}
	c.cur, c.live = nil, false
	c.startReconnectLocked(errors.New("socket dropped by the client"))
	return s
}

// startReconnectLocked starts the reconnect goroutine, unless one runs.
func (c *Conn) startReconnectLocked(cause error) {
	if c.reconnect || c.closed {
		return
	}
	c.reconnect = true
	c.running++
	go c.reconnectLoop(cause)
}

func (c *Conn) reconnectLoop(cause error) {
	c.notify(StateDisconnected, cause)
	err := c.connectLoop(c.ctx, false, cause)
	c.mu.Lock()
	c.reconnect = false
	c.mu.Unlock()
	if err == nil {
		c.stats.reconnects.Add(1)
	} else if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) {
		c.finish(err)
	}
	c.exited()
}

// logger is the client's logger with the Conn's workspace (made per call:
// the Conn logs rarely, and an idle Conn should not hold a logger).
func (c *Conn) logger() *slog.Logger { return c.client.log.With("workspace", c.workspaceID) }

// notify calls OnState, if set.
func (c *Conn) notify(st State, err error) {
	if c.opts.OnState != nil {
		c.opts.OnState(st, err)
	}
}

// Close ends the Conn: it closes the socket (code 1000: the session is not
// coming back) and stops reconnecting and delivering. It returns at once; a
// handler call in progress may still finish, and Done is closed when it
// has. Close may be called from the handler.
func (c *Conn) Close() error {
	c.finish(nil)
	return nil
}

// finish ends the Conn with err (nil for Close).
func (c *Conn) finish(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.err = true, err
	s := c.cur
	c.cur, c.live = nil, false
	if c.lowWater != nil {
		close(c.lowWater)
		c.lowWater = nil
	}
	c.cancel()
	c.running++ // done waits for OnState below
	c.mu.Unlock()
	if s != nil {
		s.close(parley.CloseNormal, "bye")
	}
	if err != nil {
		c.logger().Warn("gateway: connection ended", "err", err)
	}
	c.notify(StateClosed, err)
	c.exited()
}

// exited records the end of a goroutine counted in running.
func (c *Conn) exited() {
	c.mu.Lock()
	c.running--
	if c.running == 0 && c.closed {
		close(c.done)
	}
	c.mu.Unlock()
}

// Done is closed when the Conn has ended and its goroutines have stopped.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the Conn ended: nil while it runs or after Close, else
// the error that made it give up (a *CloseError with code 4004 when the
// token was refused or revoked).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Connected reports whether a session is live on a socket now.
func (c *Conn) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// SessionID returns the current session's id ("" between sessions).
func (c *Conn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// UserID returns the user the gateway identified.
func (c *Conn) UserID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.userID
}

// Stats returns the Conn's counters.
func (c *Conn) Stats() Stats {
	return Stats{
		Reconnects:        c.stats.reconnects.Load(),
		Resumes:           c.stats.resumes.Load(),
		InvalidSessions:   c.stats.invalidSessions.Load(),
		HeartbeatTimeouts: c.stats.heartbeatTimeouts.Load(),
		CatchUps:          c.stats.catchUps.Load(),
		GapsFilled:        c.stats.gapsFilled.Load(),
		GapsUnfillable:    c.stats.gapsUnfillable.Load(),
		Summaries:         c.stats.summaries.Load(),
		DuplicatesDropped: c.stats.duplicates.Load(),
		SGaps:             c.stats.sGaps.Load(),
		Delivered:         c.stats.delivered.Load(),
	}
}

// Drop cuts the live socket as a network failure would (no close frame),
// and the Conn reconnects and resumes as after any drop. Load tests use it
// to make many sessions drop at once; it does nothing between sockets.
func (c *Conn) Drop() {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return
	}
	if ws := s.ws.Load(); ws != nil {
		_ = ws.UnderlayerConn().Close()
	}
}

// Focus tells the gateway which channels are on screen (replacing the
// previous set). The set is kept and sent again after every reconnect.
func (c *Conn) Focus(channelIDs []string) error {
	c.mu.Lock()
	c.focus, c.focusSet = slices.Clone(channelIDs), true
	s := c.liveLocked()
	c.mu.Unlock()
	if s == nil {
		return c.closedErr()
	}
	return s.sendJSON(focusFrame{Op: parley.OpFocus, ChannelIDs: nonNilStrings(channelIDs)})
}

// PresenceSub replaces the session's users in view: their presence.changed,
// user.updated and user.status events come to it (the user's own changes
// come whatever the set); the gateway answers with each newly watched
// user's current presence. The set is kept and sent again after every
// reconnect. More than parley.MaxUsersInView users is refused here with
// ErrTooManyInView, before anything is sent (the server would keep only
// the first).
func (c *Conn) PresenceSub(userIDs []string) error {
	if len(userIDs) > parley.MaxUsersInView {
		return fmt.Errorf("%w: %d users, at most %d", ErrTooManyInView, len(userIDs), parley.MaxUsersInView)
	}
	c.mu.Lock()
	c.presence, c.presSet = slices.Clone(userIDs), true
	s := c.liveLocked()
	c.mu.Unlock()
	if s == nil {
		return c.closedErr()
	}
	return s.sendJSON(presenceSubFrame{Op: parley.OpPresenceSub, UserIDs: nonNilStrings(userIDs)})
}

// Typing says the user is typing in a channel (or a thread of it). Typing is
// ephemeral: when no session is live it returns ErrNotConnected and is not
// sent later.
func (c *Conn) Typing(channelID, threadRootID string) error {
	c.mu.Lock()
	s := c.liveLocked()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if s == nil {
		return ErrNotConnected
	}
	return s.sendJSON(typingFrame{Op: parley.OpTyping, ChannelID: channelID, ThreadRootID: threadRootID})
}

func (c *Conn) liveLocked() *socket {
	if c.live {
		return c.cur
	}
	return nil
}

// closedErr is nil for a Conn that is merely between sockets.
func (c *Conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
