package gateway

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gorilla "github.com/gorilla/websocket"

	"parley"
)

// A second WebSocket client for the compression tests: gorilla/websocket
// negotiates permessage-deflate (no context takeover) and inflates what
// it gets, as a browser does, independently of nbio. Its socket is tapped,
// so the test also sees the frames as they were on the wire.

// liveSwitch is a LiveConfigSource the test changes.
type liveSwitch struct {
	cur atomic.Pointer[parley.LiveConfig]
}

func newLiveSwitch() *liveSwitch {
	l := &liveSwitch{}
	c := parley.DefaultLiveConfig()
	l.cur.Store(&c)
	return l
}

func (l *liveSwitch) LiveConfig() parley.LiveConfig { return *l.cur.Load() }

func (l *liveSwitch) set(on bool, minBytes int) {
	c := l.LiveConfig()
	c.GatewayCompression, c.GatewayCompressionMinBytes = on, minBytes
	l.cur.Store(&c)
}

// tapConn records every byte read from the socket.
type tapConn struct {
	net.Conn
	mu  sync.Mutex
	got []byte
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.got = append(c.got, b[:n]...)
	c.mu.Unlock()
	return n, err
}

// frames parses what was read after the HTTP answer into frames.
func (c *tapConn) frames(t testing.TB) []wireFrame {
	t.Helper()
	c.mu.Lock()
	b := bytes.Clone(c.got)
	c.mu.Unlock()
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		t.Fatal("no HTTP answer on the wire")
	}
	b = b[i+4:]
	var out []wireFrame
	for len(b) > 0 {
		f, ok := parseWireFrame(b)
		if !ok {
			break // a frame still arriving
		}
		out = append(out, f)
		b = b[f.size:]
	}
	return out
}

// zclient is a gorilla client: the messages it read (inflated) and the
// frames on its wire.
type zclient struct {
	t        testing.TB
	ws       *gorilla.Conn
	tap      *tapConn
	deflate  bool // negotiated
	mu       sync.Mutex
	msgs     [][]byte
	closeErr error
	notify   chan struct{}
}

