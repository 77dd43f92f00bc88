package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley"
)

// fakeGateway is a scripted gateway server for the client's tests: each
// accepted socket is handed to the test, which plays the server's side of
// the protocol frame by frame.
type fakeGateway struct {
	t       testing.TB
	conns   chan *fakeSock
	refuse  atomic.Int32 // refuse this many upgrades with 503
	tries   atomic.Int32 // upgrade requests seen
	mu      sync.Mutex
	times   []time.Time // when each upgrade request came; guarded by mu
	headers []http.Header
}

func newFakeGateway(tb testing.TB) *fakeGateway {
	return &fakeGateway{t: tb, conns: make(chan *fakeSock, 16)}
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.tries.Add(1)
	g.mu.Lock()
	g.times = append(g.times, time.Now())
	g.headers = append(g.headers, r.Header.Clone())
	g.mu.Unlock()
	if g.refuse.Load() > 0 {
		g.refuse.Add(-1)
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	eng, err := sharedEngine()
	if err != nil {
		g.t.Errorf("engine: %v", err)
		return
	}
	fs := &fakeSock{in: make(chan clientFrame, 256), closed: make(chan struct{}), query: r.URL.RawQuery}
	fs.autoAck.Store(true)
	u := websocket.NewUpgrader()
	u.Engine = eng
	u.KeepaliveTime = 0
	u.BlockingModAsyncWrite = false
	u.OnMessage(func(c *websocket.Conn, _ websocket.MessageType, data []byte) {
		var f clientFrame
		if err := json.Unmarshal(data, &f); err != nil {
			g.t.Errorf("fake gateway: bad frame %q: %v", data, err)
			return
		}
		f.Raw = string(data)
		if f.Op == parley.OpHeartbeat {
			fs.heartbeats.Add(1)
			if fs.autoAck.Load() {
				_ = c.WriteMessage(websocket.TextMessage, []byte(`{"op":"heartbeat_ack"}`))
				return
			}
		}
		fs.in <- f
	})
	u.SetCloseHandler(func(c *websocket.Conn, code int, reason string) {
		fs.peerClose.Store(int32(code))
		_ = c.WriteClose(code, "")
	})
	u.OnClose(func(*websocket.Conn, error) { fs.closeOnce.Do(func() { close(fs.closed) }) })
	wc, err := u.Upgrade(w, r, nil)
	if err != nil {
		g.t.Errorf("fake gateway upgrade: %v", err)
		return
	}
	fs.ws = wc
	g.conns <- fs
}

// accept waits for the next socket.
func (g *fakeGateway) accept(tb testing.TB) *fakeSock {
	tb.Helper()
	select {
	case fs := <-g.conns:
		return fs
	case <-time.After(10 * time.Second):
		tb.Fatal("fake gateway: no connection")
		return nil
	}
}

// attemptTimes returns when each upgrade request arrived.
func (g *fakeGateway) attemptTimes() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Time(nil), g.times...)
}

// clientFrame is any frame a client sends.
type clientFrame struct {
	Op           string   `json:"op"`
	Token        string   `json:"token"`
	WorkspaceID  string   `json:"workspace_id"`
	SessionID    string   `json:"session_id"`
	Seq          *int64   `json:"seq"`
	ChannelIDs   []string `json:"channel_ids"`
	UserIDs      []string `json:"user_ids"`
	ChannelID    string   `json:"channel_id"`
	ThreadRootID string   `json:"thread_root_id"`
	Raw          string   `json:"-"`
}

// fakeSock is the server's end of one client socket.
type fakeSock struct {
	ws         *websocket.Conn
	in         chan clientFrame
	closed     chan struct{}
	closeOnce  sync.Once
	autoAck    atomic.Bool
	heartbeats atomic.Int32
	peerClose  atomic.Int32 // the close code the client sent
	query      string       // the upgrade request's query
	s          int64        // the session seq of the last event sent (test goroutine only)
}

