package client

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"parley"
)

// The gateway side of the client against a scripted fake gateway, with the
// real API and store behind /sync and /events.

type gwFixture struct {
	e     *env
	alice *account
	ws    *parley.Workspace
	ch    *parley.Channel
	rec   *recorder
}

func newGW(t *testing.T) *gwFixture {
	t.Helper()
	e := newEnv(t, true)
	alice := e.mustAccount("alice")
	ws := e.mustWorkspace(alice)
	return &gwFixture{e: e, alice: alice, ws: ws, ch: e.mustChannel(ws, alice, parley.KindPublic), rec: newRecorder()}
}

// connectAsync runs Connect on its own goroutine.
func connectAsync(ctx context.Context, c *Client, workspaceID string, opts ConnectOptions) <-chan connectResult {
	out := make(chan connectResult, 1)
	go func() {
		conn, err := c.Connect(ctx, workspaceID, opts)
		out <- connectResult{conn, err}
	}()
	return out
}

func waitConnect(tb testing.TB, ch <-chan connectResult) connectResult {
	tb.Helper()
	select {
	case r := <-ch:
		if r.conn != nil {
			tb.Cleanup(func() { r.conn.Close(); <-r.conn.Done() })
		}
		return r
	case <-time.After(15 * time.Second):
		tb.Fatal("Connect did not return")
		return connectResult{}
	}
}

// connect opens a Conn through the fake with session "n1.first".
func (f *gwFixture) connect(t *testing.T, opts ConnectOptions) (*Conn, *fakeSock) {
	t.Helper()
	if opts.Handler == nil {
		opts.Handler = f.rec.handle
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 20 * time.Millisecond
	}
	res := connectAsync(t.Context(), f.alice.Client, f.ws.ID, opts)
	fs := f.e.fake.accept(t)
	fs.identify(t, f.alice.Token, f.ws.ID, "n1.first", f.alice.ID)
	r := waitConnect(t, res)
	if r.err != nil {
		t.Fatalf("connect: %v", r.err)
	}
	return r.conn, fs
}

func TestConnectIdentifyDeliver(t *testing.T) {
	f := newGW(t)
	f.e.mustPost(f.alice, f.ch, 3) // seqs 2..4
	conn, fs := f.connect(t, ConnectOptions{})
	if conn.SessionID() != "n1.first" || conn.UserID() != f.alice.ID || !conn.Connected() {
		t.Fatalf("session %q user %q connected %v", conn.SessionID(), conn.UserID(), conn.Connected())
	}
	for _, ev := range f.e.log(f.ch.ID, 1) {
		fs.event(t, ev)
	}
	fs.ephemeral(t, parley.EventTypingStarted, map[string]string{"channel_id": f.ch.ID, "user_id": f.alice.ID})
	fs.ephemeral(t, parley.EventPresenceChanged, map[string]string{"user_id": f.alice.ID, "presence": "online"})
	evs := f.rec.waitN(t, 5)
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, seqRange(2, 4)) {
		t.Fatalf("seqs %v", got)
	}
	for i, ev := range evs {
		if ev.S != int64(i+1) || ev.Source != SourceGateway {
			t.Errorf("event %d: s=%d source=%s", i, ev.S, ev.Source)
		}
	}
	var d parley.MessageEventData
	if err := evs[0].Decode(&d); err != nil || d.Message == nil || d.Message.Seq != 2 || evs[0].Type != parley.EventMessageCreated {
		t.Fatalf("first event %s: %+v %v", evs[0].Type, d, err)
	}
	if evs[3].Type != parley.EventTypingStarted || evs[3].Durable() || evs[3].ChannelID != f.ch.ID {
		t.Errorf("typing: %+v", evs[3])
	}
	if evs[4].Type != parley.EventPresenceChanged || evs[4].ChannelID != "" {
		t.Errorf("presence: %+v", evs[4])
	}
	if st := conn.Stats(); st.Delivered != 5 || st.GapsFilled != 0 || st.DuplicatesDropped != 0 || st.SGaps != 0 {
		t.Errorf("stats %+v", st)
	}
	if pos := conn.Positions(); pos[f.ch.ID] != 4 {
		t.Errorf("positions %v", pos)
	}
}