func (e *env) zdial(t testing.TB, compress bool) *zclient {
	t.Helper()
	c := &zclient{t: t, notify: make(chan struct{}, 1)}
	d := gorilla.Dialer{
		EnableCompression: compress,
		HandshakeTimeout:  5 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c.tap = &tapConn{Conn: nc}
			return c.tap, nil
		},
	}
	ws, resp, err := d.Dial(e.url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.ws = ws
	c.deflate = strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate")
	t.Cleanup(func() { ws.Close() })
	go func() {
		for {
			_, b, err := ws.ReadMessage()
			c.mu.Lock()
			if err != nil {
				c.closeErr = err
			} else {
				c.msgs = append(c.msgs, b)
			}
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// messages is what the client has read so far.
func (c *zclient) messages() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

func (c *zclient) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.ws.WriteMessage(gorilla.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// wait waits until cond holds over the messages read so far.
func (c *zclient) wait(what string, cond func(msgs [][]byte) bool) [][]byte {
	c.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		msgs, cerr := c.msgs, c.closeErr
		c.mu.Unlock()
		if cond(msgs) {
			return msgs
		}
		if cerr != nil {
			c.t.Fatalf("waiting for %s: closed: %v", what, cerr)
		}
		select {
		case <-c.notify:
		case <-deadline.C:
			c.t.Fatalf("timed out waiting for %s; %d messages", what, len(msgs))
		}
	}
}

// closeCode waits for the server's close and returns its code.
func (c *zclient) closeCode() int {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		err := c.closeErr
		c.mu.Unlock()
		var ce *gorilla.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			return 0
		}
		select {
		case <-c.notify:
		case <-time.After(waitTimeout):
		}
	}
	c.t.Fatal("no close")
	return 0
}

// opOf is a message's op and event type.
func opOf(b []byte) (op, typ string, s uint64) {
	var f struct {
		Op string `json:"op"`
		T  string `json:"t"`
		S  uint64 `json:"s"`
	}
	json.Unmarshal(b, &f)
	return f.Op, f.T, f.S
}

func countType(typ string) func([][]byte) bool { return countTypeN(typ, 1) }

func countTypeN(typ string, n int) func([][]byte) bool {
	return func(msgs [][]byte) bool {
		k := 0
		for _, m := range msgs {
			if op, t, _ := opOf(m); op == "event" && t == typ {
				k++
			}
		}
		return k >= n
	}
}

func (e *env) zidentify(t testing.TB, u *tuser, ws *parley.Workspace, compress bool) (*zclient, string) {
	t.Helper()
	c := e.zdial(t, compress)
	c.wait("hello", func(m [][]byte) bool { return len(m) >= 1 })
	c.send(map[string]any{"op": "identify", "token": u.token, "workspace_id": ws.ID})
	msgs := c.wait("ready", func(m [][]byte) bool { return len(m) >= 2 })
	var ready struct {
		Op        string `json:"op"`
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal(msgs[1], &ready); ready.Op != "ready" {
		t.Fatalf("identify answer %s", msgs[1])
	}
	return c, ready.SessionID
}

// checkSame checks that the compressed client's messages from index from
// on equal the plain client's, message for message, and that the frames
// that carried events of type typ were compressed (want) or not. It
// returns the wire sizes of those frames, compressed and plain.
func checkSame(t *testing.T, what string, z, p *zclient, fromZ, fromP int, typ string, want bool) (zs, ps []int) {
	t.Helper()
	zm, pm := z.messages()[fromZ:], p.messages()[fromP:]
	zf, pf := z.tap.frames(t)[fromZ:], p.tap.frames(t)[fromP:]
	if len(zm) != len(pm) {
		t.Fatalf("%s: %d messages compressed, %d plain", what, len(zm), len(pm))
	}
	for i := range zm {
		if op, _, _ := opOf(zm[i]); op != "event" { // ready: its own session id
			if pop, _, _ := opOf(pm[i]); pop != op {
				t.Fatalf("%s: message %d: %s against %s", what, i, zm[i], pm[i])
			}
		} else if !bytes.Equal(zm[i], pm[i]) {
			t.Fatalf("%s: message %d differs:\ncompressed client %s\nplain client      %s", what, i, zm[i], pm[i])
		}
		if pf[i].rsv1 {
			t.Fatalf("%s: the plain client got a compressed frame", what)
		}
		op, ty, _ := opOf(zm[i])
		isTyp := op == "event" && ty == typ
		if !isTyp && zf[i].rsv1 {
			t.Fatalf("%s: %s %s went out compressed: %s", what, op, ty, zm[i])
		}
		if isTyp {
			if zf[i].rsv1 != want {
				t.Fatalf("%s: %s frame compressed %v, want %v: %s", what, ty, zf[i].rsv1, want, zm[i])
			}
			zs, ps = append(zs, zf[i].size), append(ps, pf[i].size)
		}
	}
	return zs, ps
}

// TestDeflateEventFrames: over real sockets, with a client that negotiates
// permessage-deflate beside one that does not, for the same user: every
// message.created goes out compressed and inflates to exactly the plain
// client's frame — for another user's session with its first just-in-time
// user and without, for the author's own sessions (client_msg_id), for a
// resume's replay — while hello, ready, resumed and small events (typing)
// stay uncompressed; with the live key off, the next frames go out
// uncompressed on the same connection.
func TestDeflateEventFrames(t *testing.T) {
	live := newLiveSwitch()
	e, dir := jitEnv(t, func(c *Config) { c.Live = live })
	a, b := e.user("alice"), e.user("bob")
	ws := e.workspace(a, b)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)

	bz, bzID := e.zidentify(t, b, ws, true)
	bp, bpID := e.zidentify(t, b, ws, false)
	az, _ := e.zidentify(t, a, ws, true)
	ap, _ := e.zidentify(t, a, ws, false)
	if !bz.deflate || !az.deflate || bp.deflate {
		t.Fatalf("negotiated: %v %v %v", bz.deflate, az.deflate, bp.deflate)
	}
	text := corpusText(t, 200)
	post := func() {
		t.Helper()
		if _, _, err := e.store.PostMessage(t.Context(), a.ID, general.ID,
			parley.NewMessage{Text: text, ClientMsgID: rand.Text()}); err != nil {
			t.Fatal(err)
		}
	}
	post() // carries alice to bob's sessions (a just-in-time user)
	post()
	for _, c := range []*zclient{bz, bp, az, ap} {
		c.wait("2 messages", countTypeN(parley.EventMessageCreated, 2))
	}
	// Typing is small: it stays uncompressed. It goes to the channel's
	// viewers: bob's sessions have it in focus.
	bz.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	bp.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	e.viewing(bzID, general.ID)
	e.viewing(bpID, general.ID)
	ap.send(map[string]any{"op": "typing", "channel_id": general.ID})
	bz.wait("typing", countType(parley.EventTypingStarted))
	bp.wait("typing", countType(parley.EventTypingStarted))

	otherZ, otherP := checkSame(t, "bob", bz, bp, 0, 0, parley.EventMessageCreated, true)
	authorZ, authorP := checkSame(t, "alice", az, ap, 0, 0, parley.EventMessageCreated, true)
	bm, am := bz.messages(), az.messages()
	if !bytes.Contains(bm[2], []byte(`"users":[`)) || bytes.Contains(bm[3], []byte(`"users":[`)) {
		t.Fatalf("bob's first message should carry alice, the second not:\n%s\n%s", bm[2], bm[3])
	}
	if !bytes.Contains(am[3], []byte(`"client_msg_id"`)) || bytes.Contains(bm[3], []byte(`"client_msg_id"`)) {
		t.Fatalf("client_msg_id: alice %s, bob %s", am[3], bm[3])
	}
	for i, what := range []string{"first JIT user", "known author"} {
		t.Logf("other user's session, %-15s compressed %3d bytes, plain %3d", what, otherZ[i], otherP[i])
		t.Logf("author's session,     %-15s compressed %3d bytes, plain %3d", what, authorZ[i], authorP[i])
	}

	// A resume's replay is compressed as well.
	_, _, lastS := opOf(bm[len(bm)-1])
	bz.tap.Conn.Close()
	e.waitDetached(bzID)
	post()
	bp.wait("3 messages", countTypeN(parley.EventMessageCreated, 3))
	bz2 := e.zdial(t, true)
	bz2.wait("hello", func(m [][]byte) bool { return len(m) >= 1 })
	bz2.send(map[string]any{"op": "resume", "token": b.token, "session_id": bzID, "seq": lastS})
	bz2.wait("resumed", func(m [][]byte) bool { op, _, _ := opOf(m[len(m)-1]); return op == "resumed" })
	zm, pm := bz2.messages(), bp.messages()
	if _, _, s := opOf(zm[1]); s != lastS+1 || len(zm) != 3 {
		t.Fatalf("replay starts at s=%d, want %d; %d messages", s, lastS+1, len(zm))
	}
	zf := bz2.tap.frames(t)
	if !bytes.Equal(zm[1], pm[len(pm)-1]) || !zf[1].rsv1 || zf[0].rsv1 || zf[2].rsv1 {
		t.Fatalf("replay: compressed %v (hello %v, resumed %v):\n%s\nwant\n%s",
			zf[1].rsv1, zf[0].rsv1, zf[2].rsv1, zm[1], pm[len(pm)-1])
	}

	// Off: the same connection gets the next frame uncompressed.
	live.set(false, parley.DefaultGatewayCompressionMinBytes)
	post()
	zm = bz2.wait("the live message", countTypeN(parley.EventMessageCreated, 2))
	pm = bp.wait("4 messages", countTypeN(parley.EventMessageCreated, 4))
	zf = bz2.tap.frames(t)
	last := len(zm) - 1
	if zf[last].rsv1 || !bytes.Equal(zm[last], pm[len(pm)-1]) {
		t.Fatalf("with compression off: compressed %v\n%s\nwant\n%s", zf[last].rsv1, zm[last], pm[len(pm)-1])
	}
	// And a new connection does not negotiate it.
	if off := e.zdial(t, true); off.deflate {
		t.Fatal("a new connection negotiated compression while it is off")
	}
	// A partition adds its counts to the metrics after its batch is
	// written, so a client can read the frame before it is counted.
	waitUntil(t, "saved bytes counted", func() bool {
		return counterValue(t, e.reg, "parley_gateway_deflate_saved_bytes_total") > 0
	})
}

// TestDeflateThreshold: frames below gateway_compression_min_bytes go out
// uncompressed; 0 compresses every frame that gets smaller.
func TestDeflateThreshold(t *testing.T) {
	live := newLiveSwitch()
	e := newEnv(t, func(c *Config) { c.Live = live })
	a := e.user("alice")
	ws := e.workspace(a)
	general := generalOf(t, e, a, ws)
	c, _ := e.zidentify(t, a, ws, true)
	text := corpusText(t, 200)
	live.set(true, 4096)
	e.post(a, general, text)
	c.wait("1 message", countTypeN(parley.EventMessageCreated, 1))
	live.set(true, 0)
	e.post(a, general, text)
	msgs := c.wait("2 messages", countTypeN(parley.EventMessageCreated, 2))
	fs := c.tap.frames(t)
	n := len(msgs)
	if fs[n-2].rsv1 || !fs[n-1].rsv1 {
		t.Fatalf("threshold 4096: compressed %v; threshold 0: compressed %v", fs[n-2].rsv1, fs[n-1].rsv1)
	}
	// Counted after the partition's batch is written (publishDeflate):
	// the client may have read the frame first.
	waitUntil(t, "both event frames counted", func() bool {
		return counterValue(t, e.reg, "parley_gateway_event_frames_total") >= 2
	})
}

// TestDeflateClientFrames: a client may send compressed frames; they
// inflate to at most MaxFrameBytes, and a small frame that would inflate
// past it (a decompression bomb) closes the connection 1009.
func TestDeflateClientFrames(t *testing.T) {
	e := newEnv(t, nil)
	c := e.zdial(t, true)
	c.ws.EnableWriteCompression(true)
	c.wait("hello", func(m [][]byte) bool { return len(m) >= 1 })
	c.ws.WriteMessage(gorilla.TextMessage, []byte(`{"op":"heartbeat"}`+strings.Repeat(" ", 1000)))
	msgs := c.wait("heartbeat_ack", func(m [][]byte) bool { return len(m) >= 2 })
	if op, _, _ := opOf(msgs[1]); op != "heartbeat_ack" {
		t.Fatalf("answer to a compressed heartbeat: %s", msgs[1])
	}
	bomb := []byte(`{"op":"heartbeat"}` + strings.Repeat(" ", DefaultMaxFrameBytes))
	c.ws.WriteMessage(gorilla.TextMessage, bomb)
	if code := c.closeCode(); code != 1009 {
		t.Fatalf("close %d after a frame inflating to %d bytes, want 1009", code, len(bomb))
	}
}

// readRawFrame reads one server frame from a raw socket.
func readRawFrame(t *testing.T, r *rawClient) wireFrame {
	t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	h := make([]byte, 2, 10)
	if _, err := io.ReadFull(r.br, h); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	switch h[1] & 0x7f {
	case 126:
		h = h[:4]
	case 127:
		h = h[:10]
	}
	if _, err := io.ReadFull(r.br, h[2:]); err != nil {
		t.Fatal(err)
	}
	var f wireFrame
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		n = int(binary.BigEndian.Uint16(h[2:]))
	case 127:
		n = int(binary.BigEndian.Uint64(h[2:]))
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r.br, f.payload); err != nil {
		t.Fatal(err)
	}
	f.fin, f.rsv1, f.opcode, f.size = h[0]&0x80 != 0, h[0]&0x40 != 0, h[0]&0x0f, len(h)+n
	return f
}

