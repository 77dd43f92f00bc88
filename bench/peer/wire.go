package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	gorilla "github.com/gorilla/websocket"

	"parley"
	"parley/bench/internal/benchkit"
	pclient "parley/client"
)

// -wire: the bytes on the wire of one delivered message, from each server,
// in one run. A message with the first -size bytes of the corpus is posted
// to Parley, and Parley's message object as its clients got it is
// published to Centrifugo; WebSocket clients (gorilla/websocket, which
// offers permessage-deflate as browsers do, or not) read the delivery,
// and a tap on their sockets gives the frame's size as it was on the wire,
// header included, and whether it was compressed.

// WireRow is one delivered frame.
type WireRow struct {
	Server     string `json:"server"`
	Session    string `json:"session"`
	Bytes      int    `json:"bytes"`
	Compressed bool   `json:"compressed"`
}

// tapConn records the bytes read from a socket.
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

// wireFrame is a server frame's size and flags.
type wireFrame struct {
	size   int
	rsv1   bool
	opcode byte
}

// dataFrames parses what was read after the HTTP answer: the data frames
// in order (a message is one frame here; control frames are skipped).
func (c *tapConn) dataFrames() []wireFrame {
	c.mu.Lock()
	b := bytes.Clone(c.got)
	c.mu.Unlock()
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		return nil
	}
	b = b[i+4:]
	var out []wireFrame
	for len(b) >= 2 {
		n, h := int(b[1]&0x7f), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return out
			}
			n, h = int(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			if len(b) < 10 {
				return out
			}
			n, h = int(binary.BigEndian.Uint64(b[2:])), 10
		}
		if len(b) < h+n {
			return out
		}
		if op := b[0] & 0x0f; op == 1 || op == 2 {
			out = append(out, wireFrame{size: h + n, rsv1: b[0]&0x40 != 0, opcode: op})
		}
		b = b[h+n:]
	}
	return out
}

// wireClient is one gorilla client and the messages it read.
type wireClient struct {
	ws   *gorilla.Conn
	tap  *tapConn
	msgs [][]byte
}

func dialWire(ctx context.Context, url string, deflate bool) (*wireClient, error) {
	c := &wireClient{}
	d := gorilla.Dialer{
		EnableCompression: deflate,
		HandshakeTimeout:  10 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c.tap = &tapConn{Conn: nc}
			return c.tap, nil
		},
	}
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.ws = ws
	return c, nil
}

// readUntil reads messages until one satisfies want and returns its index.
func (c *wireClient) readUntil(want func([]byte) bool) (int, error) {
	c.ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			return 0, err
		}
		c.msgs = append(c.msgs, b)
		if want(b) {
			return len(c.msgs) - 1, nil
		}
	}
}

// frame is the wire frame of message i.
func (c *wireClient) frame(i int) (wireFrame, error) {
	fs := c.tap.dataFrames()
	if i >= len(fs) {
		return wireFrame{}, fmt.Errorf("message %d: %d data frames on the wire", i, len(fs))
	}
	return fs[i], nil
}

func (c *wireClient) send(b []byte) error { return c.ws.WriteMessage(gorilla.TextMessage, b) }

