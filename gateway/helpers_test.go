package gateway

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/auth"
	"parley/natsbus"
	"parley/sqlstore"
	"parley/storetest"
)

// quietLogger keeps expected warnings out of test output; set
// PARLEY_TEST_LOG=1 to see them.
var quietLogger = func() *slog.Logger {
	if os.Getenv("PARLEY_TEST_LOG") != "" {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}()

// env is a real node for a test: SQLite store, embedded NATS, a gateway
// behind an httptest server.
type env struct {
	t     testing.TB
	store *sqlstore.Store
	bus   *natsbus.Bus
	gw    *Gateway
	srv   *httptest.Server
	url   string
	reg   *prometheus.Registry
}

func newEnv(t testing.TB, mutate func(*Config)) *env {
	t.Helper()
	return newEnvWith(t, mutate, nil)
}

// newEnvWith also lets the test adjust the HTTP server before it starts.
func newEnvWith(t testing.TB, mutate func(*Config), server func(*http.Server)) *env {
	t.Helper()
	return newEnvOn(t, sqlstore.Config{Path: filepath.Join(t.TempDir(), "parley.db")}, mutate, server)
}

// newEnvOn is newEnvWith on the store sc names (its Publisher and Logger
// are set here).
func newEnvOn(t testing.TB, sc sqlstore.Config, mutate func(*Config), server func(*http.Server)) *env {
	t.Helper()
	e := &env{t: t, reg: prometheus.NewRegistry()}
	var err error
	e.bus, err = natsbus.Start(natsbus.Config{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	sc.Publisher, sc.Logger = e.bus, quietLogger
	e.store, err = sqlstore.Open(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	// The first node subscribes through muxes; nodes added with e.node use
	// Bus.Subscribe, so that both ways are tested.
	cfg := Config{Store: e.store, Bus: e.bus, NodeID: "n1", Registerer: e.reg, Partitions: 2, Logger: quietLogger}
	if mutate != nil {
		mutate(&cfg)
	}
	e.gw, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewUnstartedServer(e.gw)
	if server != nil {
		server(e.srv.Config)
	}
	e.srv.Start()
	e.url = "ws://" + e.srv.Listener.Addr().String() + "/api/v1/gateway"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.gw.Shutdown(ctx)
		e.srv.Close()
		e.store.Close()
		e.bus.Close()
	})
	return e
}

// node starts another gateway (another node) on the same store and bus. It
// subscribes topic by topic (the first node uses muxes), so that both ways
// are tested.
func (e *env) node(nodeID string) *env {
	e.t.Helper()
	return e.nodeWith(nodeID, nil)
}

// tuser is a user with a login token.
type tuser struct {
	*parley.User
	token string
	hash  string
}

func (e *env) user(name string) *tuser {
	e.t.Helper()
	u := storetest.MustUser(e.t, e.store, name)
	return e.login(u)
}

func (e *env) login(u *parley.User) *tuser {
	e.t.Helper()
	token, hash, err := auth.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.CreateSession(context.Background(), parley.Session{
		TokenHash: hash, UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		e.t.Fatal(err)
	}
	return &tuser{User: u, token: token, hash: hash}
}

func (e *env) post(u *tuser, ch *parley.Channel, text string) *parley.Message {
	e.t.Helper()
	return storetest.MustPost(e.t, e.store, u.User, ch, text)
}

// frame is any server frame.
type frame struct {
	Op           string          `json:"op"`
	S            uint64          `json:"s"`
	T            string          `json:"t"`
	D            json.RawMessage `json:"d"`
	SessionID    string          `json:"session_id"`
	UserID       string          `json:"user_id"`
	Replayed     uint64          `json:"replayed"`
	Reason       string          `json:"reason"`
	RetryAfterMS int64           `json:"retry_after_ms"`
	HeartbeatMS  int64           `json:"heartbeat_ms"`
	Limit        int             `json:"limit"`
	Requested    int             `json:"requested"`
}

// eventData is the part of an event's d the tests look at.
type eventData struct {
	ChannelID string `json:"channel_id"`
	Seq       int64  `json:"seq"`
	UserID    string `json:"user_id"`
	Message   *struct {
		Text string `json:"text"`
	} `json:"message"`
}

func (f frame) data(t testing.TB) eventData {
	var d eventData
	if err := json.Unmarshal(f.D, &d); err != nil {
		t.Fatalf("event data %s: %v", f.D, err)
	}
	return d
}

var (
	clientEngineOnce sync.Once
	clientEngine     *nbhttp.Engine
)

func testClientEngine(t testing.TB) *nbhttp.Engine {
	clientEngineOnce.Do(func() {
		clientEngine = nbhttp.NewEngine(nbhttp.Config{Name: "test-client", ReleaseWebsocketPayload: true})
		if err := clientEngine.Start(); err != nil {
			panic(err)
		}
	})
	return clientEngine
}

// client is a test WebSocket client: it records every frame and the close.
type client struct {
	t  testing.TB
	ws *websocket.Conn

	mu        sync.Mutex
	frames    []frame     // guarded by mu
	at        []time.Time // when each frame arrived; guarded by mu
	read      int         // frames consumed by next; guarded by mu
	closeErr  error       // guarded by mu
	closed    bool        // guarded by mu
	notify    chan struct{}
	rawFrames [][]byte // guarded by mu
}

const waitTimeout = 10 * time.Second

func (e *env) dial(header http.Header) (*client, *http.Response, error) {
	c := &client{t: e.t, notify: make(chan struct{}, 1)}
	u := websocket.NewUpgrader()
	u.OnMessage(func(_ *websocket.Conn, _ websocket.MessageType, data []byte) {
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			f = frame{Op: "!bad json: " + string(data)}
		}
		c.mu.Lock()
		c.frames = append(c.frames, f)
		c.at = append(c.at, time.Now())
		c.rawFrames = append(c.rawFrames, append([]byte(nil), data...))
		c.mu.Unlock()
		c.poke()
	})
	u.OnClose(func(_ *websocket.Conn, err error) {
		c.mu.Lock()
		c.closed, c.closeErr = true, err
		c.mu.Unlock()
		c.poke()
	})
	d := &websocket.Dialer{Engine: testClientEngine(e.t), Upgrader: u, DialTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(e.url, header)
	if err != nil {
		return nil, resp, err
	}
	c.ws = ws
	e.t.Cleanup(func() { ws.Close() })
	return c, resp, nil
}

func (e *env) connect() *client {
	e.t.Helper()
	c, _, err := e.dial(nil)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	if f := c.next(); f.Op != "hello" {
		e.t.Fatalf("first frame %+v, want hello", f)
	}
	return c
}

// identify connects and identifies u in ws, returning the ready frame.
func (e *env) identify(u *tuser, ws *parley.Workspace) (*client, frame) {
	e.t.Helper()
	c := e.connect()
	c.send(map[string]any{"op": "identify", "token": u.token, "workspace_id": ws.ID})
	f := c.next()
	if f.Op != "ready" || f.SessionID == "" || f.UserID != u.ID {
		e.t.Fatalf("identify answer %+v, want ready", f)
	}
	return c, f
}

func (c *client) poke() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// waitFor polls until cond (run under the client's lock) holds.
func (c *client) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.notify:
		case <-deadline.C:
			c.mu.Lock()
			defer c.mu.Unlock()
			c.t.Fatalf("timed out waiting for %s; frames %s, closed %v (%v)", what, summary(c.frames), c.closed, c.closeErr)
		}
	}
}

