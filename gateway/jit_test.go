package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// storeDirectory is a UserDirectory over the test store: it lists the
// workspace's users as its owner sees them and counts the lookups.
type storeDirectory struct {
	store parley.Store
	actor string // a member of every workspace asked about

	mu           sync.Mutex // guards the fields below
	byID         int        // lookups by id
	byHandle     int        // lookups by handle
	idsAsked     [][]string
	handlesAsked [][]string
	failNext     bool
}

func (d *storeDirectory) all(ctx context.Context, ws string) ([]parley.User, error) {
	var all []parley.User
	q := parley.UserQuery{Limit: 200}
	for {
		page, err := d.store.ListWorkspaceUsers(ctx, d.actor, ws, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Users...)
		if page.NextCursor == "" {
			return all, nil
		}
		q.Cursor = page.NextCursor
	}
}

func (d *storeDirectory) Users(ctx context.Context, ws string, ids []string) ([]parley.User, error) {
	d.mu.Lock()
	d.byID++
	d.idsAsked = append(d.idsAsked, slices.Clone(ids))
	fail := d.failNext
	d.failNext = false
	d.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("directory down")
	}
	all, err := d.all(ctx, ws)
	var out []parley.User
	for _, u := range all {
		if slices.Contains(ids, u.ID) {
			u.Email = "leak@example.com" // the gateway must drop it
			out = append(out, u)
		}
	}
	return out, err
}

func (d *storeDirectory) UsersByHandle(ctx context.Context, ws string, handles []string) ([]parley.User, error) {
	d.mu.Lock()
	d.byHandle++
	d.handlesAsked = append(d.handlesAsked, slices.Clone(handles))
	d.mu.Unlock()
	all, err := d.all(ctx, ws)
	var out []parley.User
	for _, u := range all {
		if slices.Contains(handles, u.Handle) {
			out = append(out, u)
		}
	}
	return out, err
}

func (d *storeDirectory) lookups() (byID, byHandle int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byID, d.byHandle
}

var _ UserDirectory = (*storeDirectory)(nil)

// jitFrame is an event frame with its users.
type jitFrame struct {
	Op    string          `json:"op"`
	S     uint64          `json:"s"`
	T     string          `json:"t"`
	D     json.RawMessage `json:"d"`
	Users []parley.User   `json:"users"`
}

// rawEvents returns the raw event frames of type typ received so far.
func (c *client) rawEvents(typ string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]byte
	for i, f := range c.frames {
		if f.Op == "event" && f.T == typ {
			out = append(out, c.rawFrames[i])
		}
	}
	return out
}

// messageFrames waits for n message.created frames and decodes them.
func messageFrames(t *testing.T, c *client, n int) []jitFrame {
	t.Helper()
	c.waitEvents(parley.EventMessageCreated, n)
	var out []jitFrame
	for _, raw := range c.rawEvents(parley.EventMessageCreated) {
		var f jitFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("frame %s: %v", raw, err)
		}
		out = append(out, f)
	}
	return out
}

func userIDs(us []parley.User) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.ID
	}
	return out
}

func wantUsers(t *testing.T, what string, f jitFrame, ids ...string) {
	t.Helper()
	got := userIDs(f.Users)
	if !slices.Equal(got, ids) && !(len(got) == 0 && len(ids) == 0) {
		t.Fatalf("%s: users %v, want %v (frame s=%d)", what, got, ids, f.S)
	}
	for _, u := range f.Users {
		if u.Email != "" || u.Handle == "" || u.Name == "" {
			t.Fatalf("%s: attached user %+v: want a full user object without email", what, u)
		}
	}
}

func jitEnv(t *testing.T, mutate func(*Config)) (*env, *storeDirectory) {
	t.Helper()
	dir := &storeDirectory{}
	e := newEnv(t, func(c *Config) {
		c.Users = dir
		if mutate != nil {
			mutate(c)
		}
	})
	dir.store = e.store
	return e, dir
}

