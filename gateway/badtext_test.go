package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
)

// TestTypingBadThreadID: a typing op whose thread id holds NUL is dropped,
// like one for a channel the typer is not in; before, it was fanned out to
// every member as it came.
func TestTypingBadThreadID(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TypingInterval = time.Hour })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	ch := e.channel(ws, a, "team", parley.KindPrivate)
	e.addMembers(a, ch, b)
	ca, _ := e.identify(a, ws)
	cb, rb := e.identify(b, ws)
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{ch.ID}})
	e.viewing(rb.SessionID, ch.ID)
	// Typing is ephemeral: b must be following the channel before it is
	// sent, or a loaded machine loses it. A message b receives says so.
	e.post(a, ch, "sync")
	cb.waitEvents(parley.EventMessageCreated, 1)

	ca.send(map[string]any{"op": "typing", "channel_id": ch.ID, "thread_root_id": "M1\x00x"})
	// Not charged to the limiter: the next typing goes through.
	ca.send(map[string]any{"op": "typing", "channel_id": ch.ID, "thread_root_id": "M2"})
	got := cb.waitEvents(parley.EventTypingStarted, 1)
	var d struct {
		ThreadRootID string `json:"thread_root_id"`
	}
	if err := json.Unmarshal(got[0].D, &d); err != nil {
		t.Fatal(err)
	}
	if d.ThreadRootID != "M2" {
		t.Fatalf("typing thread_root_id %q, want M2", d.ThreadRootID)
	}
}

// TestIdentifyBadWorkspaceID: a workspace id no row can hold is an auth
// failure (4004) on PostgreSQL too, not an internal error (4000).
func TestIdentifyBadWorkspaceID(t *testing.T) {
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{PostgresURL: testpg.New(t), Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Store = st })
	e.store = st // the fixtures below write where the gateway reads
	t.Cleanup(func() { st.Close() })
	a := e.user("a")
	for _, id := range []string{"W\x00", "W\xff"} {
		c := e.connect()
		c.send(map[string]any{"op": "identify", "token": a.token, "workspace_id": id})
		if code := c.closeCode(); code != parley.CloseAuthFailed {
			t.Fatalf("workspace_id %q: close code %d, want %d", id, code, parley.CloseAuthFailed)
		}
	}
}
