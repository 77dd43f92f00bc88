package gateway

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"testing"

	"parley"
)

// corpusText returns the first n bytes of the fixed corpus of chat-like
// sentences (ASCII, so any cut is valid UTF-8): frame sizes are measured
// with realistic text, which is what compression will see too.
func corpusText(t testing.TB, n int) string {
	t.Helper()
	b, err := os.ReadFile("testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < n {
		t.Fatalf("corpus has %d bytes, want at least %d", len(b), n)
	}
	return string(b[:n])
}

// wsFrameLen is the size of an unmasked server-to-client WebSocket frame
// with a payload of n bytes: the 2-byte header, plus the extended length.
func wsFrameLen(n int) int {
	switch {
	case n < 126:
		return 2 + n
	case n <= 0xFFFF:
		return 4 + n
	}
	return 10 + n
}

// maxMessageFrame is the budget for a delivered message.created with 200
// bytes of text (issue 20): PROTOCOL's message shape and nothing else.
const maxMessageFrame = 530

// TestMessageFrameBytes measures message.created as sessions receive it,
// over the real store and sockets, for 200 bytes of corpus text posted with
// a client_msg_id the way clients post: for another user's session with and
// without a just-in-time user, and for the author's own session. The
// figures are in docs/benchmarks.md ("Bytes on the wire"); run with -v to
// print them.
func TestMessageFrameBytes(t *testing.T) {
	e, dir := jitEnv(t, nil)
	a, b := e.user("alice"), e.user("bob")
	ws := e.workspace(a, b)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	ca, _ := e.identify(a, ws)
	cb, _ := e.identify(b, ws)

	text := corpusText(t, 200)
	for range 2 { // the first carries alice to both sessions; the second is the common case
		if _, _, err := e.store.PostMessage(t.Context(), a.ID, general.ID,
			parley.NewMessage{Text: text, ClientMsgID: rand.Text()}); err != nil {
			t.Fatal(err)
		}
	}
	messageFrames(t, ca, 2)
	messageFrames(t, cb, 2)
	other, author := cb.rawEvents(parley.EventMessageCreated), ca.rawEvents(parley.EventMessageCreated)

	sizes := []struct {
		what string
		raw  []byte
	}{
		{"other user's session", other[1]},
		{"other user's session, first JIT user", other[0]},
		{"author's session", author[1]},
		{"author's session, first JIT user", author[0]},
	}
	for _, s := range sizes {
		t.Logf("%-40s %4d bytes on the wire (payload %d)", s.what, wsFrameLen(len(s.raw)), len(s.raw))
	}
	if n := wsFrameLen(len(other[1])); n > maxMessageFrame {
		t.Fatalf("message.created for 200 bytes of text is %d bytes, want <= %d: %s", n, maxMessageFrame, other[1])
	}
}

// TestMessageFrameShape: a delivered message carries PROTOCOL's message
// shape; workspace_id is never on it, and client_msg_id goes only to the
// author's sessions (which match their pending copy by it), on
// message.created and message.updated alike.
func TestMessageFrameShape(t *testing.T) {
	e, dir := jitEnv(t, nil)
	a, b := e.user("alice"), e.user("bob")
	ws := e.workspace(a, b)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	ca, _ := e.identify(a, ws)
	ca2, _ := e.identify(a, ws)
	cb, _ := e.identify(b, ws)

	m, _, err := e.store.PostMessage(t.Context(), a.ID, general.ID, parley.NewMessage{Text: `say "hi" <b>`, ClientMsgID: "c<1>"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.EditMessage(t.Context(), a.ID, m.ID, "edited"); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{parley.EventMessageCreated, parley.EventMessageUpdated} {
		for _, c := range []struct {
			name  string
			cl    *client
			owned bool
		}{{"alice", ca, true}, {"alice's second session", ca2, true}, {"bob", cb, false}} {
			c.cl.waitEvents(typ, 1)
			raw := c.cl.rawEvents(typ)[0]
			var f struct {
				D struct {
					ChannelID string          `json:"channel_id"`
					Seq       int64           `json:"seq"`
					Message   json.RawMessage `json:"message"`
				} `json:"d"`
			}
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatalf("%s %s: %v: %s", c.name, typ, err, raw)
			}
			var msg map[string]json.RawMessage
			if err := json.Unmarshal(f.D.Message, &msg); err != nil {
				t.Fatalf("%s %s: message: %v", c.name, typ, err)
			}
			if f.D.ChannelID != general.ID || f.D.Seq == 0 {
				t.Fatalf("%s %s: d without channel_id and seq: %s", c.name, typ, raw)
			}
			for _, k := range []string{"id", "channel_id", "seq", "user_id", "text", "created_at", "reply_count"} {
				if _, ok := msg[k]; !ok {
					t.Fatalf("%s %s: message without %s: %s", c.name, typ, k, raw)
				}
			}
			for _, k := range []string{"workspace_id", "pinned", "reactions", "edited_at", "thread_root_id"} {
				if _, ok := msg[k]; ok && (k == "workspace_id" || typ == parley.EventMessageCreated) {
					t.Fatalf("%s %s: message carries %s: %s", c.name, typ, k, raw)
				}
			}
			cmid, ok := msg["client_msg_id"]
			if c.owned && (!ok || string(cmid) != `"c\u003c1\u003e"`) {
				t.Fatalf("%s %s: author's session without its client_msg_id: %s", c.name, typ, raw)
			}
			if !c.owned && ok {
				t.Fatalf("%s %s: client_msg_id sent to another user: %s", c.name, typ, raw)
			}
		}
	}
}
