package gateway

import (
	"parley"

	"net/http"
	"testing"

	"parley/internal/edge"
)

// TestIdentifyRateKeyNotClientChosen: behind a trusted proxy that adds its
// own X-Forwarded-For line, the identify limit keys on the address the
// proxy wrote, the same one the HTTP API keys on; a client that sends a
// fresh X-Forwarded-For line of its own with every connection must not get
// a fresh bucket each time.
func TestIdentifyRateKeyNotClientChosen(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.IdentifyRatePerIP = Rate{PerMinute: 1, Burst: 1}
		c.TrustedProxies = edge.MustProxies("127.0.0.1", "::1")
	})
	b := e.user("b")
	ws := e.workspace(b)
	dial := func(chosen string) *client {
		h := http.Header{}
		h.Add("X-Forwarded-For", chosen)        // written by the client
		h.Add("X-Forwarded-For", "203.0.113.7") // appended by the proxy
		c, _, err := e.dial(h)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		if f := c.next(); f.Op != "hello" {
			t.Fatalf("first frame %+v, want hello", f)
		}
		c.send(map[string]any{"op": "identify", "token": b.token, "workspace_id": ws.ID})
		return c
	}
	if f := dial("198.51.100.1").next(); f.Op != "ready" {
		t.Fatalf("first identify: %+v", f)
	}
	c := dial("198.51.100.2")
	if code := c.closeCode(); code != parley.CloseRateLimited {
		t.Fatalf("second identify from the same client with another X-Forwarded-For: close %d, want 4008", code)
	}
}
