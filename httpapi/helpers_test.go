package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/auth"
	"parley/files"
	"parley/internal/testpg"
	"parley/sqlstore"
)

// dialects are the databases every store-backed test runs on.
var dialects = []sqlstore.Dialect{sqlstore.SQLite, sqlstore.Postgres}

// clock is a settable time source shared by the store and the server.
type clock struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
}

func newClock() *clock { return &clock{now: time.Now().UTC().Truncate(time.Second)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// openStore opens a fresh store of the given dialect, closed when tb ends.
func openStore(tb testing.TB, d sqlstore.Dialect, now func() time.Time) parley.Store {
	tb.Helper()
	cfg := sqlstore.Config{Now: now, Logger: quietLogger()}
	if d == sqlstore.Postgres {
		cfg.PostgresURL = testpg.New(tb)
	} else {
		cfg.Path = filepath.Join(tb.TempDir(), "parley.db")
	}
	s, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open %s store: %v", d, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// env is a real store behind a real HTTP server.
type env struct {
	t     testing.TB
	store parley.Store
	api   *Server
	srv   *httptest.Server
	clock *clock
}

// newEnv starts an API on a fresh SQLite store; adjust may change the
// config before the server is built.
func newEnv(tb testing.TB, adjust ...func(*Config)) *env {
	return newEnvOn(tb, sqlstore.SQLite, adjust...)
}

func newEnvOn(tb testing.TB, d sqlstore.Dialect, adjust ...func(*Config)) *env {
	tb.Helper()
	clk := newClock()
	st := openStore(tb, d, clk.Now)
	return newEnvWithStore(tb, st, clk, adjust...)
}

func newEnvWithStore(tb testing.TB, st parley.Store, clk *clock, adjust ...func(*Config)) *env {
	tb.Helper()
	cfg := Config{Store: st, Logger: quietLogger(), Now: clk.Now, Directory: storeDirectory(tb, st),
		Files: newFiles(tb, st, clk.Now)}
	if ex, ok := st.(parley.Exporter); ok {
		cfg.Exporter = ex
	}
	if is, ok := st.(parley.IntegrationStore); ok {
		cfg.Integrations = is
	}
	for _, f := range adjust {
		f(&cfg)
	}
	api := New(cfg)
	srv := httptest.NewServer(api.Handler())
	tb.Cleanup(srv.Close)
	return &env{t: tb, store: st, api: api, srv: srv, clock: clk}
}

// newFiles is a file service on a local storage in a temporary directory,
// over the SQL store behind st.
func newFiles(tb testing.TB, st parley.Store, now func() time.Time) *files.Service {
	tb.Helper()
	storage, err := files.NewLocal(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return files.New(files.Config{Storage: storage, Store: sqlStore(tb, st), Logger: quietLogger(), Now: now})
}

// sqlStore is the SQL store behind st (the tests' store wrappers
// unwrapped).
func sqlStore(tb testing.TB, st parley.Store) *sqlstore.Store {
	tb.Helper()
	for {
		switch s := st.(type) {
		case *sqlstore.Store:
			return s
		case failingStore:
			st = s.Store
		case panickingStore:
			st = s.Store
		default:
			tb.Fatalf("no SQL store behind %T", st)
			return nil
		}
	}
}

// storeDirectory is the store-backed directory queries of the SQL store
// behind st (the tests' store wrappers unwrapped).
func storeDirectory(tb testing.TB, st parley.Store) parley.DirectoryQueries {
	tb.Helper()
	for {
		switch s := st.(type) {
		case *sqlstore.Store:
			return s.Directory()
		case failingStore:
			st = s.Store
		case panickingStore:
			st = s.Store
		default:
			tb.Fatalf("no SQL store behind %T", st)
			return nil
		}
	}
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// decode unmarshals the body into v, failing the test on error.
func (r *response) decode(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		tb.Fatalf("decode %s: %v", r.Body, err)
	}
}

// errCode returns the error code of a JSON error body ("" if none).
func (r *response) errCode() string {
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// call sends method path (relative to /api/v1) with an optional token and
// body: a []byte or string is sent as is, anything else as JSON.
func (e *env) call(method, path, token string, body any) *response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatalf("encode body: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.srv.URL+Prefix+path, rd)
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// must calls and fails the test unless the status is want; it decodes the
// body into out when out is not nil.
func (e *env) must(want int, method, path, token string, body, out any) *response {
	e.t.Helper()
	r := e.call(method, path, token, body)
	if r.Status != want {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.Status, want, r.Body)
	}
	if out != nil {
		r.decode(e.t, out)
	}
	return r
}

var seq atomic.Int64

// uniq returns a unique suffix for handles, emails and slugs. The fixed
// width keeps one suffix from being a prefix of another (directory search).
func uniq() string { return fmt.Sprintf("%06d", seq.Add(1)) }

// testPassword is the password of every user made by the helpers.
const testPassword = "correct horse battery"

// passwordHash is testPassword hashed once per test binary: argon2id is
// deliberately slow.
var passwordHash = sync.OnceValue(func() string {
	h, err := auth.HashPassword(testPassword)
	if err != nil {
		panic(err)
	}
	return h
})

// account is a user with a live token.
type account struct {
	*parley.User
	Token string
}

// mustAccount makes a user (through the store, with testPassword) and a
// session for them.
func mustAccount(tb testing.TB, st parley.Store, name string) *account {
	tb.Helper()
	h := name + "-" + uniq()
	u, err := st.CreateUser(context.Background(), parley.NewUser{
		Email: h + "@example.com", Name: name, Handle: h, PasswordHash: passwordHash(),
	})
	if err != nil {
		tb.Fatalf("create user %s: %v", h, err)
	}
	return &account{User: u, Token: mustToken(tb, st, u.ID)}
}

// mustToken stores a new session for userID and returns its token.
func mustToken(tb testing.TB, st parley.Store, userID string) string {
	tb.Helper()
	token, hash, err := auth.NewToken()
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	if err := st.CreateSession(context.Background(), parley.Session{
		TokenHash: hash, UserID: userID, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		tb.Fatalf("create session: %v", err)
	}
	return token
}

// mustWorkspace creates a workspace owned by owner.
func mustWorkspace(tb testing.TB, st parley.Store, owner *account) *parley.Workspace {
	tb.Helper()
	n := uniq()
	ws, err := st.CreateWorkspace(context.Background(), owner.ID, "Team "+n, "team-"+n)
	if err != nil {
		tb.Fatalf("create workspace: %v", err)
	}
	return ws
}

// mustJoin adds u to ws with an invite made by inviter.
func mustJoin(tb testing.TB, st parley.Store, ws *parley.Workspace, inviter *account, users ...*account) {
	tb.Helper()
	ctx := context.Background()
	inv, err := st.CreateInvite(ctx, inviter.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		tb.Fatalf("create invite: %v", err)
	}
	for _, u := range users {
		if _, err := st.AcceptInvite(ctx, u.ID, inv.Code); err != nil {
			tb.Fatalf("accept invite: %v", err)
		}
	}
}

// mustChannel creates a channel in ws as creator.
func mustChannel(tb testing.TB, st parley.Store, ws *parley.Workspace, creator *account, kind parley.ChannelKind) *parley.Channel {
	tb.Helper()
	ch, err := st.CreateChannel(context.Background(), creator.ID, ws.ID, parley.NewChannel{Name: string(kind) + "-" + uniq(), Kind: kind})
	if err != nil {
		tb.Fatalf("create channel: %v", err)
	}
	return ch
}

// mustPost posts text into ch as u.
func mustPost(tb testing.TB, st parley.Store, u *account, ch *parley.Channel, text string) *parley.Message {
	tb.Helper()
	m, _, err := st.PostMessage(context.Background(), u.ID, ch.ID, parley.NewMessage{Text: text})
	if err != nil {
		tb.Fatalf("post: %v", err)
	}
	return m
}
