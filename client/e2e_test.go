package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/gateway"
	"parley/httpapi"
	"parley/natsbus"
	"parley/sqlstore"
)

// End to end: the client against the real gateway, API, store and bus of
// one node.

// newNode starts a node: SQLite store publishing to an embedded NATS bus,
// the API and the gateway behind one HTTP server.
func newNode(t *testing.T, mutate func(*gateway.Config)) *env {
	t.Helper()
	bus, err := natsbus.Start(natsbus.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{
		Path: filepath.Join(t.TempDir(), "parley.db"), Publisher: bus, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{Store: st, Bus: bus, NodeID: "n1", Logger: quietLogger(), Partitions: 2}
	if mutate != nil {
		mutate(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Store: st, Directory: st.Directory(), Logger: quietLogger(), Rates: parley.LiveRatesOff(), Integrations: st})
	e := &env{t: t, store: st}
	mux := http.NewServeMux()
	mux.Handle("/", api.Handler())
	mux.Handle("/api/v1/gateway", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.gwRemotes = append(e.gwRemotes, r.RemoteAddr)
		e.mu.Unlock()
		gw.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	e.srv = srv
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
		srv.Close()
		st.Close()
		bus.Close()
	})
	return e
}

// dial connects u's client to the node's gateway.
func dial(t *testing.T, u *account, ws *parley.Workspace, opts ConnectOptions) *Conn {
	t.Helper()
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 20 * time.Millisecond
	}
	r := waitConnect(t, connectAsync(t.Context(), u.Client, ws.ID, opts))
	if r.err != nil {
		t.Fatalf("connect: %v", r.err)
	}
	return r.conn
}

// dropSocket cuts the Conn's socket as a network failure would: no close
// frame.
func (c *Conn) dropSocket() { c.Drop() }