func TestDuplicatesDropped(t *testing.T) {
	f := newGW(t)
	f.e.mustPost(f.alice, f.ch, 3)
	conn, fs := f.connect(t, ConnectOptions{})
	log := f.e.log(f.ch.ID, 1) // seqs 2, 3, 4
	for _, ev := range []parley.Event{log[0], log[1], log[1], log[0], log[2]} {
		fs.event(t, ev)
	}
	fs.ephemeral(t, parley.EventTypingStarted, map[string]string{"channel_id": f.ch.ID}) // a marker
	evs := f.rec.waitN(t, 4)
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, seqRange(2, 4)) {
		t.Fatalf("seqs %v", got)
	}
	if st := conn.Stats(); st.DuplicatesDropped != 2 || st.SGaps != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestGapFilledFromEventLog(t *testing.T) {
	f := newGW(t)
	f.e.mustPost(f.alice, f.ch, 5) // seqs 2..6
	conn, fs := f.connect(t, ConnectOptions{})
	log := f.e.log(f.ch.ID, 1)
	fs.event(t, log[0]) // seq 2
	fs.event(t, log[4]) // seq 6: 3..5 are missing
	evs := f.rec.waitN(t, 5)
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, seqRange(2, 6)) {
		t.Fatalf("seqs %v", got)
	}
	want := []Source{SourceGateway, SourceFill, SourceFill, SourceFill, SourceGateway}
	for i, ev := range evs {
		if ev.Source != want[i] {
			t.Errorf("event %d source %s, want %s", i, ev.Source, want[i])
		}
	}
	var d parley.MessageEventData
	if err := evs[2].Decode(&d); err != nil || d.Message == nil || d.Message.Seq != 4 {
		t.Errorf("filled event payload %+v %v", d, err)
	}
	// The gateway later delivering what was filled is a duplicate.
	fs.event(t, log[2])
	fs.ephemeral(t, parley.EventTypingStarted, map[string]string{"channel_id": f.ch.ID})
	f.rec.waitN(t, 6)
	if st := conn.Stats(); st.GapsFilled != 1 || st.DuplicatesDropped != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestSessionSeqGapCounted(t *testing.T) {
	f := newGW(t)
	f.e.mustPost(f.alice, f.ch, 2)
	conn, fs := f.connect(t, ConnectOptions{})
	log := f.e.log(f.ch.ID, 1)
	fs.eventAt(t, 1, log[0].Type, log[0].Data)
	fs.eventAt(t, 3, log[1].Type, log[1].Data) // s 2 never came
	fs.eventAt(t, 3, parley.EventTypingStarted, json.RawMessage(`{"channel_id":"x"}`))
	f.rec.waitN(t, 2)
	fs.eventAt(t, 4, parley.EventTypingStarted, json.RawMessage(`{"channel_id":"x"}`))
	f.rec.waitN(t, 3)
	if st := conn.Stats(); st.SGaps != 2 || st.Delivered != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestResumeReplaysMissedEvents(t *testing.T) {
	f := newGW(t)
	f.e.mustPost(f.alice, f.ch, 5) // seqs 2..6
	var states []State
	var smu sync.Mutex
	conn, fs := f.connect(t, ConnectOptions{OnState: func(s State, _ error) {
		smu.Lock()
		states = append(states, s)
		smu.Unlock()
	}})
	log := f.e.log(f.ch.ID, 1)
	fs.event(t, log[0])
	fs.event(t, log[1])
	f.rec.waitN(t, 2)
	fs.drop()

	fs2 := f.e.fake.accept(t)
	fs2.hello(t, 60000)
	r := fs2.expect(t, parley.OpResume)
	if r.SessionID != "n1.first" || r.Token != f.alice.Token || r.Seq == nil || *r.Seq != 2 {
		t.Fatalf("resume frame %s", r.Raw)
	}
	fs2.s = 2
	fs2.event(t, log[2])
	fs2.event(t, log[3])
	fs2.send(t, map[string]any{"op": parley.OpResumed, "replayed": 2})
	fs2.event(t, log[4]) // live again
	evs := f.rec.waitN(t, 5)
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, seqRange(2, 6)) {
		t.Fatalf("seqs %v", got)
	}
	for i, ev := range evs {
		if ev.S != int64(i+1) {
			t.Errorf("event %d has s %d", i, ev.S)
		}
	}
	waitUntil(t, "reconnect counted", func() bool { return conn.Stats().Reconnects == 1 })
	st := conn.Stats()
	if st.Resumes != 1 || st.InvalidSessions != 0 || st.SGaps != 0 || st.DuplicatesDropped != 0 {
		t.Errorf("stats %+v", st)
	}
	smu.Lock()
	defer smu.Unlock()
	if !slices.Equal(states, []State{StateReady, StateDisconnected, StateResumed}) {
		t.Errorf("states %v", states)
	}
}

