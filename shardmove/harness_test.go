package shardmove

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
	"parley/tenantdir"
)

// rig is a region "eu" of two PostgreSQL shards (eu1, eu2), each with a
// real chat store, a directory (catalogue on SQLite, relay, projection,
// replica on a NATS server of the test's own) and a node's client.
type rig struct {
	cat    *tenantdir.Catalogue
	client *tenantdir.Client
	dsn    map[string]string
	stores map[string]*sqlstore.Store
	dbs    map[string]*sql.DB
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newRig(t testing.TB) *rig {
	t.Helper()
	ctx := context.Background()
	r := &rig{dsn: map[string]string{}, stores: map[string]*sqlstore.Store{}, dbs: map[string]*sql.DB{}}
	for _, id := range []string{"eu1", "eu2"} {
		r.dsn[id] = testpg.New(t)
		st, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: r.dsn[id], Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		r.stores[id] = st
		db, err := sql.Open("pgx", r.dsn[id])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		r.dbs[id] = db
	}
	cat, err := tenantdir.OpenCatalogue(ctx, tenantdir.CatalogueConfig{Path: filepath.Join(t.TempDir(), "control.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	r.cat = cat

	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	conn := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	n := tenantdir.NATS{Conn: conn(), Prefix: "parley.", Stream: "TD"}
	relay, err := tenantdir.NewRelay(ctx, tenantdir.RelayConfig{Catalogue: cat, NATS: n, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	cat.SetOnChange(relay.Kick)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	pn := n
	pn.Conn = conn()
	p, err := tenantdir.StartProjection(ctx, tenantdir.ProjectionConfig{NATS: pn, Audience: tenantdir.AudienceAPI, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	rep, err := tenantdir.StartReplica(tenantdir.ReplicaConfig{NATS: pn, Projection: p, Region: "eu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rep.Stop() })
	<-p.Ready()
	cn := n
	cn.Conn = conn()
	if r.client, err = tenantdir.NewClient(tenantdir.ClientConfig{NATS: cn, Audience: tenantdir.AudienceAPI,
		Regions: []string{"eu"}, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.client.Close() })
	for _, id := range []string{"eu1", "eu2"} {
		if _, err := cat.AddShard(ctx, tenantdir.Shard{ID: id, Region: "eu", DSN: r.dsn[id], Capacity: 100}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// place puts workspace ws on shard in the catalogue and waits until the
// client sees it.
func (r *rig) place(t testing.TB, ws, shard string) {
	t.Helper()
	if _, err := r.cat.Place(context.Background(), tenantdir.Placement{WorkspaceID: ws, Region: "eu", Shard: shard}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the client to see "+ws, func() bool {
		_, err := r.client.Lookup(context.Background(), ws)
		return err == nil
	})
}

func (r *rig) mover(t testing.TB, cfg Config) *Mover {
	t.Helper()
	cfg.Catalogue = r.cat
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// counts is the workspace's rows per table on a shard, for every table
// the shard's schema attributes to a workspace.
func counts(t testing.TB, db *sql.DB, ws string) map[string]int64 {
	return perTable(t, db, ws, count)
}

// sums is a checksum per table of the workspace's rows on a shard.
func sums(t testing.TB, db *sql.DB, ws string) map[string]string {
	return perTable(t, db, ws, tableSum)
}

// perTable runs f on every table the shard's schema attributes to a
// workspace, scoped to ws.
func perTable[T any](t testing.TB, db *sql.DB, ws string, f func(context.Context, querier, *table, scope) (T, error)) map[string]T {
	t.Helper()
	ctx := context.Background()
	s, err := loadSchema(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	j := &job{ws: ws}
	out := map[string]T{}
	for _, tb := range s.tables {
		if tb.class != byWorkspace && tb.class != byChannel && tb.class != workspaceRow {
			continue
		}
		x, err := f(ctx, db, tb, j.scopeOf(tb))
		if err != nil {
			t.Fatal(err)
		}
		out[tb.name] = x
	}
	return out
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// logEntry is one row of a channel's event log.
type logEntry struct {
	seq       int64
	typ, data string
	channelID string
	createdAt int64
}

// eventLog is the workspace's event log on a shard, per channel in seq
// order.
func eventLog(t testing.TB, db *sql.DB, ws string) map[string][]logEntry {
	t.Helper()
	rows, err := db.Query(`SELECT channel_id, seq, type, data, created_at FROM events WHERE workspace_id = $1 ORDER BY channel_id, seq`, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]logEntry{}
	for rows.Next() {
		var e logEntry
		if err := rows.Scan(&e.channelID, &e.seq, &e.typ, &e.data, &e.createdAt); err != nil {
			t.Fatal(err)
		}
		out[e.channelID] = append(out[e.channelID], e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// team is a workspace with members, channels and some history of every
// kind the store writes: posts, replies, reactions, pins, edits, a
// deletion, read markers, an invite.
type team struct {
	ws       *parley.Workspace
	owner    *parley.User
	members  []*parley.User
	channels []*parley.Channel
}

func seedTeam(t testing.TB, s parley.Store, shared *parley.User, posts int) *team {
	t.Helper()
	ctx := context.Background()
	tm := &team{owner: storetest.MustUser(t, s, "owner")}
	tm.ws = storetest.MustWorkspace(t, s, tm.owner)
	tm.members = []*parley.User{tm.owner}
	for i := range 3 {
		u := storetest.MustUser(t, s, fmt.Sprintf("member%d", i))
		storetest.MustJoinWorkspace(t, s, tm.ws, tm.owner, u)
		tm.members = append(tm.members, u)
	}
	if shared != nil {
		storetest.MustJoinWorkspace(t, s, tm.ws, tm.owner, shared)
		tm.members = append(tm.members, shared)
	}
	for i := range 3 {
		ch := storetest.MustChannel(t, s, tm.ws, tm.owner, fmt.Sprintf("room-%d", i), parley.KindPublic)
		for _, u := range tm.members[1:] {
			if _, err := s.JoinChannel(ctx, u.ID, ch.ID); err != nil {
				t.Fatal(err)
			}
		}
		tm.channels = append(tm.channels, ch)
	}
	if _, err := s.CreateInvite(ctx, tm.owner.ID, tm.ws.ID, parley.InviteParams{}); err != nil {
		t.Fatal(err)
	}
	for i := range posts {
		ch := tm.channels[i%len(tm.channels)]
		u := tm.members[i%len(tm.members)]
		text := fmt.Sprintf("post %d", i)
		if i%7 == 0 {
			text = fmt.Sprintf("@%s look at post %d", tm.members[(i+1)%len(tm.members)].Handle, i)
		}
		m := storetest.MustPost(t, s, u, ch, text)
		switch i % 10 {
		case 1:
			if _, err := s.AddReaction(ctx, tm.owner.ID, m.ID, "thumbsup"); err != nil {
				t.Fatal(err)
			}
		case 2:
			if _, err := s.Pin(ctx, tm.owner.ID, m.ID); err != nil {
				t.Fatal(err)
			}
		case 3:
			if _, _, err := s.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "a reply", ThreadRootID: m.ID}); err != nil {
				t.Fatal(err)
			}
		case 4:
			if _, err := s.EditMessage(ctx, u.ID, m.ID, text+" (edited)"); err != nil {
				t.Fatal(err)
			}
		case 5:
			if err := s.DeleteMessage(ctx, u.ID, m.ID); err != nil {
				t.Fatal(err)
			}
		case 6:
			if _, err := s.MarkRead(ctx, tm.members[1].ID, ch.ID, m.Seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tm
}

// waitFor polls cond until it holds or d passes.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