// holdDials makes the Conn's next dials wait until the returned release is
// called.
func (c *Conn) holdDials() (release func()) {
	gate := make(chan struct{})
	c.mu.Lock()
	c.beforeDial = func() { <-gate }
	c.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// messageSeqs lists the seqs of ch's message.created events among evs.
func messageSeqs(evs []Event, ch string) []int64 {
	var out []int64
	for _, e := range evs {
		if e.ChannelID == ch && e.Type == parley.EventMessageCreated {
			out = append(out, e.Seq)
		}
	}
	return out
}

// checkInOrder fails unless ch's durable events among evs are exactly the
// channel's log from after onwards, in order.
func checkInOrder(t *testing.T, e *env, evs []Event, ch string, after int64) {
	t.Helper()
	var want []int64
	for _, ev := range e.log(ch, after) {
		want = append(want, ev.Seq)
	}
	if got := seqs(evs, ch); !slices.Equal(got, want) {
		t.Fatalf("channel seqs %v, want %v", got, want)
	}
}

func TestE2EOrderedDeliveryConcurrentPosters(t *testing.T) {
	e := newNode(t, nil)
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPublic)
	if _, err := bob.Client.JoinChannel(t.Context(), ch.ID); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	conn := dial(t, bob, ws, ConnectOptions{Handler: rec.handle})
	start := e.log(ch.ID, 0)
	const posters, each = 8, 20
	var wg sync.WaitGroup
	for p := range posters {
		wg.Go(func() {
			for i := range each {
				if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: fmt.Sprintf("%d-%d", p, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	evs := rec.waitFor(t, "every message", func(evs []Event) bool {
		return len(messageSeqs(evs, ch.ID)) == posters*each
	})
	checkInOrder(t, e, evs, ch.ID, start[len(start)-1].Seq)
	for _, ev := range evs {
		if ev.ChannelID == ch.ID && !ev.Ordered {
			t.Fatalf("%s#%d of a tracked channel is not marked Ordered", ev.Type, ev.Seq)
		}
	}
	if st := conn.Stats(); st.SGaps != 0 || st.DuplicatesDropped != 0 || st.GapsFilled != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestE2EResumeAfterDrop(t *testing.T) {
	e := newNode(t, nil)
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	if _, err := alice.Client.AddMembers(t.Context(), ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	after := e.log(ch.ID, 0)
	rec := newRecorder()
	conn := dial(t, bob, ws, ConnectOptions{Handler: rec.handle})
	for i := range 5 {
		if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: fmt.Sprint("before ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	rec.waitFor(t, "5 messages", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 5 })
	session := conn.SessionID()

	release := conn.holdDials()
	conn.dropSocket()
	waitUntil(t, "disconnected", func() bool { return !conn.Connected() })
	for i := range 20 { // missed while away
		if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: fmt.Sprint("missed ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	evs := rec.waitFor(t, "25 messages", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 25 })
	checkInOrder(t, e, evs, ch.ID, after[len(after)-1].Seq)
	waitUntil(t, "resumed", func() bool { return conn.Stats().Resumes == 1 })
	st := conn.Stats()
	if conn.SessionID() != session || st.InvalidSessions != 0 || st.SGaps != 0 || st.Reconnects != 1 {
		t.Errorf("session %q (was %q), stats %+v", conn.SessionID(), session, st)
	}
	for _, ev := range evs {
		if ev.Source != SourceGateway {
			t.Errorf("event %s#%d from %s: the replay should have it", ev.Type, ev.Seq, ev.Source)
		}
	}
}

func TestE2EBeyondReplayCatchesUpWithSync(t *testing.T) {
	e := newNode(t, func(c *gateway.Config) { c.SendQueue, c.ReplayMax = 4, 4 })
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	if _, err := alice.Client.AddMembers(t.Context(), ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	after := e.log(ch.ID, 0)
	rec := newRecorder()
	conn := dial(t, bob, ws, ConnectOptions{Handler: rec.handle})
	if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "first"}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "first message", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 1 })
	release := conn.holdDials()
	conn.dropSocket()
	waitUntil(t, "disconnected", func() bool { return !conn.Connected() })
	for i := range 30 { // far more than the replay buffer holds
		if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: fmt.Sprint("missed ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	evs := rec.waitFor(t, "31 messages", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 31 })
	checkInOrder(t, e, evs, ch.ID, after[len(after)-1].Seq)
	st := conn.Stats()
	if st.InvalidSessions != 1 || st.SGaps != 0 {
		t.Errorf("stats %+v", st)
	}
	var caught int
	for _, ev := range evs {
		if ev.Source == SourceCatchUp {
			caught++
		}
	}
	if caught == 0 {
		t.Errorf("nothing came from /sync: %s", describe(evs))
	}
}

func TestE2ELogoutClosesSocket(t *testing.T) {
	e := newNode(t, nil)
	alice := e.mustAccount("alice")
	ws := e.mustWorkspace(alice)
	conn := dial(t, alice, ws, ConnectOptions{Handler: func(Event) {}})
	if err := alice.Client.Logout(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("socket still open after logout")
	}
	var ce *CloseError
	if !errors.As(conn.Err(), &ce) || ce.Code != parley.CloseAuthFailed {
		t.Fatalf("err %v", conn.Err())
	}
}

func TestE2ETypingAndMembership(t *testing.T) {
	e := newNode(t, func(c *gateway.Config) { c.TypingInterval = 10 * time.Millisecond })
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate) // seq 1, before anyone connects
	arec, brec := newRecorder(), newRecorder()
	aconn := dial(t, alice, ws, ConnectOptions{Handler: arec.handle})
	bconn := dial(t, bob, ws, ConnectOptions{Handler: brec.handle})

	// Bob is added while connected: his session starts following the
	// channel and tracks it from his own member.joined.
	if _, err := alice.Client.AddMembers(t.Context(), ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	brec.waitFor(t, "bob joined", func(evs []Event) bool {
		return slices.ContainsFunc(evs, func(ev Event) bool { return ev.Type == parley.EventMemberJoined && ev.ChannelID == ch.ID })
	})
	// Typing goes to the channel's viewers: bob has it on screen. It is
	// ephemeral and throttled: keep typing until bob sees it.
	if err := bconn.Focus([]string{ch.ID}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "typing", func() bool {
		if err := aconn.Typing(ch.ID, ""); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(brec.snapshot(), func(ev Event) bool {
			return ev.Type == parley.EventTypingStarted && ev.ChannelID == ch.ID && !ev.Durable()
		})
	})
	if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "hi bob"}); err != nil {
		t.Fatal(err)
	}
	brec.waitFor(t, "message", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 1 })
	// Removed: the channel stops being tracked, and later posts do not come.
	if err := alice.Client.RemoveMember(t.Context(), ch.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	brec.waitFor(t, "bob left", func(evs []Event) bool {
		return slices.ContainsFunc(evs, func(ev Event) bool { return ev.Type == parley.EventMemberLeft && ev.ChannelID == ch.ID })
	})
	waitUntil(t, "untracked", func() bool { _, ok := bconn.Positions()[ch.ID]; return !ok })
	if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "secret"}); err != nil {
		t.Fatal(err)
	}
	arec.waitFor(t, "alice sees her posts", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 2 })
	if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "marker"}); err != nil {
		t.Fatal(err)
	}
	arec.waitFor(t, "marker", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 3 })
	if n := len(messageSeqs(brec.snapshot(), ch.ID)); n != 1 {
		t.Errorf("bob got %d messages of a channel he was removed from", n)
	}
	checkInOrder(t, e, arec.snapshot(), ch.ID, 1)
}

func TestE2EBootGivesLastSeqsToDeclare(t *testing.T) {
	e := newNode(t, nil)
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	if _, err := alice.Client.AddMembers(t.Context(), ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	e.mustPost(alice, ch, 3)
	b, err := bob.Client.Boot(t.Context(), parley.BootQuery{WorkspaceID: ws.ID})
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]int64{}
	for _, bc := range b.Channels {
		declared[bc.ID] = bc.LastSeq
	}
	log := e.log(ch.ID, 0)
	if declared[ch.ID] != log[len(log)-1].Seq || b.WSURL == "" {
		t.Fatalf("boot channels %+v, ws_url %q; log ends at %d", b.Channels, b.WSURL, log[len(log)-1].Seq)
	}
	if _, err := bob.Client.Boot(t.Context(), parley.BootQuery{WorkspaceID: "nope"}); err == nil {
		t.Fatal("boot of an unknown workspace succeeded")
	}
}

func TestE2EConnectFromLocalAddress(t *testing.T) {
	e := newNode(t, nil)
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	if _, err := alice.Client.AddMembers(t.Context(), ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	conn := dial(t, bob, ws, ConnectOptions{Handler: rec.handle, LocalAddr: "127.0.0.2"})
	e.mustPost(alice, ch, 3)
	rec.waitFor(t, "3 messages", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) == 3 })
	conn.Drop() // the resumed socket leaves from the same address
	waitUntil(t, "resumed", func() bool { return conn.Stats().Resumes == 1 })
	e.mu.Lock()
	remotes := slices.Clone(e.gwRemotes)
	e.mu.Unlock()
	if len(remotes) != 2 {
		t.Fatalf("gateway upgrades from %v, want 2", remotes)
	}
	for _, r := range remotes {
		if !strings.HasPrefix(r, "127.0.0.2:") {
			t.Fatalf("upgrade from %s, want 127.0.0.2", r)
		}
	}
	if _, err := bob.Client.Connect(t.Context(), ws.ID, ConnectOptions{Handler: rec.handle, LocalAddr: "nope", MaxAttempts: 1}); err == nil {
		t.Fatal("connect from a bad local address succeeded")
	}
}

// TestE2ESummaryMovesPosition: a passive channel's summary moves the
// tracked position without a gap fill, and the channel's next event (after
// focus) is delivered in order after it.
func TestE2ESummaryMovesPosition(t *testing.T) {
	live := parley.DefaultLiveConfig()
	// The first summary goes out at once, the next only after 60 s: what
	// is posted after the first is replayed on focus, whenever the focus
	// is applied.
	live.ViewMinMembers, live.ViewSummarySeconds = 0, 60
	e := newNode(t, func(c *gateway.Config) { c.Live = parley.StaticConfig(live) })
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	if _, err := alice.Client.AddMembers(t.Context(), ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	conn := dial(t, bob, ws, ConnectOptions{Handler: rec.handle})
	first, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "a summary", func(evs []Event) bool {
		for _, ev := range evs {
			if ev.Type == parley.EventChannelSummary {
				return true
			}
		}
		return false
	})
	if got := conn.Positions()[ch.ID]; got != first.Seq {
		t.Fatalf("position %d after the summary, want %d", got, first.Seq)
	}
	if err := conn.Focus([]string{ch.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Client.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "second"}); err != nil {
		t.Fatal(err)
	}
	evs := rec.waitFor(t, "a message event", func(evs []Event) bool { return len(messageSeqs(evs, ch.ID)) > 0 })
	if seqs := messageSeqs(evs, ch.ID); seqs[0] != first.Seq+1 {
		t.Fatalf("first message event seq %d, want %d", seqs[0], first.Seq+1)
	}
	if st := conn.Stats(); st.GapsFilled != 0 || st.Summaries == 0 {
		t.Fatalf("stats %+v: want summaries and no gap fills", st)
	}
}