// next returns the next frame not yet returned.
func (c *client) next() frame {
	c.t.Helper()
	c.waitFor("a frame", func() bool { return c.read < len(c.frames) })
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read++
	return c.frames[c.read-1]
}

// nextOp skips frames until one with op.
func (c *client) nextOp(op string) frame {
	c.t.Helper()
	for {
		if f := c.next(); f.Op == op {
			return f
		}
	}
}

// events returns the event frames received so far.
func (c *client) events() []frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []frame
	for _, f := range c.frames {
		if f.Op == "event" {
			out = append(out, f)
		}
	}
	return out
}

// waitEvents waits until n event frames of type typ have arrived and
// returns them.
func (c *client) waitEvents(typ string, n int) []frame {
	c.t.Helper()
	count := func() []frame {
		var out []frame
		for _, f := range c.frames {
			if f.Op == "event" && f.T == typ {
				out = append(out, f)
			}
		}
		return out
	}
	c.waitFor(fmt.Sprintf("%d %s events", n, typ), func() bool { return len(count()) >= n })
	c.mu.Lock()
	defer c.mu.Unlock()
	return count()
}

// closeCode waits for the connection to close and returns the code the
// server sent (0: closed without a close frame).
func (c *client) closeCode() int {
	c.t.Helper()
	c.waitFor("close", func() bool { return c.closed })
	c.mu.Lock()
	defer c.mu.Unlock()
	var ce *websocket.CloseError
	if errors.As(c.closeErr, &ce) {
		return ce.Code
	}
	return 0
}

