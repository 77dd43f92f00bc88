package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley"
)

// socket is one WebSocket connection to the gateway. A Conn runs one socket
// at a time and replaces it after a drop. Frames arrive on the engine's
// goroutines, one at a time per socket, in order.
type socket struct {
	c  *Conn
	ws atomic.Pointer[websocket.Conn] // set once the upgrade completes

	// ctl carries the handshake's control frames (hello, ready, resumed,
	// invalid_session) to the goroutine that runs the handshake.
	ctl  chan *inFrame
	done chan struct{} // closed once the socket has closed

	lastRecv atomic.Int64 // mono() of the last frame received

	mu          sync.Mutex
	closed      bool          // guarded by mu
	closeCode   int           // from the server's close frame; guarded by mu
	closeReason string        // guarded by mu
	closeErr    error         // guarded by mu
	retryAfter  time.Duration // from a reconnect op; guarded by mu
	gotRetry    bool          // a reconnect op arrived; guarded by mu
	// retryElsewhere: that reconnect op said the node is shutting down;
	// guarded by mu.
	retryElsewhere bool
	hbEvery        time.Duration // guarded by mu
	hbTimer        *time.Timer   // guarded by mu
	hbSentAt       int64         // mono() of the last heartbeat sent (0: none yet); guarded by mu
}

// messageLimit bounds one incoming frame.
const messageLimit = 16 << 20

// epoch anchors mono.
var epoch = time.Now()

// mono is a monotonic clock reading in nanoseconds.
func mono() int64 { return int64(time.Since(epoch)) }

// dialSocket opens a WebSocket to url. Its frames are handed to c as they
// arrive, from the moment the upgrade completes.
func dialSocket(ctx context.Context, c *Conn, url string, header http.Header, timeout time.Duration) (*socket, error) {
	eng, err := sharedEngine()
	if err != nil {
		return nil, err
	}
	s := &socket{c: c, ctl: make(chan *inFrame, 4), done: make(chan struct{})}
	s.lastRecv.Store(mono())
	u := websocket.NewUpgrader()
	u.Engine = eng
	u.KeepaliveTime = 0 // liveness is the gateway heartbeat's business
	u.MessageLengthLimit = messageLimit
	u.OnMessage(func(_ *websocket.Conn, mt websocket.MessageType, data []byte) {
		if mt == websocket.TextMessage {
			s.onFrame(data)
		}
	})
	u.SetCloseHandler(func(wc *websocket.Conn, code int, reason string) {
		s.mu.Lock()
		s.closeCode, s.closeReason = code, reason
		s.mu.Unlock()
		if code == 1005 {
			_ = wc.WriteMessage(websocket.CloseMessage, nil)
		} else {
			_ = wc.WriteClose(code, "")
		}
	})
	u.OnOpen(func(wc *websocket.Conn) { s.ws.Store(wc) })
	u.OnClose(func(_ *websocket.Conn, err error) { s.onClosed(err) })
	var wc *websocket.Conn
	if c.opts.LocalAddr != "" {
		ip := net.ParseIP(c.opts.LocalAddr)
		if ip == nil {
			return nil, fmt.Errorf("dial %s: local address %q is not an IP address", url, c.opts.LocalAddr)
		}
		wc, err = dialFrom(ctx, eng, u, url, header, timeout, &net.TCPAddr{IP: ip})
	} else {
		d := &websocket.Dialer{Engine: eng, Upgrader: u, DialTimeout: timeout}
		// The library recycles the handshake response once the dial
		// returns, so a refused upgrade's status cannot be read safely: it
		// is reported as ErrUpgradeRefused, and retried like any failed
		// attempt.
		wc, _, err = d.DialContext(ctx, url, header)
	}
	if errors.Is(err, websocket.ErrBadHandshake) {
		return nil, fmt.Errorf("%w: %s", ErrUpgradeRefused, url)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	s.ws.Store(wc)
	return s, nil
}

// ErrUpgradeRefused is a gateway that answered the WebSocket upgrade with
// something other than 101 Switching Protocols.
var ErrUpgradeRefused = errors.New("gateway: upgrade refused")

// onFrame handles one text frame. The engine hands a socket's frames over
// one at a time, so the Conn sees them in order.
func (s *socket) onFrame(data []byte) {
	s.lastRecv.Store(mono())
	if sq, t, d, users, ok := parseEventFrame(data); ok {
		s.c.onEvent(s, sq, t, d, s.users(users))
		return
	}
	var f inFrame
	if err := json.Unmarshal(data, &f); err != nil {
		s.c.logger().Warn("gateway: undecodable frame", "err", err)
		return
	}
	switch f.Op {
	case parley.OpEvent:
		s.c.onEvent(s, f.S, internType([]byte(f.T)), f.D, s.users(f.Users))
	case parley.OpHeartbeatAck:
	case parley.OpReconnect:
		s.mu.Lock()
		s.gotRetry, s.retryAfter = true, time.Duration(max(f.RetryAfterMS, 0))*time.Millisecond
		s.retryElsewhere = f.Reason == "shutdown"
		s.mu.Unlock()
		s.abort()
	case parley.OpReady:
		s.c.onReady(s, f)
		s.control(f)
	case parley.OpInvalidSession:
		s.c.onInvalidSession(s, f)
		s.control(f)
	case parley.OpHello, parley.OpResumed:
		s.control(f)
	case parley.OpPresenceSubLimited:
		// PresenceSub refuses long sets, so only a set sent by another
		// version of this client gets here.
		s.c.logger().Warn("gateway: users in view cut by the server", "limit", f.Limit, "requested", f.Requested)
	default:
		// An op this client does not know: newer servers may add some.
	}
}

// users decodes the just-in-time users of an event frame. Users that do
// not decode are logged and left out: the event itself is still good.
func (s *socket) users(raw []byte) []parley.User {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var us []parley.User
	if err := json.Unmarshal(raw, &us); err != nil {
		s.c.logger().Warn("gateway: undecodable users in an event frame", "err", err)
		return nil
	}
	return us
}

// control passes a handshake frame on. A server that floods control frames
// gets the extras dropped rather than blocking the engine.
func (s *socket) control(f inFrame) {
	select {
	case s.ctl <- &f:
	default:
	}
}

// await waits for a control frame with one of the ops, the socket's end,
// ctx's end or the timeout.
func (s *socket) await(ctx context.Context, timeout time.Duration, ops ...string) (inFrame, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case f := <-s.ctl:
			for _, op := range ops {
				if f.Op == op {
					return *f, nil
				}
			}
		case <-s.done:
			return inFrame{}, s.endError()
		case <-ctx.Done():
			s.abort()
			return inFrame{}, ctx.Err()
		case <-t.C:
			s.abort()
			return inFrame{}, fmt.Errorf("gateway: no %v within %v", ops, timeout)
		}
	}
}