// next returns the next frame the client sent (heartbeats the fake acked
// itself are not among them).
func (fs *fakeSock) next(tb testing.TB) clientFrame {
	tb.Helper()
	select {
	case f := <-fs.in:
		return f
	case <-fs.closed:
		tb.Fatalf("fake gateway: socket closed (client close code %d) while waiting for a frame", fs.peerClose.Load())
	case <-time.After(10 * time.Second):
		tb.Fatal("fake gateway: no frame from the client")
	}
	return clientFrame{}
}

// expect returns the next frame, which must have the op.
func (fs *fakeSock) expect(tb testing.TB, op string) clientFrame {
	tb.Helper()
	f := fs.next(tb)
	if f.Op != op {
		tb.Fatalf("fake gateway: got %s, want op %s", f.Raw, op)
	}
	return f
}

func (fs *fakeSock) sendRaw(tb testing.TB, s string) {
	tb.Helper()
	if err := fs.ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		tb.Fatalf("fake gateway send: %v", err)
	}
}

func (fs *fakeSock) send(tb testing.TB, v any) {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	fs.sendRaw(tb, string(b))
}

func (fs *fakeSock) hello(tb testing.TB, heartbeatMS int) {
	tb.Helper()
	fs.send(tb, map[string]any{"op": parley.OpHello, "heartbeat_ms": heartbeatMS, "resume_window_s": 120})
}

// identify plays hello, expects identify and answers ready.
func (fs *fakeSock) identify(tb testing.TB, token, workspaceID, sessionID, userID string) {
	tb.Helper()
	fs.hello(tb, 60000)
	f := fs.expect(tb, parley.OpIdentify)
	if f.Token != token || f.WorkspaceID != workspaceID {
		tb.Fatalf("identify %s: want token %q workspace %q", f.Raw, token, workspaceID)
	}
	fs.send(tb, map[string]any{"op": parley.OpReady, "session_id": sessionID, "user_id": userID})
	fs.s = 0
}

// event sends a durable event in the server's layout with the next s.
func (fs *fakeSock) event(tb testing.TB, ev parley.Event) {
	tb.Helper()
	fs.s++
	fs.eventAt(tb, fs.s, ev.Type, ev.Data)
}

// eventAt sends an event frame with an explicit s.
func (fs *fakeSock) eventAt(tb testing.TB, s int64, t string, d json.RawMessage) {
	tb.Helper()
	fs.sendRaw(tb, `{"op":"event","s":`+strconv.FormatInt(s, 10)+`,"t":"`+t+`","d":`+string(d)+`}`)
}

// ephemeral sends an event without channel seq, with the next s.
func (fs *fakeSock) ephemeral(tb testing.TB, t string, d any) {
	tb.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		tb.Fatal(err)
	}
	fs.s++
	fs.eventAt(tb, fs.s, t, raw)
}

// drop cuts the TCP connection without a close frame.
func (fs *fakeSock) drop() { _ = fs.ws.UnderlayerConn().Close() }

// closeWith sends a close frame and closes once the client answered (or
// after a while), so that the close frame is not lost to a reset.
func (fs *fakeSock) closeWith(code int, reason string) {
	_ = fs.ws.WriteClose(code, reason)
	select {
	case <-fs.closed:
	case <-time.After(2 * time.Second):
	}
	_ = fs.ws.Close()
}

// waitClosed waits until the client has closed the socket.
func (fs *fakeSock) waitClosed(tb testing.TB) {
	tb.Helper()
	select {
	case <-fs.closed:
	case <-time.After(10 * time.Second):
		tb.Fatal("fake gateway: socket not closed")
	}
}

// connectResult is what an asynchronous Connect returned.
type connectResult struct {
	conn *Conn
	err  error
}

func (r connectResult) String() string { return fmt.Sprintf("conn=%v err=%v", r.conn != nil, r.err) }
