package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley"
	"parley/affinity"
	"parley/natsbus"
	"parley/nodes"
)

func TestPublicURLFlag(t *testing.T) {
	o, err := parse(t, nil, map[string]string{"PARLEY_PUBLIC_URL": "https://chat.example.com"})
	if err != nil || o.PublicURL != "https://chat.example.com" {
		t.Fatalf("from the environment: %q %v", o.PublicURL, err)
	}
	o, err = parse(t, []string{"--public-url", "http://10.0.0.5:8080"}, map[string]string{"PARLEY_PUBLIC_URL": "https://x"})
	if err != nil || o.PublicURL != "http://10.0.0.5:8080" {
		t.Fatalf("flag over environment: %q %v", o.PublicURL, err)
	}
	for _, bad := range []string{"chat.example.com", "ws://chat.example.com", "https://", "https://u:p@host/", "https://host/?a=1", "https://host/#x"} {
		if _, err := parse(t, []string{"--public-url", bad}, nil); err == nil {
			t.Errorf("--public-url %q accepted", bad)
		}
	}
}

func TestAnnouncedURLs(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	for _, c := range []struct{ public, api, ws string }{
		{"", "http://127.0.0.1:8080/", "ws://127.0.0.1:8080/api/v1/gateway"},
		{"http://10.0.0.5:8080", "http://10.0.0.5:8080/", "ws://10.0.0.5:8080/api/v1/gateway"},
		{"https://chat.example.com/", "https://chat.example.com/", "wss://chat.example.com/api/v1/gateway"},
		{"https://example.com/parley/", "https://example.com/parley/", "wss://example.com/parley/api/v1/gateway"},
	} {
		api, ws := announcedURLs(c.public, bound)
		if api != c.api || ws != c.ws {
			t.Errorf("%q: %s %s, want %s %s", c.public, api, ws, c.api, c.ws)
		}
	}
}