func (c *client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// drop cuts the TCP connection without a close frame.
func (c *client) drop() {
	c.ws.Conn.Close()
	c.waitFor("dropped", func() bool { return c.closed })
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawClient speaks just enough WebSocket over a plain TCP socket to
// identify and then never read: a slow consumer. Its receive buffer is
// kept small.
type rawClient struct {
	conn net.Conn
	br   *bufio.Reader
}

func (e *env) rawDial(t testing.TB) *rawClient {
	t.Helper()
	// The slow client comes from its own loopback address, so that the
	// server can tell its socket apart (smallSendBuffer).
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(slowClientIP)}}
	conn, err := d.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	fmt.Fprintf(conn, "GET /api/v1/gateway HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", e.srv.Listener.Addr(), key)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("raw upgrade: %v %v", resp, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{conn: conn, br: br}
}

// send writes one masked text frame.
func (r *rawClient) send(t testing.TB, v any) {
	t.Helper()
	payload, _ := json.Marshal(v)
	var hdr []byte
	if len(payload) < 126 {
		hdr = []byte{0x81, 0x80 | byte(len(payload))}
	} else {
		hdr = []byte{0x81, 0x80 | 126, 0, 0}
		binary.BigEndian.PutUint16(hdr[2:], uint16(len(payload)))
	}
	mask := []byte{1, 2, 3, 4}
	masked := make([]byte, len(payload))
	for i := range payload {
		masked[i] = payload[i] ^ mask[i%4]
	}
	if _, err := r.conn.Write(append(append(hdr, mask...), masked...)); err != nil {
		t.Fatal(err)
	}
}

// mustMember adds users to a channel.
func (e *env) addMembers(actor *tuser, ch *parley.Channel, users ...*tuser) {
	e.t.Helper()
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	if _, err := e.store.AddMembers(context.Background(), actor.ID, ch.ID, ids); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) workspace(owner *tuser, members ...*tuser) *parley.Workspace {
	e.t.Helper()
	ws := storetest.MustWorkspace(e.t, e.store, owner.User)
	for _, m := range members {
		storetest.MustJoinWorkspace(e.t, e.store, ws, owner.User, m.User)
	}
	return ws
}

func (e *env) workspaceJoin(ws *parley.Workspace, inviter, u *tuser) {
	e.t.Helper()
	storetest.MustJoinWorkspace(e.t, e.store, ws, inviter.User, u.User)
}

func (e *env) channel(ws *parley.Workspace, creator *tuser, name string, kind parley.ChannelKind) *parley.Channel {
	e.t.Helper()
	return storetest.MustChannel(e.t, e.store, ws, creator.User, name, kind)
}

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }

// counterValue sums the samples of a metric family.
func counterValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// slowClientIP is the source address of raw (slow) test clients.
const slowClientIP = "127.0.0.2"

// smallSendBuffer keeps the server side of raw clients' sockets' kernel
// send buffer small, so that a client that stops reading backs up quickly.
func smallSendBuffer(srv *http.Server) {
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if tc, ok := c.(*net.TCPConn); ok {
			if a, ok := tc.RemoteAddr().(*net.TCPAddr); ok && a.IP.String() == slowClientIP {
				tc.SetWriteBuffer(8192)
			}
		}
		return ctx
	}
}

// summary lists frames briefly for failure messages: the count, then the
// first and last few.
func summary(fs []frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d]", len(fs))
	for i, f := range fs {
		if i >= 10 && i < len(fs)-10 {
			continue
		}
		fmt.Fprintf(&b, " %s", f.Op)
		if f.Op == "event" {
			fmt.Fprintf(&b, "(s=%d %s)", f.S, f.T)
		}
		if f.Reason != "" {
			fmt.Fprintf(&b, "(%s)", f.Reason)
		}
	}
	return b.String()
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// muxlessBus is the real bus with its NewMux hidden: a gateway given it
// subscribes topic by topic, and still hands sessions over.
type muxlessBus struct {
	parley.EventBus
	parley.Requester
}

// onSession runs fn with the session on its partition goroutine and waits
// for it; false if the node has no such session.
func (e *env) onSession(id string, fn func(p *partition, s *session)) bool {
	e.t.Helper()
	s := e.gw.registry.get(id)
	if s == nil {
		return false
	}
	done := make(chan struct{})
	s.p.postAsync(func() {
		defer close(done)
		fn(s.p, s)
	})
	select {
	case <-done:
	case <-time.After(waitTimeout):
		e.t.Fatalf("session %s: its partition did not answer", id)
	}
	return true
}

// viewing waits until the session has the channels in focus (focus is
// applied on the session's partition after the frame is read).
func (e *env) viewing(sessionID string, channelIDs ...string) {
	e.t.Helper()
	waitUntil(e.t, "focus applied", func() bool {
		all := false
		e.onSession(sessionID, func(_ *partition, s *session) {
			all = true
			for _, id := range channelIDs {
				all = all && s.viewing[id]
			}
		})
		return all
	})
}
