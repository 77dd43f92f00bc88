package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley"
)

// The raw reader: lean WebSocket sessions for measuring a server rather
// than the load generator. Package client does much per frame that a
// benchmark does not need (a delivery goroutine per burst, per-channel
// bookkeeping, reconnects); on two cores shared with the server that work
// shows up in the latency. A raw session is an nbio WebSocket whose frames
// are handled inline on the engine's poller goroutine. A Parley session
// (DialParley) identifies with its own token, checks that the session seq
// s has no gap, passes event frames on and heartbeats. It never resumes: a
// dropped socket shows up as lost deliveries. Dial gives other protocols
// (bench/peer's Centrifugo sessions) the same engine.

// RawEngine is the load generator's WebSocket engine.
type RawEngine struct {
	eng *nbhttp.Engine

	mu       sync.Mutex
	sessions []*ParleyConn // for the heartbeat loop; guarded by mu
	// heartbeatMS is the interval Parley's gateway announced in hello.
	heartbeatMS atomic.Int64
	stop        chan struct{}
	stopOnce    sync.Once
	// Deflate: sessions dialed from now on offer permessage-deflate (as
	// browsers do) and inflate compressed frames; their own frames go
	// uncompressed.
	Deflate bool
}

// NewRawEngine starts an engine with pollers poller goroutines, each
// reading at most readBuffer bytes from a socket at once.
func NewRawEngine(pollers, readBuffer int) (*RawEngine, error) {
	e := nbhttp.NewEngine(nbhttp.Config{
		Name:           "benchkit",
		NPoller:        max(pollers, 1),
		ReadBufferSize: max(readBuffer, 1<<10),
		// Run message callbacks on the poller goroutine, no task pool.
		ServerExecutor: func(f func()) { f() },
	})
	if err := e.Start(); err != nil {
		return nil, fmt.Errorf("start websocket engine: %w", err)
	}
	return &RawEngine{eng: e, stop: make(chan struct{})}, nil
}

// Close stops the heartbeats and the engine (closing every socket).
func (r *RawEngine) Close() {
	r.stopOnce.Do(func() { close(r.stop) })
	r.eng.Stop()
}

// Dial opens a WebSocket to url. onText gets every text frame, on the
// poller goroutine; onClose runs once when the socket closes.
func (r *RawEngine) Dial(ctx context.Context, url string, onText func(ws *websocket.Conn, data []byte), onClose func()) (*websocket.Conn, error) {
	u := websocket.NewUpgrader()
	u.Engine = r.eng
	u.KeepaliveTime = 0
	u.OnMessage(func(ws *websocket.Conn, mt websocket.MessageType, data []byte) {
		if mt == websocket.TextMessage {
			onText(ws, data)
		}
	})
	u.OnClose(func(*websocket.Conn, error) { onClose() })
	u.EnableCompression(r.Deflate)
	d := &websocket.Dialer{Engine: r.eng, Upgrader: u, DialTimeout: 10 * time.Second}
	wc, _, err := d.DialContext(ctx, url, http.Header{})
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	wc.EnableWriteCompression(false)
	return wc, nil
}

// ParleyConn is one raw Parley gateway session.
type ParleyConn struct {
	ws     atomic.Pointer[websocket.Conn]
	ctl    chan []byte   // handshake frames
	closed chan struct{} // closed when the socket is
	lastS  int64         // owned by the poller goroutine
	sGaps  atomic.Int64
	drops  atomic.Int64 // the socket closed before the benchmark closed it
	ending atomic.Bool  // the benchmark is closing it
}

var eventPrefix = []byte(`{"op":"` + parley.OpEvent + `","s":`)

// DialParley opens and identifies a raw session on Parley's gateway at url
// (ws://…/api/v1/gateway); onEvent gets every event frame after its s
// (`,"t":…`). It retries while the gateway's admission control asks it to.
// The session puts focus on the screen: a channel of more members than the
// server's view_min_members is delivered in full only to sessions that have
// it in focus (docs/hot-channels.md), as a client shows the channel it is
// reading.
func (r *RawEngine) DialParley(ctx context.Context, url, token, workspaceID string, onEvent func(tail []byte), focus ...string) (*ParleyConn, error) {
	for attempt := 0; ; attempt++ {
		c, retry, err := r.tryDial(ctx, url, token, workspaceID, onEvent, focus)
		if err == nil {
			return c, nil
		}
		if retry <= 0 || attempt >= 20 {
			return nil, err
		}
		if err := SleepCtx(ctx, retry); err != nil {
			return nil, err
		}
	}
}

