package gateway

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"golang.org/x/time/rate"

	"parley"
)

// conn is one WebSocket connection. nbio hands it one inbound message at a
// time (per connection, in order), on its handler goroutines; the session's
// partition writes events to it through the sink methods.
type conn struct {
	g  *Gateway
	ip string
	ws *websocket.Conn // set by the transport's open hook
	nb *corkConn       // likewise

	helloMu   sync.Mutex // held from the upgrade until hello is written
	helloDone atomic.Bool

	identified atomic.Bool
	sess       atomic.Pointer[session]
	lastBeat   atomic.Int64 // unix nanos of the last heartbeat (or identify)
	closing    atomic.Bool  // a close frame was sent or answered
	gone       atomic.Bool  // the socket is closed
	timer      *time.Timer  // identify timeout; set before the first message

	inbound *rate.Limiter // frames the client may send (inbound.go); nil: no limit
}

var _ sink = (*conn)(nil)

// maxCloseReason keeps a close frame's payload within the 125 bytes of a
// control frame.
const maxCloseReason = 120

// onMessage handles one client frame.
func (c *conn) onMessage(mt websocket.MessageType, data []byte) {
	// nbio would swallow a panic here unseen: count it, and close this
	// connection with a resumable code (its session keeps its state).
	defer func() {
		if v := recover(); v != nil {
			c.g.logPanic(panicConn, v, "frame_bytes", len(data))
			c.closeWith(parley.CloseUnknownError, closeInternal)
		}
	}()
	if h := c.g.frameHook.Load(); h != nil {
		(*h)(data)
	}
	if !c.helloDone.Load() {
		c.helloMu.Lock() // hello goes out before any answer
		c.helloMu.Unlock()
	}
	if c.closing.Load() || c.overRate() {
		return
	}
	if mt != websocket.TextMessage {
		c.closeWith(parley.CloseDecodeError, "frames must be text")
		return
	}
	// Heartbeats are most of what clients send: answer the canonical one
	// without decoding JSON (a decode costs tens of microseconds).
	if isHeartbeat(data) {
		c.lastBeat.Store(c.g.now().UnixNano())
		c.write(heartbeatAck)
		return
	}
	var f inFrame
	if err := json.Unmarshal(data, &f); err != nil {
		c.closeWith(parley.CloseDecodeError, "invalid JSON frame")
		return
	}
	switch f.Op {
	case parley.OpHeartbeat:
		c.lastBeat.Store(c.g.now().UnixNano())
		c.write(heartbeatAck)
	case parley.OpIdentify, parley.OpResume:
		if c.identified.Load() {
			c.closeWith(parley.CloseAlreadyIdentified, "already identified")
			return
		}
		if f.Op == parley.OpIdentify {
			c.identify(&f)
		} else {
			c.resume(&f)
		}
	case parley.OpFocus, parley.OpPresenceSub, parley.OpTyping:
		s := c.sess.Load()
		if !c.identified.Load() || s == nil {
			c.closeWith(parley.CloseNotIdentified, "identify first")
			return
		}
		switch f.Op {
		case parley.OpFocus:
			c.focus(s, &f)
		case parley.OpPresenceSub:
			c.presenceSub(s, &f)
		case parley.OpTyping:
			c.typing(s, &f)
		}
	default:
		c.closeWith(parley.CloseUnknownOp, "unknown op")
	}
}

// onClose runs once the socket is closed, whoever closed it.
func (c *conn) onClose(error) {
	if c.gone.Swap(true) {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.g.connClosed(c)
	if s := c.sess.Load(); s != nil {
		s.p.postAsync(func() {
			if s.c == sink(c) {
				s.p.detach(s)
			}
		})
	}
}

// identifyTimedOut closes a connection that has not identified in time.
func (c *conn) identifyTimedOut() {
	if !c.identified.Load() {
		c.closeWith(parley.CloseNotIdentified, "not identified in time")
	}
}

// focus records the channels on screen (audience.go): typing goes to
// them, and a public channel among them that the user is not in is
// previewed. It counts as activity.
func (c *conn) focus(s *session, f *inFrame) {
	ids := f.ChannelIDs
	if len(ids) > maxFocusChannels {
		ids = ids[:maxFocusChannels]
	}
	c.g.focus(s, ids)
	c.g.presenceActivity(s)
}

// presenceSub replaces the session's users in view: those of them it may
// see (visibility.go) get their presence, profile and status changes to
// it. Past parley.MaxUsersInView, the first are kept and the client is
// told so (presence_sub_limited), never silently.
func (c *conn) presenceSub(s *session, f *inFrame) {
	ids := f.UserIDs
	if len(ids) > parley.MaxUsersInView {
		c.g.metrics.viewLimited.Inc()
		c.writeJSON(presenceSubLimitedFrame{Op: parley.OpPresenceSubLimited, Limit: parley.MaxUsersInView, Requested: len(ids)})
		ids = ids[:parley.MaxUsersInView]
	}
	c.g.watchPresence(s, c.g.visibleUsers(s, ids))
	c.g.presenceActivity(s)
}

// watchPresence replaces the session's presence watch. The tracker reports
// each newly watched user's current status at once, then changes; they are
// queued to the session as ephemeral presence.changed events, each status
// once.
func (g *Gateway) watchPresence(s *session, ids []string) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	g.watchPresenceLocked(s, ids)
}

