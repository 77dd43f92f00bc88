package querycache

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/sqlstore"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func bg(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// mustBus starts an embedded bus, closed when tb ends.
func mustBus(tb testing.TB, cfg natsbus.Config) *natsbus.Bus {
	tb.Helper()
	cfg.Logger = quietLogger()
	b, err := natsbus.Start(cfg)
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// openStore opens a store publishing to pub: SQLite at path (a fresh file
// when path is ""), or PostgreSQL at url.
func openStore(tb testing.TB, d sqlstore.Dialect, where string, pub parley.EventPublisher) *sqlstore.Store {
	tb.Helper()
	cfg := sqlstore.Config{Publisher: pub, Logger: quietLogger()}
	switch {
	case d == sqlstore.Postgres:
		cfg.PostgresURL = where
		if where == "" {
			cfg.PostgresURL = testpg.New(tb)
		}
	case where != "":
		cfg.Path = where
	default:
		cfg.Path = filepath.Join(tb.TempDir(), "parley.db")
	}
	s, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open %s store: %v", d, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// countingStore counts every call the cache makes to the store.
type countingStore struct {
	Store
	reads, channelWS, batch atomic.Int64
	// gate, when set, holds ReadDirectory until it is closed; entered gets
	// a value each time ReadDirectory starts.
	gate    chan struct{}
	entered chan struct{}
}

func (s *countingStore) ReadDirectory(ctx context.Context, ws string, v parley.DirectoryVisitor) error {
	s.reads.Add(1)
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.gate != nil {
		<-s.gate
	}
	return s.Store.ReadDirectory(ctx, ws, v)
}

func (s *countingStore) ChannelWorkspace(ctx context.Context, id string) (string, error) {
	s.channelWS.Add(1)
	return s.Store.ChannelWorkspace(ctx, id)
}

func (s *countingStore) UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error) {
	s.batch.Add(1)
	return s.Store.UsersBatch(ctx, actor, ids)
}

func (s *countingStore) total() int64 { return s.reads.Load() + s.channelWS.Load() + s.batch.Load() }

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

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

// node is a store, a bus and a cache that reads through a countingStore.
type node struct {
	store *sqlstore.Store
	bus   *natsbus.Bus
	count *countingStore
	cache *Cache
	clock *clock
}

// newNode starts a single node on a fresh SQLite store and an embedded bus.
func newNode(tb testing.TB, adjust ...func(*Config)) *node {
	tb.Helper()
	return newNodeOnBus(tb, mustBus(tb, natsbus.Config{}), adjust...)
}

// newNodeOnBus starts a single node on a fresh SQLite store and bus.
func newNodeOnBus(tb testing.TB, bus *natsbus.Bus, adjust ...func(*Config)) *node {
	tb.Helper()
	return newNodeOn(tb, openStore(tb, sqlstore.SQLite, "", bus), bus, adjust...)
}

func newNodeOn(tb testing.TB, st *sqlstore.Store, bus *natsbus.Bus, adjust ...func(*Config)) *node {
	tb.Helper()
	n := &node{store: st, bus: bus, count: &countingStore{Store: st}, clock: &clock{now: time.Now()}}
	cfg := Config{Store: n.count, Bus: bus, Logger: quietLogger(), Now: n.clock.Now, SweepEvery: time.Hour}
	for _, f := range adjust {
		f(&cfg)
	}
	n.cache = New(cfg)
	tb.Cleanup(n.cache.Close)
	return n
}

var seq atomic.Int64

// mustUser creates a user with exactly that handle and name.
func mustUser(tb testing.TB, s parley.Store, handle, name string) *parley.User {
	tb.Helper()
	u, err := s.CreateUser(bg(tb), parley.NewUser{
		Email: handle + "@example.com", Name: name, Handle: handle, PasswordHash: "not-a-hash",
	})
	if err != nil {
		tb.Fatalf("create user %s: %v", handle, err)
	}
	return u
}

func mustWorkspace(tb testing.TB, s parley.Store, owner *parley.User) *parley.Workspace {
	tb.Helper()
	n := seq.Add(1)
	ws, err := s.CreateWorkspace(bg(tb), owner.ID, "Team", "team-"+itoa(n))
	if err != nil {
		tb.Fatalf("create workspace: %v", err)
	}
	return ws
}

func mustJoin(tb testing.TB, s parley.Store, ws *parley.Workspace, inviter *parley.User, users ...*parley.User) {
	tb.Helper()
	inv, err := s.CreateInvite(bg(tb), inviter.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		tb.Fatalf("invite: %v", err)
	}
	for _, u := range users {
		if _, err := s.AcceptInvite(bg(tb), u.ID, inv.Code); err != nil {
			tb.Fatalf("accept invite: %v", err)
		}
	}
}

func mustChannel(tb testing.TB, s parley.Store, ws *parley.Workspace, creator *parley.User, name string, kind parley.ChannelKind) *parley.Channel {
	tb.Helper()
	ch, err := s.CreateChannel(bg(tb), creator.ID, ws.ID, parley.NewChannel{Name: name, Kind: kind})
	if err != nil {
		tb.Fatalf("create channel %s: %v", name, err)
	}
	return ch
}

func noErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("unexpected error: %v", err)
	}
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := parley.ErrorCode(err); got != code {
		tb.Fatalf("error %v (code %q), want %q", err, got, code)
	}
}

// waitFor polls cond until it holds, failing after within.
func waitFor(tb testing.TB, what string, within time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func itoa(n int64) string {
	const digits = "0123456789"
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{digits[n%10]}, b...)
	}
	return string(b)
}

// handles returns the handles of users, in order.
func handles(users []parley.User) []string {
	out := make([]string, len(users))
	for i, u := range users {
		out[i] = u.Handle
	}
	return out
}

func channelNames(chs []parley.Channel) []string {
	out := make([]string, len(chs))
	for i, c := range chs {
		out[i] = c.Name
	}
	return out
}