// tryDial makes one attempt; retry > 0 when the gateway asked to come back
// later (admission control).
func (r *RawEngine) tryDial(ctx context.Context, url, token, workspaceID string, onEvent func([]byte), focus []string) (*ParleyConn, time.Duration, error) {
	c := &ParleyConn{ctl: make(chan []byte, 4), closed: make(chan struct{})}
	wc, err := r.Dial(ctx, url, func(_ *websocket.Conn, data []byte) {
		if bytes.HasPrefix(data, eventPrefix) {
			c.onEvent(data, onEvent)
			return
		}
		select {
		case c.ctl <- bytes.Clone(data):
		default:
		}
	}, func() {
		if !c.ending.Load() {
			c.drops.Add(1)
		}
		close(c.closed)
	})
	if err != nil {
		return nil, 0, err
	}
	c.ws.Store(wc)
	fail := func(err error) (*ParleyConn, time.Duration, error) {
		c.Close()
		return nil, 0, err
	}
	var hello struct {
		Op          string `json:"op"`
		HeartbeatMS int64  `json:"heartbeat_ms"`
	}
	if err := c.await(ctx, &hello, parley.OpHello); err != nil {
		return fail(err)
	}
	if hello.HeartbeatMS > 0 {
		r.heartbeatMS.Store(hello.HeartbeatMS)
	}
	ident, _ := json.Marshal(map[string]string{"op": parley.OpIdentify, "token": token, "workspace_id": workspaceID})
	if err := wc.WriteMessage(websocket.TextMessage, ident); err != nil {
		return fail(err)
	}
	var ready struct {
		Op           string `json:"op"`
		RetryAfterMS int64  `json:"retry_after_ms"`
	}
	if err := c.await(ctx, &ready, parley.OpReady, parley.OpReconnect); err != nil {
		return fail(err)
	}
	if ready.Op == parley.OpReconnect {
		c.Close()
		return nil, time.Duration(max(ready.RetryAfterMS, 1)) * time.Millisecond, errors.New("gateway asked to reconnect")
	}
	if len(focus) > 0 {
		f, _ := json.Marshal(map[string]any{"op": parley.OpFocus, "channel_ids": focus})
		if err := wc.WriteMessage(websocket.TextMessage, f); err != nil {
			return fail(err)
		}
	}
	r.mu.Lock()
	r.sessions = append(r.sessions, c)
	r.mu.Unlock()
	return c, 0, nil
}

// await waits for a control frame with one of ops and decodes it into v.
func (c *ParleyConn) await(ctx context.Context, v any, ops ...string) error {
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case b := <-c.ctl:
			var f struct {
				Op string `json:"op"`
			}
			if err := json.Unmarshal(b, &f); err != nil {
				return err
			}
			for _, op := range ops {
				if f.Op == op {
					return json.Unmarshal(b, v)
				}
			}
		case <-c.closed:
			return fmt.Errorf("socket closed while waiting for %s", strings.Join(ops, "/"))
		case <-t.C:
			return fmt.Errorf("no %s within 15 s", strings.Join(ops, "/"))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// onEvent checks the session seq and passes the frame on.
func (c *ParleyConn) onEvent(frame []byte, fn func([]byte)) {
	rest := frame[len(eventPrefix):]
	var s int64
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		s = s*10 + int64(rest[i]-'0')
	}
	if s != c.lastS+1 {
		c.sGaps.Add(1)
	}
	c.lastS = s
	fn(rest[i:])
}

// Close closes the session (not counted as a drop).
func (c *ParleyConn) Close() {
	c.ending.Store(true)
	if ws := c.ws.Load(); ws != nil {
		ws.WriteClose(1000, "bye")
		ws.Close()
	}
}

// Closed is closed once the socket is.
func (c *ParleyConn) Closed() <-chan struct{} { return c.closed }

// SGaps counts the gaps seen in the session seq s.
func (c *ParleyConn) SGaps() int64 { return c.sGaps.Load() }

// Drops counts closes the benchmark did not ask for.
func (c *ParleyConn) Drops() int64 { return c.drops.Load() }

// HeartbeatInterval is the interval the gateway announced (0 before the
// first hello).
func (r *RawEngine) HeartbeatInterval() time.Duration {
	return time.Duration(r.heartbeatMS.Load()) * time.Millisecond
}

var heartbeatFrame = []byte(`{"op":"` + parley.OpHeartbeat + `"}`)

// Heartbeats keeps every Parley session alive until Close: it beats each
// one every period, spread evenly over the period.
func (r *RawEngine) Heartbeats(period time.Duration) {
	const step = 20 * time.Millisecond
	if period < step {
		period = 27 * time.Second
	}
	t := time.NewTicker(step)
	defer t.Stop()
	next := 0
	var owed float64
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		n := len(r.sessions)
		owed += float64(n) * float64(step) / float64(period)
		for ; owed >= 1 && n > 0; owed-- {
			c := r.sessions[next%n]
			next++
			if ws := c.ws.Load(); ws != nil {
				ws.WriteMessage(websocket.TextMessage, heartbeatFrame)
			}
		}
		r.mu.Unlock()
	}
}