func TestInvalidSessionCatchesUpWithSync(t *testing.T) {
	f := newGW(t)
	ch2 := f.e.mustChannel(f.ws, f.alice, parley.KindPrivate) // seq 1 is its channel.created
	f.e.mustPost(f.alice, f.ch, 2)                            // seqs 2, 3
	conn, fs := f.connect(t, ConnectOptions{Channels: map[string]int64{ch2.ID: 1}})
	log := f.e.log(f.ch.ID, 1)
	fs.event(t, log[0])
	fs.event(t, log[1])
	f.rec.waitN(t, 2)
	fs.drop()
	// Missed while away: 3 messages in ch, 1 in ch2.
	f.e.mustPost(f.alice, f.ch, 3) // seqs 4..6
	f.e.mustPost(f.alice, ch2, 1)  // seq 2

	fs2 := f.e.fake.accept(t)
	fs2.hello(t, 60000)
	fs2.expect(t, parley.OpResume)
	fs2.send(t, map[string]any{"op": parley.OpInvalidSession, "reason": "unknown session"})
	id := fs2.expect(t, parley.OpIdentify)
	if id.Token != f.alice.Token || id.WorkspaceID != f.ws.ID {
		t.Fatalf("identify %s", id.Raw)
	}
	fs2.send(t, map[string]any{"op": parley.OpReady, "session_id": "n2.second", "user_id": f.alice.ID})
	// The new session's first live event comes while the catch-up runs.
	f.e.mustPost(f.alice, f.ch, 1) // seq 7
	fs2.event(t, f.e.log(f.ch.ID, 6)[0])

	evs := f.rec.waitFor(t, "ch up to 7 and ch2 up to 2", func(evs []Event) bool {
		return len(seqs(evs, f.ch.ID)) == 6 && len(seqs(evs, ch2.ID)) == 1
	})
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, seqRange(2, 7)) {
		t.Fatalf("ch seqs %v", got)
	}
	if got := seqs(evs, ch2.ID); !slices.Equal(got, []int64{2}) {
		t.Fatalf("ch2 seqs %v", got)
	}
	for _, ev := range evs {
		if ev.ChannelID == ch2.ID && ev.Source != SourceCatchUp {
			t.Errorf("ch2 event from %s", ev.Source)
		}
	}
	if conn.SessionID() != "n2.second" {
		t.Errorf("session %q", conn.SessionID())
	}
	waitUntil(t, "reconnect counted", func() bool { return conn.Stats().Reconnects == 1 })
	st := conn.Stats()
	if st.InvalidSessions != 1 || st.Resumes != 0 || st.SGaps != 0 || st.CatchUps < 2 {
		t.Errorf("stats %+v", st)
	}
	// A later resume uses the new session and its own s.
	fs2.drop()
	fs3 := f.e.fake.accept(t)
	fs3.hello(t, 60000)
	if r := fs3.expect(t, parley.OpResume); r.SessionID != "n2.second" || *r.Seq != 1 {
		t.Errorf("resume %s", r.Raw)
	}
}

func TestTooFarCatchesUpFromEventLog(t *testing.T) {
	f := newGW(t)
	const n = parley.MaxSyncEvents + 20
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { f.e.mustPost(f.alice, f.ch, n/8) })
	}
	wg.Wait()
	last := int64(1 + n/8*8)
	f.connect(t, ConnectOptions{Channels: map[string]int64{f.ch.ID: 1}})
	evs := f.rec.waitN(t, int(last-1))
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, seqRange(2, last)) {
		t.Fatalf("got %d seqs, first %v", len(got), got[:min(5, len(got))])
	}
	for _, ev := range evs {
		if ev.Source != SourceCatchUp {
			t.Fatalf("event from %s", ev.Source)
		}
	}
}

