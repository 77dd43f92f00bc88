package gateway

import (
	"parley"

	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"
)

// trySend writes a frame and ignores a failed write: the server may have
// closed the socket in the middle of a flood.
func (c *client) trySend(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.ws.WriteMessage(websocket.TextMessage, b)
}

// TestInboundFloodClosed: a connection that sends frames faster than its
// bucket allows, whatever the op, is told reconnect{rate_limited} and
// closed 4008; the session stays resumable.
func TestInboundFloodClosed(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.InboundRate = Rate{PerMinute: 60, Burst: 10} })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	floods := []struct {
		name     string
		identify bool
		frame    any
	}{
		{"heartbeat before identify", false, map[string]any{"op": "heartbeat"}},
		{"heartbeat", true, map[string]any{"op": "heartbeat"}},
		{"heartbeat decoded", true, map[string]any{"op": "heartbeat", "x": 1}},
		{"presence_sub", true, map[string]any{"op": "presence_sub", "user_ids": []string{b.ID}}},
		{"focus", true, map[string]any{"op": "focus", "channel_ids": []string{general.ID}}},
		{"typing", true, map[string]any{"op": "typing", "channel_id": general.ID}},
	}
	for i, fl := range floods {
		t.Run(fl.name, func(t *testing.T) {
			var c *client
			var ready frame
			if fl.identify {
				c, ready = e.identify(a, ws)
			} else {
				c = e.connect()
			}
			for range 50 {
				c.trySend(fl.frame)
			}
			if f := c.nextOp("reconnect"); f.Reason != "rate_limited" || f.RetryAfterMS < 5000 || f.RetryAfterMS >= 10000 {
				t.Fatalf("answer to a flood %+v, want reconnect rate_limited after 5-10 s", f)
			}
			if code := c.closeCode(); code != parley.CloseRateLimited {
				t.Fatalf("close %d, want 4008", code)
			}
			if n := counterValue(t, e.reg, "parley_gateway_inbound_rate_closes_total"); n != float64(i+1) {
				t.Fatalf("inbound_rate_closes_total %v, want %d", n, i+1)
			}
			if fl.identify {
				c2 := e.connect()
				c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 0})
				if f := c2.nextOp("resumed"); f.Op != "resumed" {
					t.Fatalf("resume after the flood close: %+v", f)
				}
				c2.ws.Close()
			}
		})
	}
}

// TestInboundRealisticClientNotClosed: at the default limits, a client
// far busier than a real one (ten heartbeats a heartbeat interval, and ten
// view changes a second, each a focus, a presence_sub and a typing) for
// three seconds is never closed.
func TestInboundRealisticClientNotClosed(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.HeartbeatInterval = time.Second })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	c, _ := e.identify(a, ws)
	beat := time.NewTicker(100 * time.Millisecond)
	defer beat.Stop()
	view := time.NewTicker(100 * time.Millisecond)
	defer view.Stop()
	end := time.After(3 * time.Second)
	sent, beats := 0, 1 // the last one after the loop
	for done := false; !done; {
		select {
		case <-beat.C:
			c.trySend(map[string]any{"op": "heartbeat"})
			sent++
			beats++
		case <-view.C:
			c.trySend(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
			c.trySend(map[string]any{"op": "presence_sub", "user_ids": []string{b.ID}})
			c.trySend(map[string]any{"op": "typing", "channel_id": general.ID})
			sent += 3
		case <-end:
			done = true
		}
	}
	c.trySend(map[string]any{"op": "heartbeat"})
	c.waitFor("every heartbeat answered", func() bool {
		n := 0
		for _, f := range c.frames {
			if f.Op == "heartbeat_ack" {
				n++
			}
		}
		return n == beats || c.closed
	})
	if c.isClosed() {
		t.Fatalf("closed after %d frames: %d", sent, c.closeCode())
	}
	if n := counterValue(t, e.reg, "parley_gateway_inbound_rate_closes_total"); n != 0 {
		t.Fatalf("inbound_rate_closes_total %v", n)
	}
}

// TestInboundBounds: the lists of presence_sub and focus are cut to their
// bounds (the rest of a list is never looked at), and a typing op with an overlong id is dropped before it reaches
// the throttle or the store.
func TestInboundBounds(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("a")
	ws := e.workspace(a)
	c, ready := e.identify(a, ws)
	// Short ids, so that 600 of them fit in one 16 KiB frame.
	ids := make([]string, 600)
	for i := range ids {
		ids[i] = fmt.Sprintf("C%d", i)
	}
	c.send(map[string]any{"op": "focus", "channel_ids": ids})
	strangers := make([]string, 600)
	for i := range strangers {
		strangers[i] = fmt.Sprintf("U%d", i)
	}
	c.send(map[string]any{"op": "presence_sub", "user_ids": strangers})
	c.send(map[string]any{"op": "typing", "channel_id": strings.Repeat("C", 10_000)})
	c.send(map[string]any{"op": "heartbeat"})
	c.nextOp("heartbeat_ack")
	s := e.gw.registry.get(ready.SessionID)
	s.mu.Lock()
	focus := len(s.focus)
	s.mu.Unlock()
	if focus != maxFocusChannels {
		t.Fatalf("focus keeps %d ids, want %d", focus, maxFocusChannels)
	}
	if n := counterValue(t, e.reg, "parley_gateway_presence_hidden_total"); n != parley.MaxUsersInView {
		t.Fatalf("presence_sub checked %v ids, want the first %d", n, parley.MaxUsersInView)
	}
	e.gw.typing.mu.Lock()
	keys := len(e.gw.typing.last)
	e.gw.typing.mu.Unlock()
	if keys != 0 || counterValue(t, e.reg, "parley_gateway_typing_dropped_total") != 1 {
		t.Fatalf("an overlong typing id reached the throttle (%d keys)", keys)
	}
}
