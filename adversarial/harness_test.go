package adversarial

import (
	"context"
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

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/auth"
	"parley/client"
	"parley/files"
	"parley/gateway"
	"parley/httpapi"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/sqlstore"
)

// node is one Parley node as cmd/parley wires it (store publishing to the
// bus, the API and the gateway behind one listener), with the limits on
// signups and logins off: the tests make many accounts from one address.
type node struct {
	store parley.Store
	srv   *httptest.Server
	reg   *prometheus.Registry
}

var dialects = []sqlstore.Dialect{sqlstore.SQLite, sqlstore.Postgres}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newNode(t *testing.T, d sqlstore.Dialect) *node {
	t.Helper()
	bus, err := natsbus.Start(natsbus.Config{Logger: quietLogger()}) // embedded, no listener
	if err != nil {
		t.Fatal(err)
	}
	cfg := sqlstore.Config{Publisher: bus, Logger: quietLogger()}
	if d == sqlstore.Postgres {
		cfg.PostgresURL = testpg.New(t)
	} else {
		cfg.Path = filepath.Join(t.TempDir(), "parley.db")
	}
	st, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		bus.Close()
		t.Fatalf("open %s store: %v", d, err)
	}
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(gateway.Config{Store: st, Bus: bus, NodeID: "n1", Logger: quietLogger(), Partitions: 2, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	storage, err := files.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server := httpapi.New(httpapi.Config{Store: st, Exporter: st, Directory: st.Directory(), Integrations: st, Logger: quietLogger(), Registerer: reg,
		Rates: parley.LiveRatesOff(), Files: files.New(files.Config{Storage: storage, Store: st, Logger: quietLogger()})})
	// As cmd/parley routes: the gateway's path to the gateway, the rest to
	// the API as sent (no ServeMux in front to clean paths).
	api := server.Handler()
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == httpapi.Prefix+"/gateway" {
			gw.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
	n := &node{store: st, srv: httptest.NewServer(root), reg: reg}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
		n.srv.Close()
		st.Close()
		bus.Close()
	})
	return n
}

// checkNoPanics fails if the node recovered from a panic anywhere
// (parley_panics_total): a recovered panic is still a defect.
func (n *node) checkNoPanics(t *testing.T) {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "parley_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("parley_panics_total%v = %v", m.GetLabel(), v)
			}
		}
	}
}

var seq atomic.Int64

func uniq() string { return fmt.Sprintf("%06d", seq.Add(1)) }

// passwordHash is one argon2id hash for every account (it is slow by
// design).
var passwordHash = sync.OnceValue(func() string {
	h, err := auth.HashPassword("correct horse battery")
	if err != nil {
		panic(err)
	}
	return h
})

// user is an account made through the store, with a session token.
type user struct {
	*parley.User
	Token  string
	Client *client.Client
}

func (n *node) mustUser(t *testing.T, name string) *user {
	t.Helper()
	ctx := context.Background()
	h := name + "-" + uniq()
	u, err := n.store.CreateUser(ctx, parley.NewUser{Email: h + "@example.com", Name: name, Handle: h, PasswordHash: passwordHash()})
	if err != nil {
		t.Fatalf("create user: %v", err)
	}
	return &user{User: u, Token: n.mustToken(t, u.ID), Client: nil}
}

// mustToken stores a new session for userID and returns its token.
func (n *node) mustToken(t *testing.T, userID string) string {
	t.Helper()
	token, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := n.store.CreateSession(context.Background(), parley.Session{
		TokenHash: hash, UserID: userID, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return token
}

// clientFor returns a Go client of the node signed in with a fresh token of
// u (one token per session, as separate devices have).
func (n *node) clientFor(t *testing.T, u *user) *client.Client {
	t.Helper()
	return client.New(n.srv.URL, client.WithToken(n.mustToken(t, u.ID)), client.WithHTTPClient(n.srv.Client()),
		client.WithLogger(quietLogger()))
}

// fixture is a workspace with an owner, a second member, a public channel
// holding a message, and an invite code.
type fixture struct {
	owner, member *user
	ws            *parley.Workspace
	ch            *parley.Channel
	msg           *parley.Message
	invite        string
}

func (n *node) mustFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	fx := &fixture{owner: n.mustUser(t, "owner"), member: n.mustUser(t, "member")}
	var err error
	s := uniq()
	if fx.ws, err = n.store.CreateWorkspace(ctx, fx.owner.ID, "Team "+s, "team-"+s); err != nil {
		t.Fatal(err)
	}
	inv, err := n.store.CreateInvite(ctx, fx.owner.ID, fx.ws.ID, parley.InviteParams{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.AcceptInvite(ctx, fx.member.ID, inv.Code); err != nil {
		t.Fatal(err)
	}
	fx.invite = inv.Code
	if fx.ch, err = n.store.CreateChannel(ctx, fx.owner.ID, fx.ws.ID, parley.NewChannel{Name: "fixture-" + s, Kind: parley.KindPublic}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.AddMembers(ctx, fx.owner.ID, fx.ch.ID, []string{fx.member.ID}); err != nil {
		t.Fatal(err)
	}
	if fx.msg, _, err = n.store.PostMessage(ctx, fx.owner.ID, fx.ch.ID, parley.NewMessage{Text: "root"}); err != nil {
		t.Fatal(err)
	}
	return fx
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