// TestJITAuthorAndMentions: the first message by a user the session never
// saw carries that user beside d; the next carries none; a mention of a
// new user carries them (and only the new one); @channel and unknown
// handles carry nothing. The directory is asked once per event per node,
// however many sessions get it.
func TestJITAuthorAndMentions(t *testing.T) {
	e, dir := jitEnv(t, nil)
	a, b, c, d := e.user("alice"), e.user("bob"), e.user("carol"), e.user("dave")
	ws := e.workspace(a, b, c, d)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	cb, _ := e.identify(b, ws)
	cc, _ := e.identify(c, ws)
	// Each identify looked its user's handle up (for summaries, view.go).
	idBase, _ := dir.lookups()

	e.post(a, general, "hello")
	f := messageFrames(t, cb, 1)[0]
	wantUsers(t, "first message by a", f, a.ID)
	raw := cb.rawEvents(parley.EventMessageCreated)[0]
	if !bytes.HasPrefix(raw, []byte(`{"op":"event","s":`)) || !bytes.Contains(raw, []byte(`},"users":[{"id":"`+a.ID+`"`)) {
		t.Fatalf("frame layout: %s", raw)
	}
	if byID, _ := dir.lookups(); byID-idBase != 1 {
		t.Fatalf("%d id lookups for one event and two sessions, want 1", byID-idBase)
	}

	e.post(a, general, "again")
	wantUsers(t, "second message by a", messageFrames(t, cb, 2)[1])

	e.post(a, general, "ping @"+d.Handle+" and @channel and @nobody-here and @"+a.Handle)
	wantUsers(t, "mention of d", messageFrames(t, cb, 3)[2], d.ID)
	if _, byHandle := dir.lookups(); byHandle != 1 {
		t.Fatalf("%d handle lookups, want 1", byHandle)
	}
	dir.mu.Lock()
	asked := dir.handlesAsked[0]
	dir.mu.Unlock()
	if slices.Contains(asked, "channel") {
		t.Fatalf("special mention looked up: %v", asked)
	}

	// b posts: b gets b (b's own session has not been sent b either), c
	// gets b; d mentioned again: known to both now.
	e.post(b, general, "me @"+d.Handle)
	wantUsers(t, "b's own message to b", messageFrames(t, cb, 4)[3], b.ID)
	fc := messageFrames(t, cc, 4)
	wantUsers(t, "c: first", fc[0], a.ID)
	wantUsers(t, "c: second", fc[1])
	wantUsers(t, "c: mention of d", fc[2], d.ID)
	wantUsers(t, "c: b's message", fc[3], b.ID)

	// An edit that adds a mention of c carries c to b.
	m := e.post(a, general, "plain")
	if _, err := e.store.EditMessage(t.Context(), a.ID, m.ID, "now with @"+c.Handle); err != nil {
		t.Fatal(err)
	}
	cb.waitEvents(parley.EventMessageUpdated, 1)
	var upd jitFrame
	if err := json.Unmarshal(cb.rawEvents(parley.EventMessageUpdated)[0], &upd); err != nil {
		t.Fatal(err)
	}
	wantUsers(t, "edit mentioning c", upd, c.ID)
	// b was sent a, d, b, c; c was sent a, d, b and, with the edit, c.
	waitUntil(t, "the edit reaches c", func() bool { return len(cc.rawEvents(parley.EventMessageUpdated)) == 1 })
	if v := counterValue(t, e.reg, "parley_gateway_jit_users_attached_total"); v != 8 {
		t.Fatalf("users attached %v, want 8", v)
	}
}

// TestJITLookupFailure: when the directory fails, the message still goes
// out (without users) and the user is attached to the next one.
func TestJITLookupFailure(t *testing.T) {
	e, dir := jitEnv(t, nil)
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	cb, _ := e.identify(b, ws)
	dir.mu.Lock()
	dir.failNext = true
	dir.mu.Unlock()
	e.post(a, general, "one")
	e.post(a, general, "two")
	fs := messageFrames(t, cb, 2)
	wantUsers(t, "lookup failed", fs[0])
	wantUsers(t, "next message", fs[1], a.ID)
	if v := counterValue(t, e.reg, "parley_gateway_jit_lookup_errors_total"); v != 1 {
		t.Fatalf("lookup errors %v, want 1", v)
	}
}