// send writes one frame; it never blocks on the network.
func (s *socket) send(b []byte) error {
	ws := s.ws.Load()
	if ws == nil {
		return errors.New("gateway send: socket not open")
	}
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		return fmt.Errorf("gateway send: %w", err)
	}
	return nil
}

// sendJSON encodes v and writes it.
func (s *socket) sendJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("gateway send: %w", err)
	}
	return s.send(b)
}

// startHeartbeat beats every interval, the first beat jittered over the
// second half of the interval so that sockets opened together spread out.
// A socket that has received nothing (not even an ack) for two intervals
// when a beat is due is taken for dead: the server acks every beat.
func (s *socket) startHeartbeat(ms int64) {
	if ms <= 0 {
		return
	}
	every := time.Duration(ms) * time.Millisecond
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.hbTimer != nil {
		return
	}
	s.hbEvery = every
	s.hbTimer = time.AfterFunc(every/2+rand.N(every/2+1), s.beat)
}

func (s *socket) beat() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.hbSentAt != 0 && mono()-s.lastRecv.Load() > int64(2*s.hbEvery) {
		s.mu.Unlock()
		s.c.onHeartbeatTimeout(s)
		return
	}
	s.hbSentAt = mono()
	s.hbTimer.Reset(s.hbEvery)
	s.mu.Unlock()
	_ = s.send(heartbeatFrame)
}

// close sends a close frame with code and closes the socket.
func (s *socket) close(code int, reason string) {
	ws := s.ws.Load()
	if ws == nil {
		return
	}
	_ = ws.WriteClose(code, reason)
	_ = ws.Close()
}

// abort drops a socket the client means to resume.
func (s *socket) abort() { s.close(parley.CloseClientReconnecting, "reconnecting") }

// onClosed runs once when the socket has closed, whatever closed it.
func (s *socket) onClosed(err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	var ce *websocket.CloseError
	if s.closeCode == 0 && errors.As(err, &ce) {
		s.closeCode, s.closeReason = ce.Code, ce.Reason
	}
	s.closeErr = err
	if s.hbTimer != nil {
		s.hbTimer.Stop()
	}
	s.mu.Unlock()
	close(s.done)
	s.c.onSocketClosed(s)
}

// endError describes how a closed socket ended.
func (s *socket) endError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.gotRetry:
		return &reconnectRequest{after: s.retryAfter, elsewhere: s.retryElsewhere}
	case s.closeCode != 0:
		return &CloseError{Code: s.closeCode, Reason: s.closeReason}
	case s.closeErr != nil:
		return fmt.Errorf("gateway socket closed: %w", s.closeErr)
	}
	return errors.New("gateway socket closed")
}

// CloseError is the gateway closing the socket with a close code.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("gateway closed the socket: %d %s", e.Code, e.Reason)
}

// Resumable reports whether the session may be resumed after this close.
func (e *CloseError) Resumable() bool { return parley.CloseResumable(e.Code) }

// fatal reports whether the client should give up rather than reconnect:
// the server refused its credentials, or says the client speaks the protocol
// wrongly (reconnecting would only repeat it).
func (e *CloseError) fatal() bool { return parley.CloseFatal(e.Code) }

// reconnectRequest is the server's reconnect op: come back after a while,
// to the next URL when the node is shutting down (elsewhere), else to the
// same one.
type reconnectRequest struct {
	after     time.Duration
	elsewhere bool
}

func (e *reconnectRequest) Error() string {
	return fmt.Sprintf("gateway asked to reconnect after %v", e.after)
}
