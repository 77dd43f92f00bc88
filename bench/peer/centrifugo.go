package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley/bench/internal/benchkit"
)

// The peer: Centrifugo with a minimal configuration — anonymous
// connections over its JSON protocol on WebSocket, one channel namespace
// clients may subscribe to, no history, no presence, and its HTTP API
// behind a key for publishing.

const (
	cfNamespace = "bench"
	cfChannel   = cfNamespace + ":room"
	cfAPIKey    = "parley-bench-api-key"
)

// centrifugoConfig is the configuration file's content, with extra's keys
// added (the -wire mode's websocket_compression).
func centrifugoConfig(extra map[string]any) []byte {
	cfg := map[string]any{
		"api_key":                               cfAPIKey,
		"allow_anonymous_connect_without_token": true,
		"health":                                true,
		"namespaces": []map[string]any{{
			"name":                          cfNamespace,
			"allow_subscribe_for_anonymous": true,
			"allow_subscribe_for_client":    true,
		}},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return b
}

// centrifugo is a running Centrifugo process.
type centrifugo struct {
	*benchkit.Proc
	url string // http://127.0.0.1:port
	hc  *http.Client
}

// startCentrifugo writes the configuration (with extra's keys) into dir and
// runs bin on a free loopback port, waiting for its health endpoint.
func startCentrifugo(ctx context.Context, bin, dir string, hc *http.Client, extra map[string]any) (*centrifugo, error) {
	conf := filepath.Join(dir, "centrifugo.json")
	if err := os.WriteFile(conf, centrifugoConfig(extra), 0o600); err != nil {
		return nil, err
	}
	addr, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(bin, "--config", conf, "--address", host, "--port", port, "--log_level", "error")
	cmd.Dir = dir
	cmd.Env = benchkit.CleanEnv("CENTRIFUGO_")
	p, err := benchkit.StartProc(ctx, cmd, 10*time.Second, nil)
	if err != nil {
		return nil, fmt.Errorf("centrifugo: %w", err)
	}
	c := &centrifugo{Proc: p, url: "http://" + addr, hc: hc}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := hc.Get(c.url + "/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-p.Exited():
			return nil, fmt.Errorf("centrifugo exited:\n%s", p.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("centrifugo not healthy within 30 s: %v\n%s", err, p.Stderr)
		}
		if err := benchkit.SleepCtx(ctx, 50*time.Millisecond); err != nil {
			p.Kill()
			return nil, err
		}
	}
}

// publish sends data (Parley's message object) to the benchmark channel
// through the HTTP API.
func (c *centrifugo) publish(ctx context.Context, data json.RawMessage) error {
	body, _ := json.Marshal(map[string]any{"channel": cfChannel, "data": data})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/api/publish", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", cfAPIKey)
	res, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("publish: %s: %s", res.Status, b)
	}
	var out struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("publish reply %q: %w", b, err)
	}
	if out.Error != nil {
		return fmt.Errorf("publish: error %d %s", out.Error.Code, out.Error.Message)
	}
	return nil
}

// cfConn is one Centrifugo client connection subscribed to the channel.
type cfConn struct {
	ws      atomic.Pointer[websocket.Conn]
	ctl     chan []byte // replies to commands
	closed  chan struct{}
	dropped atomic.Int64 // closes the benchmark did not ask for
	ending  atomic.Bool
}

// cfFrame is what one line of a Centrifugo frame is.
type cfFrame int

const (
	cfPing  cfFrame = iota // "{}": answer with "{}"
	cfPush                 // an asynchronous push (a publication)
	cfReply                // the reply to a command
)

// classify tells a line of the JSON protocol apart without decoding it.
func classify(line []byte) cfFrame {
	switch {
	case bytes.Equal(line, []byte("{}")):
		return cfPing
	case bytes.HasPrefix(line, []byte(`{"push":`)):
		return cfPush
	default:
		return cfReply
	}
}

var pong = []byte("{}")

// dialCentrifugo connects and subscribes one client; onPush gets every
// push line (publications carry the stamp in their data).
func dialCentrifugo(ctx context.Context, eng *benchkit.RawEngine, wsURL string, onPush func([]byte)) (*cfConn, error) {
	c := &cfConn{ctl: make(chan []byte, 4), closed: make(chan struct{})}
	ws, err := eng.Dial(ctx, wsURL, func(ws *websocket.Conn, data []byte) {
		// One frame may carry several newline-separated replies and pushes.
		for len(data) > 0 {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			switch classify(line) {
			case cfPing:
				ws.WriteMessage(websocket.TextMessage, pong)
			case cfPush:
				onPush(line)
			default:
				select {
				case c.ctl <- bytes.Clone(line):
				default:
				}
			}
		}
	}, func() {
		if !c.ending.Load() {
			c.dropped.Add(1)
		}
		close(c.closed)
	})
	if err != nil {
		return nil, err
	}
	c.ws.Store(ws)
	fail := func(err error) (*cfConn, error) {
		c.close()
		return nil, err
	}
	if err := c.command(ctx, 1, `"connect":{"name":"parley-bench"}`); err != nil {
		return fail(err)
	}
	if err := c.command(ctx, 2, `"subscribe":{"channel":"`+cfChannel+`"}`); err != nil {
		return fail(err)
	}
	return c, nil
}

// command sends a command and waits for its reply.
func (c *cfConn) command(ctx context.Context, id int, body string) error {
	ws := c.ws.Load()
	if err := ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"id":%d,%s}`, id, body)); err != nil {
		return err
	}
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case b := <-c.ctl:
			var r struct {
				ID    int `json:"id"`
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("reply %q: %w", b, err)
			}
			if r.ID != id {
				continue
			}
			if r.Error != nil {
				return fmt.Errorf("command %d: error %d %s", id, r.Error.Code, r.Error.Message)
			}
			return nil
		case <-c.closed:
			return fmt.Errorf("socket closed while waiting for the reply to command %d", id)
		case <-t.C:
			return fmt.Errorf("no reply to command %d within 15 s", id)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *cfConn) close() {
	c.ending.Store(true)
	if ws := c.ws.Load(); ws != nil {
		ws.WriteClose(1000, "bye")
		ws.Close()
	}
}