func TestReconnectOpHonoured(t *testing.T) {
	f := newGW(t)
	conn, fs := f.connect(t, ConnectOptions{})
	const after = 300 * time.Millisecond
	sent := time.Now()
	fs.send(t, map[string]any{"op": parley.OpReconnect, "reason": "draining", "retry_after_ms": after.Milliseconds()})
	fs.waitClosed(t)
	if code := fs.peerClose.Load(); code != parley.CloseClientReconnecting {
		t.Errorf("client closed with %d", code)
	}
	fs2 := f.e.fake.accept(t)
	if waited := time.Since(sent); waited < after {
		t.Errorf("came back after %v, asked for %v", waited, after)
	}
	fs2.hello(t, 60000)
	if r := fs2.expect(t, parley.OpResume); r.SessionID != "n1.first" {
		t.Errorf("resume %s", r.Raw)
	}
	fs2.send(t, map[string]any{"op": parley.OpResumed, "replayed": 0})
	waitUntil(t, "resumed", func() bool { return conn.Stats().Resumes == 1 })
}

// TestReconnectOpShutdownGoesElsewhere: a reconnect op for a node's
// shutdown sends the client to the next URL (where its session is handed
// over), another reason back to the same one.
func TestReconnectOpShutdownGoesElsewhere(t *testing.T) {
	f := newGW(t)
	base := f.alice.Client.WSURL()
	conn, fs := f.connect(t, ConnectOptions{URLs: []string{base + "?node=1", base + "?node=2"}})
	if fs.query != "node=1" {
		t.Fatalf("first connection to %q", fs.query)
	}
	next := fs
	for i, step := range []struct{ reason, want string }{
		{"overloaded", "node=1"},
		{"shutdown", "node=2"},
		{"rate_limited", "node=2"},
		{"shutdown", "node=1"},
	} {
		next.send(t, map[string]any{"op": parley.OpReconnect, "reason": step.reason, "retry_after_ms": 10})
		next.waitClosed(t)
		next = f.e.fake.accept(t)
		if next.query != step.want {
			t.Fatalf("after reconnect{%s}: came back to %q, want %q", step.reason, next.query, step.want)
		}
		next.hello(t, 60000)
		next.expect(t, parley.OpResume)
		next.send(t, map[string]any{"op": parley.OpResumed, "replayed": 0})
		waitUntil(t, "resumed", func() bool { return conn.Stats().Resumes == int64(i+1) })
	}
}