// measureWire runs both servers one after the other and returns a row per
// delivered frame.
func measureWire(ctx context.Context, cfg Config, corpus string) ([]WireRow, error) {
	b, err := os.ReadFile(corpus)
	if err != nil {
		return nil, err
	}
	if len(b) < cfg.TextBytes {
		return nil, fmt.Errorf("%s has %d bytes, want %d", corpus, len(b), cfg.TextBytes)
	}
	text := string(b[:cfg.TextBytes])
	dir, err := os.MkdirTemp("", "parley-wire-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	hc := &http.Client{Timeout: 30 * time.Second}
	rows, object, err := wireParley(ctx, cfg, dir, text, hc)
	if err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	if cfg.Centrifugo == "" {
		return rows, nil
	}
	for _, level := range []int{1, 9} {
		cf, err := wireCentrifugo(ctx, cfg, dir, object, level, hc)
		if err != nil {
			return nil, fmt.Errorf("centrifugo: %w", err)
		}
		rows = append(rows, cf...)
	}
	return rows, nil
}

func parleyIdentify(ctx context.Context, url, token, workspaceID string, deflate bool) (*wireClient, error) {
	c, err := dialWire(ctx, url, deflate)
	if err != nil {
		return nil, err
	}
	if _, err := c.readUntil(func([]byte) bool { return true }); err != nil { // hello
		return nil, err
	}
	id, _ := json.Marshal(map[string]string{"op": parley.OpIdentify, "token": token, "workspace_id": workspaceID})
	if err := c.send(id); err != nil {
		return nil, err
	}
	if _, err := c.readUntil(func(b []byte) bool { return bytes.HasPrefix(b, []byte(`{"op":"`+parley.OpReady+`"`)) }); err != nil {
		return nil, fmt.Errorf("identify: %w", err)
	}
	return c, nil
}

// wireParley: two messages by the workspace's owner; the first carries the
// owner to the other user's sessions as a just-in-time user.
func wireParley(ctx context.Context, cfg Config, dir, text string, hc *http.Client) ([]WireRow, json.RawMessage, error) {
	seed, err := benchkit.Seed(ctx, cfg.Parley, dir, "", 1)
	if err != nil {
		return nil, nil, err
	}
	srv, err := benchkit.StartParley(ctx, cfg.Parley, dir, "")
	if err != nil {
		return nil, nil, err
	}
	defer srv.Stop()
	url := "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/api/v1/gateway"
	type sess struct {
		name    string
		token   string
		deflate bool
		c       *wireClient
	}
	sessions := []*sess{
		{name: "other user", token: seed.Users[0].Token, deflate: false},
		{name: "other user", token: seed.Users[0].Token, deflate: true},
		{name: "author", token: seed.Owner.Token, deflate: false},
		{name: "author", token: seed.Owner.Token, deflate: true},
	}
	for _, s := range sessions {
		if s.c, err = parleyIdentify(ctx, url, s.token, seed.WorkspaceID, s.deflate); err != nil {
			return nil, nil, err
		}
		defer s.c.ws.Close()
	}
	poster := pclient.New(srv.URL, pclient.WithToken(seed.Owner.Token), pclient.WithHTTPClient(hc))
	for i := range 2 {
		if _, err := poster.PostMessage(ctx, seed.Channels[0].ID,
			parley.NewMessage{Text: text, ClientMsgID: fmt.Sprintf("01JWIRE%019d", i)}); err != nil {
			return nil, nil, err
		}
	}
	isMessage := func(b []byte) bool { return bytes.Contains(b, messageCreated) }
	var rows []WireRow
	var object json.RawMessage
	for _, s := range sessions {
		for k, what := range []string{", first JIT user", ""} {
			i, err := s.c.readUntil(isMessage)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: message %d: %w", s.name, k, err)
			}
			f, err := s.c.frame(i)
			if err != nil {
				return nil, nil, err
			}
			rows = append(rows, WireRow{Server: "parley", Session: s.name + what, Bytes: f.size, Compressed: f.rsv1})
			if s.name == "other user" && !s.deflate && k == 1 {
				var fr struct {
					D struct {
						Message json.RawMessage `json:"message"`
					} `json:"d"`
				}
				if err := json.Unmarshal(s.c.msgs[i], &fr); err != nil {
					return nil, nil, err
				}
				object = fr.D.Message
			}
		}
	}
	return rows, object, nil
}

// wireCentrifugo publishes object to Centrifugo with websocket_compression
// on (at the given level; 1 is its default) to a client that negotiates
// compression and one that does not.
func wireCentrifugo(ctx context.Context, cfg Config, dir string, object json.RawMessage, level int, hc *http.Client) ([]WireRow, error) {
	cdir, err := os.MkdirTemp(dir, "centrifugo-")
	if err != nil {
		return nil, err
	}
	srv, err := startCentrifugo(ctx, cfg.Centrifugo, cdir, hc, map[string]any{
		"websocket_compression": true, "websocket_compression_level": level})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	url := "ws://" + strings.TrimPrefix(srv.url, "http://") + "/connection/websocket"
	var clients []*wireClient
	for _, deflate := range []bool{false, true} {
		c, err := dialWire(ctx, url, deflate)
		if err != nil {
			return nil, err
		}
		defer c.ws.Close()
		for id, cmd := range []string{`"connect":{}`, `"subscribe":{"channel":"` + cfChannel + `"}`} {
			if err := c.send(fmt.Appendf(nil, `{"id":%d,%s}`, id+1, cmd)); err != nil {
				return nil, err
			}
			reply := fmt.Appendf(nil, `{"id":%d,`, id+1)
			if _, err := c.readUntil(func(b []byte) bool { return bytes.Contains(b, reply) }); err != nil {
				return nil, fmt.Errorf("command %d: %w", id+1, err)
			}
		}
		clients = append(clients, c)
	}
	if err := srv.publish(ctx, object); err != nil {
		return nil, err
	}
	var rows []WireRow
	for _, c := range clients {
		i, err := c.readUntil(func(b []byte) bool { return bytes.HasPrefix(b, []byte(`{"push":`)) })
		if err != nil {
			return nil, err
		}
		f, err := c.frame(i)
		if err != nil {
			return nil, err
		}
		rows = append(rows, WireRow{Server: fmt.Sprintf("centrifugo (compression level %d)", level),
			Session: "subscriber", Bytes: f.size, Compressed: f.rsv1})
	}
	return rows, nil
}

// printWire writes the rows as a table.
func printWire(w io.Writer, cfg Config, rows []WireRow) {
	fmt.Fprintf(w, "bytes on the wire of one delivered message (%d bytes of corpus text), WebSocket header included:\n", cfg.TextBytes)
	fmt.Fprintf(w, "%-36s %-28s %6s %s\n", "server", "session", "bytes", "compressed")
	for _, r := range rows {
		fmt.Fprintf(w, "%-36s %-28s %6d %v\n", r.Server, r.Session, r.Bytes, r.Compressed)
	}
}
