package gateway

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley"
)

// Fuzzing the gateway's inbound side: conn.onMessage decodes a client frame
// and dispatches its op (identify, resume, heartbeat, focus, presence_sub,
// typing). The frame is handed to onMessage directly, on a connection whose
// websocket layer writes into an in-memory pipe, because nbio recovers
// panics in its handlers and a panic over a real socket would go unseen.
// Everything behind the connection is real: the gateway, SQLite, NATS.

// fuzzNode is the gateway the fuzz targets talk to, with one user (two
// workspaces' worth of state) whose token identifies.
type fuzzNode struct {
	e     *env
	u     *tuser
	ws    *parley.Workspace
	other *tuser
	ips   atomic.Int64
}

func newFuzzNode(f *testing.F) *fuzzNode {
	e := newEnv(f, func(c *Config) {
		c.ResumeWindow = time.Second // fuzzed sessions do not pile up
		c.CloseGrace = 10 * time.Millisecond
	})
	u, other := e.user("fuzz"), e.user("other")
	ws := e.workspace(u, other)
	e.channel(ws, u, "fuzzing", parley.KindPublic)
	return &fuzzNode{e: e, u: u, ws: ws, other: other}
}

// serverFrame is a frame the gateway wrote: its opcode and payload.
type serverFrame struct {
	op      byte
	payload []byte
}

// pipeConn is a gateway connection over net.Pipe, with a reader that
// collects what the gateway writes.
type pipeConn struct {
	c      *conn
	client net.Conn
	done   chan struct{}
	mu     sync.Mutex
	frames []serverFrame // guarded by mu
}

func (n *fuzzNode) conn(t *testing.T) *pipeConn {
	server, client := net.Pipe()
	g := n.e.gw
	c := &conn{g: g, ip: fmt.Sprintf("fuzz-%d", n.ips.Add(1))}
	c.ws = websocket.NewServerConn(g.tr.upgrader, server, "", false, false)
	c.timer = time.AfterFunc(time.Hour, func() {})
	c.helloDone.Store(true)
	g.connsMu.Lock()
	g.conns[c] = struct{}{}
	g.connsMu.Unlock()
	g.metrics.connections.Inc()
	pc := &pipeConn{c: c, client: client, done: make(chan struct{})}
	go pc.read()
	t.Cleanup(pc.close)
	return pc
}

// read parses the server's (unmasked) frames until the pipe closes.
func (pc *pipeConn) read() {
	defer close(pc.done)
	br := bufio.NewReader(pc.client)
	for {
		var hdr [2]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := uint64(hdr[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(br, b[:]); err != nil {
				return
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return
		}
		pc.mu.Lock()
		pc.frames = append(pc.frames, serverFrame{op: hdr[0] & 0x0f, payload: payload})
		pc.mu.Unlock()
	}
}

// close ends the connection as the socket's close would, and waits for
// the reader.
func (pc *pipeConn) close() {
	pc.c.ws.Conn.Close()
	pc.c.onClose(nil)
	<-pc.done
}

// written returns what the gateway wrote so far: text frames, and the
// close code (0: none).
func (pc *pipeConn) written() (texts []string, closeCode int) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, f := range pc.frames {
		switch f.op {
		case 0x1:
			texts = append(texts, string(f.payload))
		case 0x8:
			if len(f.payload) >= 2 {
				closeCode = int(binary.BigEndian.Uint16(f.payload))
			}
		}
	}
	return texts, closeCode
}

// send hands a text frame to the gateway as nbio would, and waits until
// the frames it wrote for it have been read off the pipe.
func (pc *pipeConn) send(t *testing.T, data []byte) {
	pc.c.onMessage(websocket.TextMessage, data)
	// A write to a pipe returns once the reader has taken it; the reader
	// then records it. A heartbeat ack that follows orders the records.
	if pc.c.closing.Load() {
		return
	}
	pc.c.write(heartbeatAck)
	deadline := time.Now().Add(waitTimeout)
	for {
		texts, _ := pc.written()
		if len(texts) > 0 && texts[len(texts)-1] == string(heartbeatAck) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's writes did not arrive: %q", texts)
		}
		time.Sleep(time.Millisecond)
	}
}

// protocolCloses are the codes a client's frame may earn. 4000 (internal
// error) is the server's own failure and never the answer to bad input.
var protocolCloses = []int{parley.CloseUnknownOp, parley.CloseDecodeError, parley.CloseNotIdentified, parley.CloseAuthFailed,
	parley.CloseAlreadyIdentified, parley.CloseInvalidSeq, parley.CloseRateLimited, parley.CloseFrameTooBig}

