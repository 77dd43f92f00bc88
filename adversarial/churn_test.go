package adversarial

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"parley"
	"parley/client"
)

// recorder keeps the events one Conn hands its application.
type recorder struct {
	mu     sync.Mutex
	events []client.Event // guarded by mu
}

func (r *recorder) handle(ev client.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// messages returns the seqs and texts of ch's message.created events.
func (r *recorder) messages(ch string) (seqs []int64, texts []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.ChannelID == ch && ev.Type == parley.EventMessageCreated {
			seqs = append(seqs, ev.Seq)
			texts = append(texts, string(ev.Data))
		}
	}
	return seqs, texts
}

// session is one live Conn of a user, with what it received.
type session struct {
	who  string
	conn *client.Conn
	rec  *recorder
}

func (n *node) connect(t *testing.T, u *user, who string, ws *parley.Workspace) *session {
	t.Helper()
	rec := &recorder{}
	conn, err := n.clientFor(t, u).Connect(t.Context(), ws.ID, client.ConnectOptions{Handler: rec.handle})
	if err != nil {
		t.Fatalf("connect %s: %v", who, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &session{who: who, conn: conn, rec: rec}
}

// TestSessionChurn runs users with several sessions each through leaving,
// rejoining, being removed and re-added while messages flow, on both
// stores. The node must stay up with no panic; the members who never left
// receive every message live, in seq order, with no gap; and every session
// of the churned users, members again at the end, receives the messages
// posted after the churn.
func TestSessionChurn(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			testSessionChurn(t, newNode(t, d))
		})
	}
}

func testSessionChurn(t *testing.T, n *node) {
	ctx := context.Background()
	fx := n.mustFixture(t)
	leaver, removed := n.mustUser(t, "leaver"), n.mustUser(t, "removed")
	inv, err := n.store.CreateInvite(ctx, fx.owner.ID, fx.ws.ID, parley.InviteParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []*user{leaver, removed} {
		if _, err := n.store.AcceptInvite(ctx, u.ID, inv.Code); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.store.AddMembers(ctx, fx.owner.ID, fx.ch.ID, []string{leaver.ID, removed.ID}); err != nil {
		t.Fatal(err)
	}
	start := n.lastSeq(t, fx)

	const perUser = 3
	var stayers, churned []*session
	for i := range 2 {
		stayers = append(stayers, n.connect(t, fx.owner, fmt.Sprint("owner#", i), fx.ws))
		stayers = append(stayers, n.connect(t, fx.member, fmt.Sprint("member#", i), fx.ws))
	}
	for i := range perUser {
		churned = append(churned, n.connect(t, leaver, fmt.Sprint("leaver#", i), fx.ws))
		churned = append(churned, n.connect(t, removed, fmt.Sprint("removed#", i), fx.ws))
	}

	poster := n.clientFor(t, fx.owner)
	const rounds, posts = 8, 60
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range posts {
			if _, err := poster.PostMessage(ctx, fx.ch.ID, parley.NewMessage{Text: fmt.Sprint("flow ", i)}); err != nil {
				t.Errorf("post %d: %v", i, err)
				return
			}
		}
	})
	wg.Go(func() {
		lc, oc := n.clientFor(t, leaver), n.clientFor(t, fx.owner)
		for i := range rounds {
			if err := lc.LeaveChannel(ctx, fx.ch.ID); err != nil {
				t.Errorf("round %d: leave: %v", i, err)
				return
			}
			if err := oc.RemoveMember(ctx, fx.ch.ID, removed.ID); err != nil {
				t.Errorf("round %d: remove: %v", i, err)
				return
			}
			if _, err := lc.JoinChannel(ctx, fx.ch.ID); err != nil {
				t.Errorf("round %d: join: %v", i, err)
				return
			}
			if _, err := oc.AddMembers(ctx, fx.ch.ID, []string{removed.ID}); err != nil {
				t.Errorf("round %d: add: %v", i, err)
				return
			}
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	// The tail: posted once everyone is a member again.
	for i := range 5 {
		if _, err := poster.PostMessage(ctx, fx.ch.ID, parley.NewMessage{Text: fmt.Sprint("tail ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var want []int64
	for _, ev := range n.events(t, fx, start) {
		if ev.Type == parley.EventMessageCreated {
			want = append(want, ev.Seq)
		}
	}
	if len(want) != posts+5 {
		t.Fatalf("the log holds %d messages, want %d", len(want), posts+5)
	}
	for _, s := range stayers {
		waitFor(t, s.who+" receiving every message", func() bool {
			got, _ := s.rec.messages(fx.ch.ID)
			return len(got) >= len(want)
		})
		if got, _ := s.rec.messages(fx.ch.ID); !slices.Equal(got, want) {
			t.Errorf("%s received seqs %v, want %v", s.who, got, want)
		}
		if st := s.conn.Stats(); st.SGaps != 0 || st.GapsFilled != 0 || st.Reconnects != 0 || !s.conn.Connected() {
			t.Errorf("%s: the gateway did not deliver everything live: connected %v, stats %+v", s.who, s.conn.Connected(), st)
		}
	}
	tail := want[len(want)-5:]
	for _, s := range churned {
		waitFor(t, s.who+" receiving the tail", func() bool {
			got, _ := s.rec.messages(fx.ch.ID)
			return len(got) > 0 && got[len(got)-1] >= tail[len(tail)-1]
		})
		got, _ := s.rec.messages(fx.ch.ID)
		if !slices.Equal(got[len(got)-5:], tail) || !slices.IsSorted(got) {
			t.Errorf("%s received seqs %v, want them sorted and ending with %v", s.who, got, tail)
		}
	}
	if rep := n.send(t, "GET", "/me", fx.owner.Token, nil); rep.status != 200 {
		t.Errorf("node after the churn: GET /me %d", rep.status)
	}
	n.checkNoPanics(t)
}

// events returns the fixture channel's log after seq.
func (n *node) events(t *testing.T, fx *fixture, after int64) []parley.Event {
	t.Helper()
	var out []parley.Event
	for {
		page, err := n.store.ListEvents(context.Background(), fx.owner.ID, fx.ch.ID, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 {
			return out
		}
		out = append(out, page.Events...)
		after = page.Events[len(page.Events)-1].Seq
	}
}

func (n *node) lastSeq(t *testing.T, fx *fixture) int64 {
	t.Helper()
	evs := n.events(t, fx, 0)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}
