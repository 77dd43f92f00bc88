package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"parley"
)

func TestIdentifyReadyHeartbeat(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.HeartbeatInterval = 20 * time.Second })
	a := e.user("a")
	ws := e.workspace(a)
	c, _, err := e.dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	hello := c.next()
	if hello.Op != "hello" || hello.HeartbeatMS != 20000 {
		t.Fatalf("hello %+v", hello)
	}
	c.send(map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
	ready := c.next()
	if ready.Op != "ready" || ready.UserID != a.ID || !strings.HasPrefix(ready.SessionID, "n1.") {
		t.Fatalf("ready %+v", ready)
	}
	c.send(map[string]any{"op": "heartbeat"})
	if f := c.nextOp("heartbeat_ack"); f.Op != "heartbeat_ack" {
		t.Fatal(f)
	}
	// The session follows #general: a post arrives as an event.
	general := generalOf(t, e, a, ws)
	e.post(a, general, "hi")
	ev := c.nextOp("event")
	d := ev.data(t)
	if ev.S != 1 || ev.T != parley.EventMessageCreated || d.ChannelID != general.ID || d.Message.Text != "hi" {
		t.Fatalf("event %+v %+v", ev, d)
	}
	// A second identify on the same socket is 4005.
	c.send(map[string]any{"op": "identify", "token": a.token, "workspace_id": ws.ID})
	if code := c.closeCode(); code != parley.CloseAlreadyIdentified {
		t.Fatalf("close %d, want 4005", code)
	}
}

func generalOf(t *testing.T, e *env, u *tuser, ws *parley.Workspace) *parley.Channel {
	t.Helper()
	refs, err := e.store.SessionChannels(t.Context(), u.ID, ws.ID)
	if err != nil || len(refs) == 0 {
		t.Fatalf("channels of %s: %v %v", u.ID, refs, err)
	}
	ch, err := e.store.GetChannel(t.Context(), u.ID, refs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestCloseCodes(t *testing.T) {
	// The identify deadline is short only in its own server: with it in
	// this one, a slow token check on a loaded machine lost the race to
	// the deadline (4003 instead of 4004).
	e := newEnv(t, func(c *Config) { c.MaxFrameBytes = 1024 })
	quick := newEnv(t, func(c *Config) { c.IdentifyTimeout = 150 * time.Millisecond })
	a := e.user("a")
	ws := e.workspace(a)
	other := e.user("other") // not in ws

	cases := []struct {
		name string
		send any
		want int
	}{
		{"bad token", map[string]any{"op": "identify", "token": "nope", "workspace_id": ws.ID}, parley.CloseAuthFailed},
		{"not a member", map[string]any{"op": "identify", "token": other.token, "workspace_id": ws.ID}, parley.CloseAuthFailed},
		{"unknown op", map[string]any{"op": "dance"}, parley.CloseUnknownOp},
		{"bad json", "{nope", parley.CloseDecodeError},
		{"op before identify", map[string]any{"op": "typing", "channel_id": "C1"}, parley.CloseNotIdentified},
		{"frame too big", map[string]any{"op": "heartbeat", "pad": strings.Repeat("x", 2000)}, parley.CloseFrameTooBig},
		{"identify timeout", nil, parley.CloseNotIdentified},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := e
			if tc.send == nil {
				env = quick
			}
			c := env.connect()
			switch v := tc.send.(type) {
			case nil:
			case string:
				c.ws.WriteMessage(1, []byte(v))
			default:
				c.send(v)
			}
			if code := c.closeCode(); code != tc.want {
				t.Fatalf("close code %d, want %d", code, tc.want)
			}
		})
	}
}

func TestOriginCheck(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://" + e.srv.Listener.Addr().String(), true},
		{"https://evil.example", false},
	} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		c, resp, err := e.dial(h)
		if tc.ok {
			if err != nil {
				t.Fatalf("origin %q refused: %v", tc.origin, err)
			}
			c.ws.Close()
			continue
		}
		if err == nil {
			t.Fatalf("origin %q accepted", tc.origin)
		}
		_ = resp
		// The refusal is a plain 403 before any upgrade.
		req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/gateway", nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "MDEyMzQ1Njc4OWFiY2RlZg==")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("origin %q: status %d, want 403", tc.origin, res.StatusCode)
		}
	}

	e2 := newEnv(t, func(c *Config) { c.AllowedOrigins = []string{"https://app.example"} })
	h := http.Header{"Origin": {"https://app.example"}}
	if _, _, err := e2.dial(h); err != nil {
		t.Fatalf("allowed origin refused: %v", err)
	}
	h.Set("Origin", "http://"+e2.srv.Listener.Addr().String())
	if _, _, err := e2.dial(h); err == nil {
		t.Fatal("own host accepted though not in the allowlist")
	}
}