// TestJITResume: frames replayed on resume carry the users exactly as
// first sent (or queued), both for frames the client had received and for
// those queued while it was away; live delivery after the resume attaches
// only users still unknown.
func TestJITResume(t *testing.T) {
	e, dir := jitEnv(t, nil)
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	cb, ready := e.identify(b, ws)
	e.post(a, general, "before the drop")
	first := messageFrames(t, cb, 1)[0]
	wantUsers(t, "before the drop", first, a.ID)
	cb.drop()
	e.waitDetached(ready.SessionID)
	e.post(c, general, "while away @"+a.Handle)
	waitUntil(t, "queued", func() bool {
		_, _, lastS := e.sessionState(ready.SessionID)
		return lastS == first.S+1
	})

	// Resume from before the first frame: both are replayed.
	c2 := e.connect()
	c2.send(map[string]any{"op": "resume", "token": b.token, "session_id": ready.SessionID, "seq": first.S - 1})
	fs := messageFrames(t, c2, 2)
	wantUsers(t, "replayed first frame", fs[0], a.ID)
	wantUsers(t, "replayed queued frame", fs[1], c.ID)
	c2.nextOp("resumed")
	e.post(c, general, "live")
	wantUsers(t, "live after resume", messageFrames(t, c2, 3)[2])
}

// TestJITHandover: a session resumed on another node replays the frames
// with their users, and the new node knows which users the session has.
func TestJITHandover(t *testing.T) {
	e, dir := jitEnv(t, nil)
	n2 := e.jitNode("n2", dir)
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	cb, ready := e.identify(b, ws)
	e.post(a, general, "one")
	first := messageFrames(t, cb, 1)[0]
	cb.drop()
	e.waitDetached(ready.SessionID)

	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": b.token, "session_id": ready.SessionID, "seq": first.S - 1})
	wantUsers(t, "replayed on n2", messageFrames(t, c2, 1)[0], a.ID)
	c2.nextOp("resumed")
	e.post(a, general, "two")
	wantUsers(t, "live on n2", messageFrames(t, c2, 2)[1])
}

// jitNode is e.node with the directory.
func (e *env) jitNode(nodeID string, dir UserDirectory) *env {
	e.t.Helper()
	n := &env{t: e.t, store: e.store, bus: e.bus, reg: prometheus.NewRegistry()}
	var err error
	n.gw, err = New(Config{Store: e.store, Bus: muxlessBus{e.bus, e.bus}, NodeID: nodeID, Registerer: n.reg, Partitions: 2,
		Logger: quietLogger, Users: dir})
	if err != nil {
		e.t.Fatal(err)
	}
	n.srv = httptest.NewServer(n.gw)
	n.url = "ws://" + n.srv.Listener.Addr().String() + "/api/v1/gateway"
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.gw.Shutdown(ctx)
		n.srv.Close()
	})
	return n
}