// checkAnswer holds the gateway's answer to one frame to the protocol.
func checkAnswer(t *testing.T, pc *pipeConn, data []byte, identified bool) {
	t.Helper()
	// closeWith writes the close frame before it returns; the reader may
	// still be recording it.
	var texts []string
	var code int
	deadline := time.Now().Add(waitTimeout)
	for {
		texts, code = pc.written()
		if code != 0 || !pc.c.closing.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closing, but no close frame arrived")
		}
		time.Sleep(time.Millisecond)
	}
	for _, s := range texts {
		if !json.Valid([]byte(s)) {
			t.Fatalf("the gateway wrote invalid JSON %q", s)
		}
	}
	if code != 0 && !slices.Contains(protocolCloses, code) {
		t.Fatalf("frame %q: close %d, not a protocol close code", data, code)
	}
	var f inFrame
	switch {
	case isHeartbeat(data):
		if code != 0 {
			t.Fatalf("heartbeat %q: close %d", data, code)
		}
	case json.Unmarshal(data, &f) != nil:
		if code != parley.CloseDecodeError {
			t.Fatalf("undecodable frame %q: close %d, want %d", data, code, parley.CloseDecodeError)
		}
	case !slices.Contains([]string{parley.OpIdentify, parley.OpResume, parley.OpHeartbeat, parley.OpFocus, parley.OpPresenceSub, parley.OpTyping}, f.Op):
		if code != parley.CloseUnknownOp {
			t.Fatalf("frame %q: close %d, want %d (unknown op)", data, code, parley.CloseUnknownOp)
		}
	case !identified && (f.Op == parley.OpFocus || f.Op == parley.OpPresenceSub || f.Op == parley.OpTyping):
		if code != parley.CloseNotIdentified {
			t.Fatalf("frame %q before identify: close %d, want %d", data, code, parley.CloseNotIdentified)
		}
	case identified && (f.Op == parley.OpIdentify || f.Op == parley.OpResume):
		if code != parley.CloseAlreadyIdentified {
			t.Fatalf("frame %q after identify: close %d, want %d", data, code, parley.CloseAlreadyIdentified)
		}
	}
}

// fuzzSeeds are realistic and hostile frames; testdata/fuzz holds more.
func fuzzSeeds(n *fuzzNode) [][]byte {
	big := bytes.Repeat([]byte(`"u",`), 3000)
	return [][]byte{
		[]byte(`{"op":"heartbeat"}`),
		[]byte(`{"op": "heartbeat", "seq": 3}`),
		fmt.Appendf(nil, `{"op":"identify","token":%q,"workspace_id":%q}`, n.u.token, n.ws.ID),
		[]byte(`{"op":"identify","token":"nope","workspace_id":"W1"}`),
		[]byte(`{"op":"resume","token":"nope","session_id":"n1.abc","seq":0}`),
		fmt.Appendf(nil, `{"op":"resume","token":%q,"session_id":"n9.*>","seq":18446744073709551615}`, n.u.token),
		[]byte(`{"op":"focus","channel_ids":["C1","C2"]}`),
		fmt.Appendf(nil, `{"op":"presence_sub","user_ids":[%q]}`, n.other.ID),
		[]byte(`{"op":"typing","channel_id":"C1","thread_root_id":"M1"}`),
		append(append([]byte(`{"op":"presence_sub","user_ids":[`), big...), `"x"]}`...),
		[]byte("{\"op\":\"typing\",\"channel_id\":\"C\x00\"}"),
		[]byte("{\"op\":\"focus\",\"channel_ids\":[\"\xff\xfe\"]}"),
		[]byte(`{"op":"nope"}`),
		[]byte(`{"op":null}`),
		[]byte(`[1,2,3]`),
		[]byte(`not json`),
		[]byte(``),
	}
}

// FuzzClientFrame: any frame, on a fresh connection or one that has
// identified, is answered within the protocol: decoding errors 4002,
// unknown ops 4001, ops before identify 4003, a second identify 4005, and
// never a panic, an internal-error close or invalid JSON.
func FuzzClientFrame(f *testing.F) {
	n := newFuzzNode(f)
	for _, s := range fuzzSeeds(n) {
		f.Add(false, s)
		f.Add(true, s)
	}
	identify := fmt.Appendf(nil, `{"op":"identify","token":%q,"workspace_id":%q}`, n.u.token, n.ws.ID)
	f.Fuzz(func(t *testing.T, identified bool, data []byte) {
		pc := n.conn(t)
		if identified {
			pc.send(t, identify)
			if texts, code := pc.written(); code != 0 || len(texts) == 0 || !bytes.Contains([]byte(texts[0]), []byte(`"ready"`)) {
				t.Fatalf("identify: %q, close %d", texts, code)
			}
		}
		pc.send(t, data)
		checkAnswer(t, pc, data, identified)
	})
}

// FuzzClientFrames: a sequence of frames on one connection (split on
// newlines), as a client could send them, never panics or earns an
// internal-error close.
func FuzzClientFrames(f *testing.F) {
	n := newFuzzNode(f)
	seeds := fuzzSeeds(n)
	f.Add(bytes.Join(seeds[:4], []byte("\n")))
	f.Add(bytes.Join([][]byte{seeds[2], seeds[6], seeds[7], seeds[8], seeds[0]}, []byte("\n")))
	f.Add(bytes.Join([][]byte{seeds[2], seeds[9], seeds[10], seeds[11]}, []byte("\n")))
	f.Fuzz(func(t *testing.T, script []byte) {
		pc := n.conn(t)
		for _, frame := range bytes.Split(script, []byte("\n")) {
			if pc.c.closing.Load() {
				break
			}
			pc.send(t, frame)
		}
		_, code := pc.written()
		if code == parley.CloseUnknownError {
			t.Fatalf("script %q: internal-error close", script)
		}
	})
}