// TestWSURLFor: with two gateway nodes live, each workspace gets the ws_url
// of the node the ring picks (the same pick as any other node's ring), and
// both nodes are used; this node's own is its --public-url one, or "" (the
// request's host) without it, and so it is without a ring.
func TestWSURLFor(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus, err := natsbus.Start(natsbus.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	start := func(id string) *nodes.Members {
		m, err := nodes.Start(nodes.Config{Bus: bus, Logger: quiet, Interval: 50 * time.Millisecond, Self: nodes.Node{
			ID: id, WSURL: "wss://" + id + ".example/api/v1/gateway", Roles: []string{"api", affinity.GatewayRole}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	a, b := start("a"), start("b")
	n := &node{opts: serveOptions{NodeID: "a", PublicURL: "https://a.example"}, log: quiet, members: a}
	if got := n.wsURLFor("W1"); got != a.Self().WSURL {
		t.Fatalf("without a ring: %s", got)
	}
	n.affinity = affinity.Track(a)
	defer n.affinity.Close()
	deadline := time.Now().Add(10 * time.Second)
	for n.affinity.Ring().Len() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("b never joined a's ring")
		}
		time.Sleep(5 * time.Millisecond)
	}
	other := affinity.New([]nodes.Node{b.Self(), a.Self()})
	used := map[string]int{}
	for range 200 {
		ws := parley.NewID(parley.PrefixWorkspace)
		want, _ := other.Lookup(ws)
		if got := n.wsURLFor(ws); got != want.WSURL {
			t.Fatalf("workspace %s: %s, want %s", ws, got, want.WSURL)
		}
		used[want.ID]++
	}
	if used["a"] == 0 || used["b"] == 0 {
		t.Fatalf("one node took every workspace: %v", used)
	}
	n.opts.PublicURL = ""
	for range 50 {
		ws := parley.NewID(parley.PrefixWorkspace)
		want, _ := other.Lookup(ws)
		got := n.wsURLFor(ws)
		if (want.ID == "a" && got != "") || (want.ID == "b" && got != want.WSURL) {
			t.Fatalf("without --public-url, workspace of %s: %q", want.ID, got)
		}
	}
}

// TestServePublicURLAndJIT runs the binary: boot hands out the
// --public-url's ws_url, and over the real gateway a message carries the
// users the session had not been sent (resolved through the query cache).
func TestServePublicURLAndJIT(t *testing.T) {
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "off", "--data", t.TempDir(), "--demo",
		"--public-url", "http://chat.example.test:8080")
	alice, st := readDemo(t, p)
	var boot struct {
		WSURL string `json:"ws_url"`
	}
	alice.do("POST", "/boot", map[string]string{"workspace_id": st.workspaceID}, 200, &boot)
	if boot.WSURL != "ws://chat.example.test:8080/api/v1/gateway" {
		t.Fatalf("boot ws_url %q", boot.WSURL)
	}

	var ch struct {
		ID string `json:"id"`
	}
	alice.do("POST", "/workspaces/"+st.workspaceID+"/channels", map[string]string{"name": "jit-e2e", "kind": "public"}, 201, &ch)
	alice.do("POST", "/channels/"+ch.ID+"/members", map[string]any{"user_ids": []string{st.users["erin"]}}, 200, nil)
	erin := login(t, p, "erin@demo.parley.dev")
	frames := dialGateway(t, "ws"+strings.TrimPrefix(p.url, "http")+"api/v1/gateway")
	frames.send(t, map[string]string{"op": "identify", "token": erin.token, "workspace_id": st.workspaceID})
	frames.waitOp(t, "ready")

	alice.do("POST", "/channels/"+ch.ID+"/messages", map[string]string{"text": "hi @bob"}, 201, nil)
	alice.do("POST", "/channels/"+ch.ID+"/messages", map[string]string{"text": "again"}, 201, nil)
	msgs := frames.waitEvents(t, parley.EventMessageCreated, 2)
	var ids []string
	for _, u := range msgs[0].Users {
		ids = append(ids, u.ID)
	}
	if !slices.Equal(ids, []string{st.users["alice"], st.users["bob"]}) {
		t.Fatalf("first message carries %v, want alice and bob", ids)
	}
	if len(msgs[1].Users) != 0 {
		t.Fatalf("second message carries %v", msgs[1].Users)
	}
	p.stop(t)
}

// wsFrames is a minimal gateway client for the end-to-end test.
type wsFrames struct {
	conn   *websocket.Conn
	mu     sync.Mutex
	frames []wsFrame // guarded by mu
}

type wsFrame struct {
	Op    string        `json:"op"`
	T     string        `json:"t"`
	Users []parley.User `json:"users"`
}

func dialGateway(t *testing.T, url string) *wsFrames {
	t.Helper()
	engine := nbhttp.NewEngine(nbhttp.Config{Name: "e2e-client"})
	if err := engine.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(engine.Stop)
	f := &wsFrames{}
	u := websocket.NewUpgrader()
	u.OnMessage(func(_ *websocket.Conn, _ websocket.MessageType, data []byte) {
		var fr wsFrame
		if err := json.Unmarshal(data, &fr); err != nil {
			fr.Op = "!bad: " + string(data)
		}
		f.mu.Lock()
		f.frames = append(f.frames, fr)
		f.mu.Unlock()
	})
	d := &websocket.Dialer{Engine: engine, Upgrader: u, DialTimeout: 5 * time.Second}
	conn, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	f.conn = conn
	return f
}

func (f *wsFrames) send(t *testing.T, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := f.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatal(err)
	}
}

func (f *wsFrames) wait(t *testing.T, what string, pick func([]wsFrame) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		ok := pick(f.frames)
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("timed out waiting for %s; frames %+v", what, f.frames)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *wsFrames) waitOp(t *testing.T, op string) {
	t.Helper()
	f.wait(t, op, func(fs []wsFrame) bool {
		return slices.ContainsFunc(fs, func(fr wsFrame) bool { return fr.Op == op })
	})
}

func (f *wsFrames) waitEvents(t *testing.T, typ string, n int) []wsFrame {
	t.Helper()
	var out []wsFrame
	f.wait(t, fmt.Sprintf("%d %s", n, typ), func(fs []wsFrame) bool {
		out = out[:0]
		for _, fr := range fs {
			if fr.Op == "event" && fr.T == typ {
				out = append(out, fr)
			}
		}
		return len(out) >= n
	})
	return out
}