// TestJITPrepareBatches: a catch-up read of many messages is resolved with
// one lookup by id and one by handle.
func TestJITPrepareBatches(t *testing.T) {
	e, dir := jitEnv(t, nil)
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	for i := range 6 {
		u := []*tuser{a, b}[i%2]
		e.post(u, general, fmt.Sprintf("m%d @%s", i, c.Handle))
	}
	evs, err := e.store.ChannelLog(t.Context(), general.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	es := e.gw.prepare(evs, time.Now())
	byID, byHandle := dir.lookups()
	if byID != 1 || byHandle != 1 {
		t.Fatalf("%d id and %d handle lookups for one read, want 1 and 1", byID, byHandle)
	}
	msgs := 0
	for _, ev := range es {
		if ev.typ != parley.EventMessageCreated {
			if len(ev.users) != 0 {
				t.Fatalf("%s carries users", ev.typ)
			}
			continue
		}
		msgs++
		if len(ev.users) != 2 {
			t.Fatalf("message event with %d users, want author and c", len(ev.users))
		}
	}
	if msgs != 6 {
		t.Fatalf("%d message events", msgs)
	}
}

func TestUserSet(t *testing.T) {
	var s userSet
	for i := uint32(1000); i > 0; i-- {
		s.add(i)
		if !s.has(i) {
			t.Fatalf("added %d, not there", i)
		}
	}
	if s.len() != maxKnownUsers || cap(s.nums) != maxKnownUsers {
		t.Fatalf("len %d cap %d, want %d", s.len(), cap(s.nums), maxKnownUsers)
	}
	if !slices.IsSorted(s.nums) {
		t.Fatal("not sorted")
	}
	s.add(1) // already there: nothing changes
	if s.len() != maxKnownUsers {
		t.Fatal("duplicate added")
	}
}

// TestIdleSessionMemoryWithUsers is TestIdleSessionMemory for sessions
// that have been sent users: PARLEY_MEASURE_SESSIONS=N
// [PARLEY_MEASURE_AUTHORS=K] go test -run IdleSessionMemoryWithUsers -v
// ./gateway. N idle sessions of N users in one workspace, each sent one
// message by each of K different authors (default 50), so that each holds
// K users in its set; then the replay rings are left to expire, and the
// heap and stacks per session are measured.
func TestIdleSessionMemoryWithUsers(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PARLEY_MEASURE_SESSIONS"))
	if n <= 0 {
		t.Skip("set PARLEY_MEASURE_SESSIONS to measure")
	}
	k, _ := strconv.Atoi(os.Getenv("PARLEY_MEASURE_AUTHORS"))
	if k <= 0 {
		k = 50
	}
	k = min(k, n)
	e, dir := jitEnv(t, func(c *Config) {
		c.IdentifyRatePerIP = Rate{PerMinute: -1}
		c.MaxConcurrentIdentifies = 1 << 20
		c.ReplayTTL = 200 * time.Millisecond
	})
	owner := e.user("owner")
	ws := e.workspace(owner)
	dir.actor = owner.ID
	general := generalOf(t, e, owner, ws)
	users := make([]*tuser, n)
	for i := range users {
		users[i] = e.user("u")
		e.workspaceJoin(ws, owner, users[i])
	}
	conns := make([]*rawClient, 0, n)
	before, beforeStack := memInUse()
	for i, u := range users {
		r := e.rawDial(t)
		r.br = nil
		r.send(t, map[string]any{"op": "identify", "token": u.token, "workspace_id": ws.ID})
		conns = append(conns, r)
		if i%100 == 99 {
			waitUntil(t, "identified", func() bool { return e.gw.registry.len() == i+1 })
		}
	}
	waitUntil(t, "identified", func() bool { return e.gw.registry.len() == n })
	for i := range k {
		e.post(users[i], general, fmt.Sprintf("hello from %d", i))
	}
	for deadline := time.Now().Add(2 * time.Minute); counterValue(t, e.reg, "parley_gateway_deliveries_total") < float64(n*k); {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the deliveries")
		}
		time.Sleep(10 * time.Millisecond)
	}
	known, ringed, live := 0, 0, 0
	waitUntil(t, "replay rings expired", func() bool {
		known, ringed, live = 0, 0, 0
		for _, p := range e.gw.parts {
			done := make(chan struct{})
			p.post(func() {
				for s := range p.sessions {
					live++
					known += s.known.len()
					ringed += s.ring.len()
				}
				close(done)
			})
			<-done
		}
		return ringed == 0
	})
	if live != n {
		t.Fatalf("%d sessions left of %d", live, n)
	}
	after, afterStack := memInUse()
	heap := float64(int64(after)-int64(before)) / float64(n)
	stack := float64(int64(afterStack)-int64(beforeStack)) / float64(n)
	t.Logf("%d idle sessions, %.0f users sent to each: %.0f bytes per session (heap %.0f + stacks %.0f; server and raw client)",
		n, float64(known)/float64(n), heap+stack, heap, stack)
	runtime.KeepAlive(conns)
}
