package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/auth"
	"parley/files"
	"parley/httpapi"
	"parley/sqlstore"
)

// env is a real API over a real SQLite store, optionally with a fake
// gateway mounted at /api/v1/gateway of the same server.
type env struct {
	t     testing.TB
	store parley.Store
	srv   *httptest.Server
	fake  *fakeGateway // nil unless asked for
	files *files.Service

	mu        sync.Mutex
	gwRemotes []string // remote addresses of gateway upgrades (newNode); guarded by mu
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv starts the API; with fake set, a scripted gateway answers
// /api/v1/gateway.
func newEnv(tb testing.TB, fake bool) *env {
	tb.Helper()
	return newEnvWithFiles(tb, fake, nil)
}

// newEnvWithFiles is newEnv with file storage in storage (nil: a local
// directory).
func newEnvWithFiles(tb testing.TB, fake bool, storage files.Storage) *env {
	tb.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{
		Path: filepath.Join(tb.TempDir(), "parley.db"), Logger: quietLogger(),
	})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	if storage == nil {
		if storage, err = files.NewLocal(tb.TempDir()); err != nil {
			tb.Fatal(err)
		}
	}
	fsvc := files.New(files.Config{Storage: storage, Store: st, Logger: quietLogger()})
	api := httpapi.New(httpapi.Config{Store: st, Exporter: st, Directory: st.Directory(), Logger: quietLogger(), Rates: parley.LiveRatesOff(),
		Integrations: st, Files: fsvc})
	e := &env{t: tb, store: st, files: fsvc}
	mux := http.NewServeMux()
	mux.Handle("/", api.Handler())
	if fake {
		e.fake = newFakeGateway(tb)
		mux.Handle("/api/v1/gateway", e.fake)
	}
	e.srv = httptest.NewServer(mux)
	tb.Cleanup(e.srv.Close)
	return e
}

var uniqSeq atomic.Int64

func uniq() string { return fmt.Sprintf("%06d", uniqSeq.Add(1)) }

const testPassword = "correct horse battery"

var passwordHash = sync.OnceValue(func() string {
	h, err := auth.HashPassword(testPassword)
	if err != nil {
		panic(err)
	}
	return h
})

// account is a user with a token and a client logged in as them.
type account struct {
	*parley.User
	Token  string
	Client *Client
}

// mustAccount makes a user through the store (no password hashing per
// user) with a live session, and a client for them.
func (e *env) mustAccount(name string, opts ...Option) *account {
	e.t.Helper()
	h := name + "-" + uniq()
	u, err := e.store.CreateUser(context.Background(), parley.NewUser{
		Email: h + "@example.com", Name: name, Handle: h, PasswordHash: passwordHash(),
	})
	if err != nil {
		e.t.Fatalf("create user: %v", err)
	}
	token, hash, err := auth.NewToken()
	if err != nil {
		e.t.Fatal(err)
	}
	now := time.Now()
	if err := e.store.CreateSession(context.Background(), parley.Session{
		TokenHash: hash, UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	opts = append([]Option{WithToken(token), WithLogger(quietLogger())}, opts...)
	return &account{User: u, Token: token, Client: New(e.srv.URL, opts...)}
}

func (e *env) mustWorkspace(owner *account, members ...*account) *parley.Workspace {
	e.t.Helper()
	ctx := context.Background()
	n := uniq()
	ws, err := e.store.CreateWorkspace(ctx, owner.ID, "Team "+n, "team-"+n)
	if err != nil {
		e.t.Fatalf("create workspace: %v", err)
	}
	e.mustJoinWorkspace(ws, owner, members...)
	return ws
}

// mustJoinWorkspace adds users to ws with an invite made by inviter.
func (e *env) mustJoinWorkspace(ws *parley.Workspace, inviter *account, users ...*account) {
	e.t.Helper()
	ctx := context.Background()
	inv, err := e.store.CreateInvite(ctx, inviter.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, u := range users {
		if _, err := e.store.AcceptInvite(ctx, u.ID, inv.Code); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) mustChannel(ws *parley.Workspace, creator *account, kind parley.ChannelKind) *parley.Channel {
	e.t.Helper()
	ch, err := e.store.CreateChannel(context.Background(), creator.ID, ws.ID,
		parley.NewChannel{Name: string(kind) + "-" + uniq(), Kind: kind})
	if err != nil {
		e.t.Fatalf("create channel: %v", err)
	}
	return ch
}

// mustPost posts n messages into ch as u through the store, returning them.
func (e *env) mustPost(u *account, ch *parley.Channel, n int) []*parley.Message {
	e.t.Helper()
	var out []*parley.Message
	for i := range n {
		m, _, err := e.store.PostMessage(context.Background(), u.ID, ch.ID, parley.NewMessage{Text: fmt.Sprintf("m%d", i)})
		if err != nil {
			e.t.Fatalf("post: %v", err)
		}
		out = append(out, m)
	}
	return out
}

// log returns channel ch's durable events after seq.
func (e *env) log(ch string, after int64) []parley.Event {
	e.t.Helper()
	evs, err := e.store.ChannelLog(context.Background(), ch, after, 10000)
	if err != nil {
		e.t.Fatalf("channel log: %v", err)
	}
	return evs
}

// recorder collects the events a Conn delivers.
type recorder struct {
	mu     sync.Mutex
	events []Event
	notify chan struct{}
	block  chan struct{} // when set, every delivery waits for it
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) handle(ev Event) {
	r.mu.Lock()
	block := r.block
	r.mu.Unlock()
	if block != nil {
		<-block
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor waits until cond holds for the events so far.
func (r *recorder) waitFor(tb testing.TB, what string, cond func([]Event) bool) []Event {
	tb.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		if evs := r.snapshot(); cond(evs) {
			return evs
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			tb.Fatalf("timed out waiting for %s; have %d events: %s", what, len(r.snapshot()), describe(r.snapshot()))
		}
	}
}

// waitN waits for at least n events.
func (r *recorder) waitN(tb testing.TB, n int) []Event {
	tb.Helper()
	return r.waitFor(tb, fmt.Sprintf("%d events", n), func(evs []Event) bool { return len(evs) >= n })
}

// seqs lists the channel seqs of ch's events among evs.
func seqs(evs []Event, ch string) []int64 {
	var out []int64
	for _, e := range evs {
		if e.ChannelID == ch && e.Seq > 0 {
			out = append(out, e.Seq)
		}
	}
	return out
}

// seqRange is from..to inclusive.
func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func describe(evs []Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("[s=%d %s %s#%d %s] ", e.S, e.Type, e.ChannelID, e.Seq, e.Source)
	}
	return s
}

// waitUntil polls cond until it holds or the deadline passes (for state
// that offers nothing to wait on).
func waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