// watchPresenceLocked is watchPresence with s.watchMu held: watches change
// one at a time, so a refresh never puts back a set a presence_sub replaced.
func (g *Gateway) watchPresenceLocked(s *session, ids []string) {
	s.p.postAsync(func() { s.p.setInView(s, ids) })
	keep := make(map[string]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	s.mu.Lock()
	for id := range s.presenceSeen {
		if !keep[id] {
			delete(s.presenceSeen, id) // watched again later: sent again
		}
	}
	s.mu.Unlock()
	if g.presence == nil || len(ids) == 0 {
		s.setWatch(nil, nil)
		return
	}
	s.setWatch(ids, g.presence.Watch(ids, g.guardPresence(s, func(userID, status string) {
		data, _ := json.Marshal(struct {
			UserID   string `json:"user_id"`
			Presence string `json:"presence"`
		}{userID, status})
		e := &event{typ: parley.EventPresenceChanged, ephemeral: true, tail: encodeTail(parley.EventPresenceChanged, data), recv: g.now()}
		// Recorded as sent on the partition, with the enqueue that says
		// whether it was: a change dropped while the session is detached
		// must not count as what the client shows.
		s.p.postAsync(func() {
			if s.removed || !s.presenceChanged(userID, status) {
				return
			}
			if !s.p.enqueue(s, e) {
				s.presenceDropped(userID)
				// Dropped because the queue was half full (a view of many
				// new users at once): sent again once it has drained.
				s.presenceRetry = s.c != nil
			}
		})
	})))
}

// refreshPresence watches the session's users afresh after a resume if a
// change of theirs was dropped while it was away: the watch reports their
// current statuses, and those that differ from what the session was last
// sent go out. It runs on the connection's goroutine, before any
// presence_sub of the new socket.
//
// It also runs (on its own goroutine) once the queue of an attached
// session that dropped presence because it was half full has drained.
func (g *Gateway) refreshPresence(s *session) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if stale, ids := s.takePresenceStale(); stale && len(ids) > 0 {
		g.watchPresenceLocked(s, ids)
	}
}

// write sends a frame that is not an event (hello, ready, acks).
func (c *conn) write(b []byte) {
	c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *conn) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.g.log.Error("gateway encode frame", "err", err)
		return
	}
	c.write(b)
}

// Sink methods, called by the session's partition.

func (c *conn) pending() int      { return c.nb.pending() }
func (c *conn) cork(buf []byte)   { c.nb.cork(buf) }
func (c *conn) uncork() []byte    { return c.nb.uncork() }
func (c *conn) armWritable() bool { return c.nb.arm() }
func (c *conn) closed() bool      { return c.gone.Load() }

func (c *conn) text(payload []byte) bool {
	return c.ws.WriteMessage(websocket.TextMessage, payload) == nil
}

// writable is the corking writer's call once a blocked socket has drained.
func (c *conn) writable() {
	if s := c.sess.Load(); s != nil {
		s.p.postAsync(func() {
			if s.c == sink(c) {
				s.p.markDirty(s)
			}
		})
	}
}

// closeWith sends a close frame with code and closes the socket once the
// client answers, or after CloseGrace.
func (c *conn) closeWith(code int, reason string) {
	if !c.closing.CompareAndSwap(false, true) {
		return
	}
	if len(reason) > maxCloseReason {
		reason = reason[:maxCloseReason]
	}
	c.g.metrics.closes.WithLabelValues(closeLabel(code)).Inc()
	if c.timer != nil {
		c.timer.Stop()
	}
	if err := c.ws.WriteClose(code, reason); err != nil {
		c.ws.Close()
		return
	}
	ws := c.ws
	time.AfterFunc(c.g.cfg.CloseGrace, func() { ws.Close() })
}

// isHeartbeat reports whether a frame is exactly {"op":"heartbeat"}, with
// or without spaces after the colon; any other spelling takes the decoder.
func isHeartbeat(data []byte) bool {
	d := bytes.TrimSpace(data)
	return bytes.Equal(d, heartbeatFrame) || bytes.Equal(d, heartbeatFrameSpaced)
}