func TestReconnectOpBeforeHelloOnFirstConnect(t *testing.T) {
	f := newGW(t)
	res := connectAsync(t.Context(), f.alice.Client, f.ws.ID, ConnectOptions{Handler: f.rec.handle, MinBackoff: 10 * time.Millisecond})
	fs := f.e.fake.accept(t)
	sent := time.Now()
	fs.send(t, map[string]any{"op": parley.OpReconnect, "reason": "overloaded", "retry_after_ms": 200})
	fs2 := f.e.fake.accept(t)
	if waited := time.Since(sent); waited < 200*time.Millisecond {
		t.Errorf("came back after %v", waited)
	}
	fs2.identify(t, f.alice.Token, f.ws.ID, "n1.x", f.alice.ID)
	if r := waitConnect(t, res); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestBackoffBetweenRefusedAttempts(t *testing.T) {
	f := newGW(t)
	f.e.fake.refuse.Store(3)
	const minB, maxB = 40 * time.Millisecond, 100 * time.Millisecond
	res := connectAsync(t.Context(), f.alice.Client, f.ws.ID, ConnectOptions{
		Handler: f.rec.handle, MinBackoff: minB, MaxBackoff: maxB})
	fs := f.e.fake.accept(t)
	fs.identify(t, f.alice.Token, f.ws.ID, "n1.x", f.alice.ID)
	if r := waitConnect(t, res); r.err != nil {
		t.Fatal(r.err)
	}
	times := f.e.fake.attemptTimes()
	if len(times) != 4 {
		t.Fatalf("%d attempts", len(times))
	}
	// Attempt n waits at least half of min(MinBackoff<<n, MaxBackoff).
	for i, want := range []time.Duration{minB, maxB / 2, maxB / 2} {
		if gap := times[i+1].Sub(times[i]); gap < want {
			t.Errorf("wait before attempt %d: %v, want >= %v", i+2, gap, want)
		}
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	f := newGW(t)
	f.e.fake.refuse.Store(100)
	_, err := f.alice.Client.Connect(t.Context(), f.ws.ID, ConnectOptions{
		Handler: f.rec.handle, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
	if !errors.Is(err, ErrUpgradeRefused) {
		t.Fatalf("err %v", err)
	}
	if n := f.e.fake.tries.Load(); n != 3 {
		t.Errorf("%d attempts", n)
	}
}

func TestURLsTriedInTurn(t *testing.T) {
	f := newGW(t)
	dead := "ws://127.0.0.1:1/api/v1/gateway"
	res := connectAsync(t.Context(), f.alice.Client, f.ws.ID, ConnectOptions{
		Handler: f.rec.handle, MinBackoff: time.Millisecond, URLs: []string{dead, f.alice.Client.WSURL()}})
	fs := f.e.fake.accept(t)
	fs.identify(t, f.alice.Token, f.ws.ID, "n1.x", f.alice.ID)
	if r := waitConnect(t, res); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestAuthFailureIsFinal(t *testing.T) {
	f := newGW(t)
	var closedErr error
	var mu sync.Mutex
	conn, fs := f.connect(t, ConnectOptions{OnState: func(s State, err error) {
		if s == StateClosed {
			mu.Lock()
			closedErr = err
			mu.Unlock()
		}
	}})
	fs.closeWith(parley.CloseAuthFailed, "token revoked")
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("conn still running")
	}
	var ce *CloseError
	if !errors.As(conn.Err(), &ce) || ce.Code != parley.CloseAuthFailed || ce.Resumable() {
		t.Fatalf("err %v", conn.Err())
	}
	mu.Lock()
	if !errors.As(closedErr, &ce) {
		t.Errorf("OnState closed with %v", closedErr)
	}
	mu.Unlock()
	if n := f.e.fake.tries.Load(); n != 1 || conn.Stats().Reconnects != 0 {
		t.Errorf("%d upgrade attempts", n)
	}
	if err := conn.Typing(f.ch.ID, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("typing on a closed conn: %v", err)
	}
}

func TestAuthFailureOnFirstIdentify(t *testing.T) {
	f := newGW(t)
	res := connectAsync(t.Context(), f.alice.Client, f.ws.ID, ConnectOptions{Handler: f.rec.handle})
	fs := f.e.fake.accept(t)
	fs.hello(t, 60000)
	fs.expect(t, parley.OpIdentify)
	fs.closeWith(parley.CloseAuthFailed, "bad token")
	r := waitConnect(t, res)
	var ce *CloseError
	if !errors.As(r.err, &ce) || ce.Code != parley.CloseAuthFailed {
		t.Fatalf("connect: %v", r)
	}
}

func TestResumableCloseResumes(t *testing.T) {
	for _, code := range []int{parley.CloseGoingAway, parley.CloseSessionTimeout, parley.CloseUnknownError} {
		f := newGW(t)
		conn, fs := f.connect(t, ConnectOptions{})
		fs.closeWith(code, "bye")
		fs2 := f.e.fake.accept(t)
		fs2.hello(t, 60000)
		fs2.expect(t, parley.OpResume)
		fs2.send(t, map[string]any{"op": parley.OpResumed, "replayed": 0})
		waitUntil(t, "resumed", func() bool { return conn.Stats().Resumes == 1 })
	}
}

func TestInvalidResumeSeqIdentifiesAfresh(t *testing.T) {
	f := newGW(t)
	conn, fs := f.connect(t, ConnectOptions{})
	fs.drop()
	fs2 := f.e.fake.accept(t)
	fs2.hello(t, 60000)
	fs2.expect(t, parley.OpResume)
	fs2.closeWith(parley.CloseInvalidSeq, "seq ahead")
	fs3 := f.e.fake.accept(t)
	fs3.identify(t, f.alice.Token, f.ws.ID, "n1.fresh", f.alice.ID)
	waitUntil(t, "new session", func() bool { return conn.SessionID() == "n1.fresh" && conn.Connected() })
}

func TestHeartbeatsAndSilenceDetection(t *testing.T) {
	f := newGW(t)
	res := connectAsync(t.Context(), f.alice.Client, f.ws.ID, ConnectOptions{Handler: f.rec.handle, MinBackoff: time.Millisecond})
	fs := f.e.fake.accept(t)
	fs.hello(t, 100)
	fs.expect(t, parley.OpIdentify)
	fs.send(t, map[string]any{"op": parley.OpReady, "session_id": "n1.hb", "user_id": f.alice.ID})
	conn := waitConnect(t, res).conn
	waitUntil(t, "heartbeats", func() bool { return fs.heartbeats.Load() >= 3 })
	fs.autoAck.Store(false) // the server goes silent
	fs2 := f.e.fake.accept(t)
	if conn.Stats().HeartbeatTimeouts != 1 {
		t.Errorf("stats %+v", conn.Stats())
	}
	fs2.hello(t, 60000)
	if r := fs2.expect(t, parley.OpResume); r.SessionID != "n1.hb" {
		t.Errorf("resume %s", r.Raw)
	}
}

func TestViewOpsSentAndRestored(t *testing.T) {
	f := newGW(t)
	conn, fs := f.connect(t, ConnectOptions{})
	if err := conn.Focus([]string{f.ch.ID}); err != nil {
		t.Fatal(err)
	}
	if fr := fs.expect(t, parley.OpFocus); !slices.Equal(fr.ChannelIDs, []string{f.ch.ID}) {
		t.Errorf("focus %s", fr.Raw)
	}
	if err := conn.PresenceSub([]string{f.alice.ID}); err != nil {
		t.Fatal(err)
	}
	if fr := fs.expect(t, parley.OpPresenceSub); !slices.Equal(fr.UserIDs, []string{f.alice.ID}) {
		t.Errorf("presence_sub %s", fr.Raw)
	}
	// A set over the bound is refused before anything is sent, and the
	// set kept is the last good one (the resume below sends it).
	if err := conn.PresenceSub(make([]string, parley.MaxUsersInView+1)); !errors.Is(err, ErrTooManyInView) {
		t.Fatalf("PresenceSub of %d users: %v, want ErrTooManyInView", parley.MaxUsersInView+1, err)
	}
	if err := conn.Typing(f.ch.ID, "M123"); err != nil {
		t.Fatal(err)
	}
	if fr := fs.expect(t, parley.OpTyping); fr.ChannelID != f.ch.ID || fr.ThreadRootID != "M123" {
		t.Errorf("typing %s", fr.Raw)
	}
	if err := conn.Typing(f.ch.ID, ""); err != nil {
		t.Fatal(err)
	}
	if fr := fs.expect(t, parley.OpTyping); fr.Raw != `{"op":"typing","channel_id":"`+f.ch.ID+`"}` {
		t.Errorf("typing %s", fr.Raw)
	}
	fs.drop()
	fs2 := f.e.fake.accept(t)
	fs2.hello(t, 60000)
	fs2.expect(t, parley.OpResume)
	fs2.send(t, map[string]any{"op": parley.OpResumed, "replayed": 0})
	if fr := fs2.expect(t, parley.OpFocus); !slices.Equal(fr.ChannelIDs, []string{f.ch.ID}) {
		t.Errorf("focus after resume %s", fr.Raw)
	}
	if fr := fs2.expect(t, parley.OpPresenceSub); !slices.Equal(fr.UserIDs, []string{f.alice.ID}) {
		t.Errorf("presence_sub after resume %s", fr.Raw)
	}
}

func TestOwnLeaveStopsTracking(t *testing.T) {
	f := newGW(t)
	bob := f.e.mustAccount("bob")
	f.e.mustJoinWorkspace(f.ws, f.alice, bob)
	ctx := context.Background()
	if _, err := f.e.store.JoinChannel(ctx, bob.ID, f.ch.ID); err != nil { // seq 2: someone else
		t.Fatal(err)
	}
	if err := f.e.store.LeaveChannel(ctx, f.alice.ID, f.ch.ID); err != nil { // seq 3
		t.Fatal(err)
	}
	// Declared at seq 1: the first session's catch-up brings 2 and 3.
	conn, _ := f.connect(t, ConnectOptions{Channels: map[string]int64{f.ch.ID: 1}})
	evs := f.rec.waitN(t, 2)
	if evs[0].Type != parley.EventMemberJoined || evs[1].Type != parley.EventMemberLeft || evs[1].Source != SourceCatchUp {
		t.Fatalf("events %s", describe(evs))
	}
	waitUntil(t, "untracked", func() bool { _, ok := conn.Positions()[f.ch.ID]; return !ok })
}

func TestDeclaredOnlyPassesOthersThrough(t *testing.T) {
	f := newGW(t)
	other := f.e.mustChannel(f.ws, f.alice, parley.KindPublic)
	f.e.mustPost(f.alice, other, 4)
	f.e.mustPost(f.alice, f.ch, 1)
	conn, fs := f.connect(t, ConnectOptions{DeclaredOnly: true, Channels: map[string]int64{f.ch.ID: 2}})
	olog := f.e.log(other.ID, 0)
	fs.event(t, olog[1]) // seq 2
	fs.event(t, olog[4]) // seq 5: not filled, not tracked
	fs.event(t, olog[4]) // not deduplicated either
	evs := f.rec.waitN(t, 3)
	if got := seqs(evs, other.ID); !slices.Equal(got, []int64{2, 5, 5}) {
		t.Errorf("untracked channel seqs %v", got)
	}
	if st := conn.Stats(); st.GapsFilled != 0 || st.DuplicatesDropped != 0 {
		t.Errorf("stats %+v", st)
	}
	if _, ok := conn.Positions()[other.ID]; ok {
		t.Error("undeclared channel tracked")
	}
}

func TestTrackChannelCatchesUp(t *testing.T) {
	f := newGW(t)
	f.e.mustPost(f.alice, f.ch, 3) // seqs 2..4
	conn, _ := f.connect(t, ConnectOptions{})
	conn.TrackChannel(f.ch.ID, 2)
	evs := f.rec.waitN(t, 2)
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("seqs %v", got)
	}
	conn.TrackChannel(f.ch.ID, 0) // already tracked: no effect
	conn.UntrackChannel(f.ch.ID)
	waitUntil(t, "untracked", func() bool { return len(conn.Positions()) == 0 })
	if n := len(f.rec.snapshot()); n != 2 {
		t.Errorf("%d events", n)
	}
}

func TestSlowHandlerDropsSocketAndResumes(t *testing.T) {
	f := newGW(t)
	f.e.mustPost(f.alice, f.ch, 10) // seqs 2..11
	log := f.e.log(f.ch.ID, 1)
	release := make(chan struct{})
	f.rec.block = release
	conn, fs := f.connect(t, ConnectOptions{MaxQueue: 4})
	for _, ev := range log[:5] { // s 1..5: the fifth overflows the queue
		fs.event(t, ev)
	}
	fs.waitClosed(t)
	close(release)
	fs2 := f.e.fake.accept(t)
	fs2.hello(t, 60000)
	r := fs2.expect(t, parley.OpResume)
	if *r.Seq != 5 {
		t.Fatalf("resume %s", r.Raw)
	}
	fs2.s = 5
	for _, ev := range log[5:] {
		fs2.event(t, ev)
	}
	fs2.send(t, map[string]any{"op": parley.OpResumed, "replayed": 5})
	evs := f.rec.waitN(t, 10)
	if got := seqs(evs, f.ch.ID); !slices.Equal(got, seqRange(2, 11)) {
		t.Fatalf("seqs %v", got)
	}
	_ = conn
}

func TestCloseSendsNormalClosure(t *testing.T) {
	f := newGW(t)
	conn, fs := f.connect(t, ConnectOptions{})
	conn.Close()
	fs.waitClosed(t)
	<-conn.Done()
	if code := fs.peerClose.Load(); code != parley.CloseNormal {
		t.Errorf("close code %d", code)
	}
	if conn.Err() != nil || conn.Connected() {
		t.Errorf("err %v connected %v", conn.Err(), conn.Connected())
	}
	if err := conn.Focus(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("focus after close: %v", err)
	}
}

func TestCloseFromHandler(t *testing.T) {
	f := newGW(t)
	var conn *Conn
	ready := make(chan struct{})
	handler := func(ev Event) {
		<-ready
		conn.Close()
	}
	conn, fs := f.connect(t, ConnectOptions{Handler: handler})
	close(ready)
	fs.ephemeral(t, parley.EventTypingStarted, map[string]string{"channel_id": f.ch.ID})
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not done")
	}
}

// Directory copies of a public channel's lifecycle events reach sessions
// that do not follow the channel: they are single events, not a stream, so
// they pass through without tracking or gap filling.
func TestDirectoryCopiesNotTracked(t *testing.T) {
	f := newGW(t)
	bob := f.e.mustAccount("bob")
	f.e.mustJoinWorkspace(f.ws, f.alice, bob)
	pub := f.e.mustChannel(f.ws, bob, parley.KindPublic) // seq 1: created by bob
	f.e.mustPost(bob, pub, 3)                            // seqs 2..4
	if _, err := f.e.store.UpdateChannel(context.Background(), bob.ID, pub.ID, parley.ChannelPatch{Topic: ptr("x")}); err != nil {
		t.Fatal(err) // seq 5
	}
	conn, fs := f.connect(t, ConnectOptions{})
	log := f.e.log(pub.ID, 0)
	fs.event(t, log[0]) // channel.created by bob
	fs.event(t, log[4]) // channel.updated
	evs := f.rec.waitN(t, 2)
	if got := seqs(evs, pub.ID); !slices.Equal(got, []int64{1, 5}) {
		t.Fatalf("seqs %v", got)
	}
	if st := conn.Stats(); st.GapsFilled != 0 || len(conn.Positions()) != 0 {
		t.Errorf("stats %+v positions %v", st, conn.Positions())
	}
	// Alice joins: her own member.joined starts the channel's stream.
	if _, err := f.e.store.JoinChannel(context.Background(), f.alice.ID, pub.ID); err != nil {
		t.Fatal(err) // seq 6
	}
	f.e.mustPost(bob, pub, 1) // seq 7
	for _, ev := range f.e.log(pub.ID, 5) {
		fs.event(t, ev)
	}
	evs = f.rec.waitN(t, 4)
	if got := seqs(evs, pub.ID); !slices.Equal(got, []int64{1, 5, 6, 7}) {
		t.Fatalf("seqs %v", got)
	}
	if pos := conn.Positions()[pub.ID]; pos != 7 {
		t.Errorf("position %d", pos)
	}
}

// A live Conn whose gateway refuses it for a while — the resume closed
// rate_limited (4008), the identify after it closed unknown_error (4000, a
// store failing during identify), then upgrades refused with 503 — keeps
// trying and comes back: transient refusals never end a Conn (the chaos
// run's readers must not give up during a database fault).
func TestTransientRefusalsNeverEndAConn(t *testing.T) {
	f := newGW(t)
	conn, fs := f.connect(t, ConnectOptions{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	fs.drop()
	fs2 := f.e.fake.accept(t)
	fs2.hello(t, 60000)
	fs2.expect(t, parley.OpResume)
	fs2.closeWith(parley.CloseRateLimited, "overloaded: reconnect later")
	fs3 := f.e.fake.accept(t)
	fs3.hello(t, 60000)
	fs3.expect(t, parley.OpResume)
	fs3.send(t, map[string]any{"op": parley.OpInvalidSession, "reason": "unknown_session"})
	fs3.expect(t, parley.OpIdentify)
	f.e.fake.refuse.Store(20)
	fs3.closeWith(parley.CloseUnknownError, "internal error")
	fs4 := f.e.fake.accept(t)
	fs4.identify(t, f.alice.Token, f.ws.ID, "n1.back", f.alice.ID)
	waitUntil(t, "the Conn back on a new session", func() bool { return conn.SessionID() == "n1.back" && conn.Connected() })
	if err := conn.Err(); err != nil {
		t.Fatalf("the Conn ended: %v", err)
	}
	if n := f.e.fake.refuse.Load(); n != 0 {
		t.Errorf("%d refusals left: the Conn stopped trying", n)
	}
}