// TestDeflateWindowLimitedOffer: a client whose offer limits the server's
// window (server_max_window_bits=10) is answered with the extension by
// nbio, but gets uncompressed event frames: the shared tails are
// compressed with a 32 KiB window it did not agree to.
func TestDeflateWindowLimitedOffer(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("alice")
	ws := e.workspace(a)
	general := generalOf(t, e, a, ws)
	conn, err := net.DialTimeout("tcp", e.srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /api/v1/gateway HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: MDEyMzQ1Njc4OWFiY2RlZg==\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=10; client_max_window_bits\r\n\r\n",
		e.srv.Listener.Addr())
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if !strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate") {
		t.Fatalf("nbio did not accept the offer (%q): the test no longer tests the fallback", resp.Header.Get("Sec-WebSocket-Extensions"))
	}
	r := &rawClient{conn: conn, br: br}
	if f := readRawFrame(t, r); !bytes.Contains(f.payload, []byte(`"hello"`)) {
		t.Fatalf("first frame %q", f.payload)
	}
	r.send(t, map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
	if f := readRawFrame(t, r); !bytes.Contains(f.payload, []byte(`"ready"`)) {
		t.Fatalf("identify answer %q", f.payload)
	}
	e.post(a, general, corpusText(t, 200))
	for {
		f := readRawFrame(t, r)
		if f.rsv1 {
			t.Fatalf("a compressed frame to a client that limited the window: % x", f.payload[:min(16, len(f.payload))])
		}
		if bytes.Contains(f.payload, []byte(`"t":"message.created"`)) {
			break
		}
	}
}

// TestDeflateClientFrameNotNegotiated: a compressed (RSV1) frame from a
// connection that did not negotiate permessage-deflate is refused: the
// socket is closed instead of the frame being inflated and answered.
func TestDeflateClientFrameNotNegotiated(t *testing.T) {
	e := newEnv(t, nil)
	r := e.rawDial(t) // offers no extension
	if f := readRawFrame(t, r); !bytes.Contains(f.payload, []byte(`"hello"`)) {
		t.Fatalf("first frame %q", f.payload)
	}
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestCompression)
	w.Write([]byte(`{"op":"heartbeat"}`))
	w.Flush()
	payload := bytes.TrimSuffix(z.Bytes(), []byte{0, 0, 0xff, 0xff})
	frame := []byte{0xC1, 0x80 | byte(len(payload)), 1, 2, 3, 4} // FIN|RSV1|text, masked
	for i, b := range payload {
		frame = append(frame, b^[]byte{1, 2, 3, 4}[i%4])
	}
	if _, err := r.conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	r.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	rest, err := io.ReadAll(r.br)
	if bytes.Contains(rest, []byte(`heartbeat_ack`)) {
		t.Fatalf("a compressed frame without the extension was answered: %q", rest)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the socket stayed open")
	}
}
