package client

import (
	"bytes"
	"encoding/json"
	"testing"

	"parley"
	"parley/gateway"
	"parley/natsbus"
	"parley/querycache"
	"parley/sqlstore"
)

// withJITUsers gives a test node's gateway just-in-time users, resolved by
// a query cache over the node's own store and bus, as cmd/parley wires it.
func withJITUsers(t *testing.T) func(*gateway.Config) {
	return func(cfg *gateway.Config) {
		qc := querycache.New(querycache.Config{
			Store: cfg.Store.(*sqlstore.Store), Bus: cfg.Bus.(*natsbus.Bus), Logger: quietLogger(),
		})
		t.Cleanup(qc.Close)
		cfg.Users = qc
	}
}

// The first message of an author new to the session comes with the
// author's user object beside d. Event.Data must be d alone (valid JSON),
// and the user must reach the application in Event.Users.
func TestE2EJustInTimeUsersKeptOutOfData(t *testing.T) {
	e := newNode(t, withJITUsers(t))
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPublic)
	if _, err := bob.Client.JoinChannel(t.Context(), ch.ID); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	conn := dial(t, bob, ws, ConnectOptions{Handler: rec.handle})
	defer conn.Close()
	posted := e.mustPost(alice, ch, 2)

	evs := rec.waitFor(t, "both messages", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 2 })
	var withUsers int
	for _, ev := range evs {
		if ev.Type != parley.EventMessageCreated || ev.ChannelID != ch.ID {
			continue
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("Event.Data of s=%d is not valid JSON: %s", ev.S, ev.Data)
		}
		var d parley.MessageEventData
		if err := ev.Decode(&d); err != nil || d.Message == nil {
			t.Fatalf("decode s=%d: %v", ev.S, err)
		}
		want := e.log(ch.ID, ev.Seq-1)
		if len(want) == 0 {
			t.Fatalf("no log entry for seq %d", ev.Seq)
		}
		// The frame is the log's d less what event frames leave out when
		// false or empty (docs/protocol.md).
		wantData := bytes.Replace(compactJSON(t, want[0].Data), []byte(`,"pinned":false,"reactions":[]`), nil, 1)
		if !bytes.Equal(compactJSON(t, ev.Data), wantData) {
			t.Fatalf("Event.Data of seq %d:\n got %s\nwant %s", ev.Seq, ev.Data, wantData)
		}
		if len(ev.Users) > 0 {
			withUsers++
			if ev.Seq != posted[0].Seq || len(ev.Users) != 1 || ev.Users[0].ID != alice.ID {
				t.Errorf("seq %d carries users %+v; want alice on the first message only", ev.Seq, ev.Users)
			}
		}
	}
	if withUsers != 1 {
		t.Fatalf("%d events carried users, want 1 (alice's first message)", withUsers)
	}
}

func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("compact %s: %v", b, err)
	}
	return out.Bytes()
}
