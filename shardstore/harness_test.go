package shardstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/shardstore"
	"parley/sqlstore"
	"parley/tenantdir"
)

// Each test gets a real tenant directory of its own (an embedded NATS with
// JetStream and no listener, a catalogue on SQLite, its relay, the api
// projection and its replica, and an api-audience client) and three fresh
// PostgreSQL databases as its shards.

type directory struct {
	cat    *tenantdir.Catalogue
	client *tenantdir.Client
}

var (
	tmplMu sync.Mutex
	tmpl   string // a migrated database that new shards copy
)

// testDirectory starts a directory for tb, stopped when tb ends.
func testDirectory(tb testing.TB, region string) *directory {
	tb.Helper()
	tmp := tb.TempDir()
	b, err := natsbus.Start(natsbus.Config{JetStreamDir: filepath.Join(tmp, "js"), Name: "shardstore-test"})
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	nc := tenantdir.NATS{Conn: b.Conn(), Prefix: b.SubjectPrefix()}
	ctx := context.Background()
	d := &directory{}
	if d.cat, err = tenantdir.OpenCatalogue(ctx, tenantdir.CatalogueConfig{Path: filepath.Join(tmp, "control.db")}); err != nil {
		tb.Fatalf("open catalogue: %v", err)
	}
	tb.Cleanup(func() { d.cat.Close() })
	reg := prometheus.NewRegistry()
	relay, err := tenantdir.NewRelay(ctx, tenantdir.RelayConfig{Catalogue: d.cat, NATS: nc, Registerer: reg})
	if err != nil {
		tb.Fatalf("relay: %v", err)
	}
	d.cat.SetOnChange(relay.Kick)
	rctx, stop := context.WithCancel(ctx)
	relayed := make(chan struct{})
	go func() { defer close(relayed); relay.Run(rctx) }()
	tb.Cleanup(func() { stop(); <-relayed })
	p, err := tenantdir.StartProjection(ctx, tenantdir.ProjectionConfig{NATS: nc, Audience: tenantdir.AudienceAPI})
	if err != nil {
		tb.Fatalf("projection: %v", err)
	}
	tb.Cleanup(p.Stop)
	rep, err := tenantdir.StartReplica(tenantdir.ReplicaConfig{NATS: nc, Projection: p, Region: region})
	if err != nil {
		tb.Fatalf("replica: %v", err)
	}
	tb.Cleanup(func() { rep.Stop() })
	if d.client, err = tenantdir.NewClient(tenantdir.ClientConfig{NATS: nc, Audience: tenantdir.AudienceAPI,
		Regions: []string{region}, Registerer: reg}); err != nil {
		tb.Fatalf("client: %v", err)
	}
	tb.Cleanup(func() { d.client.Close() })
	return d
}

// shardDB returns a fresh database for a shard, copied from a migrated
// template (migrating three databases per test would take most of the
// suite's time); it is dropped when tb ends.
func shardDB(tb testing.TB) string {
	tb.Helper()
	tmplMu.Lock()
	if tmpl == "" {
		name := "parley_shardtmpl_" + randHex()
		u := createDB(tb, name, "")
		s, err := sqlstore.Open(context.Background(), sqlstore.Config{PostgresURL: u})
		if err != nil {
			tmplMu.Unlock()
			tb.Fatalf("migrate template: %v", err)
		}
		s.Close()
		tmpl = name
	}
	t := tmpl
	tmplMu.Unlock()
	name := "parley_test_" + randHex()
	u := createDB(tb, name, t)
	tb.Cleanup(func() { dropDB(tb, name) })
	return u
}

func randHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func admin(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := sql.Open("pgx", testpg.ServerURL())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		testpg.New(tb) // skips, or fails under CI, as every PostgreSQL test does
		tb.Fatalf("PostgreSQL: %v", err)
	}
	return db
}

func createDB(tb testing.TB, name, template string) string {
	tb.Helper()
	db := admin(tb)
	defer db.Close()
	q := "CREATE DATABASE " + name
	if template != "" {
		q += " TEMPLATE " + template
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var err error
	for range 50 { // a template being copied by another test is "in use"
		if _, err = db.ExecContext(ctx, q); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("create database: %v", err)
	}
	u, err := url.Parse(testpg.ServerURL())
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func dropDB(tb testing.TB, name string) {
	db, err := sql.Open("pgx", testpg.ServerURL())
	if err != nil {
		tb.Errorf("drop %s: %v", name, err)
		return
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		tb.Errorf("drop test database %s: %v", name, err)
	}
}

// cluster is one test's router over its three shards.
type cluster struct {
	r      *shardstore.Router
	region string
	shards []string // ids; shards[0] is the default
	dsns   []string
	reg    *prometheus.Registry
	dir    *directory
}

// newCluster opens three shards and a router over them whose stores
// publish to pub.
func newCluster(tb testing.TB, pub parley.EventPublisher) *cluster {
	tb.Helper()
	return newClusterN(tb, pub, 3)
}

// newClusterN is newCluster with n shards.
func newClusterN(tb testing.TB, pub parley.EventPublisher, n int) *cluster {
	tb.Helper()
	c := &cluster{region: "r" + randHex(), reg: prometheus.NewRegistry()}
	d := testDirectory(tb, c.region)
	c.dir = d
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("%s-%c", c.region, 'a'+i)
		dsn := shardDB(tb)
		if _, err := d.cat.AddShard(ctx, tenantdir.Shard{ID: id, Region: c.region, DSN: dsn, Capacity: 1000}); err != nil {
			tb.Fatalf("add shard: %v", err)
		}
		c.shards, c.dsns = append(c.shards, id), append(c.dsns, dsn)
	}
	live := parley.StaticConfig(parley.DefaultLiveConfig())
	base := sqlstore.Config{Publisher: pub, LiveConfig: live}
	def, err := shardstore.OpenShard(ctx, base, c.dsns[0])
	if err != nil {
		tb.Fatalf("open default shard: %v", err)
	}
	r, err := shardstore.New(shardstore.Config{Default: def, DefaultShard: c.shards[0], Directory: d.client,
		Catalogue: d.cat, Region: c.region, Live: live, Registerer: c.reg,
		Open: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			return shardstore.OpenShard(ctx, base, dsn)
		}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := r.Close(); err != nil {
			tb.Errorf("close router: %v", err)
		}
		if err := def.Close(); err != nil {
			tb.Errorf("close default shard: %v", err)
		}
	})
	c.r = r
	return c
}

// shardOf returns the shard the directory holds ws on.
func (c *cluster) shardOf(tb testing.TB, ws string) string {
	tb.Helper()
	rec, err := c.dir.cat.Workspace(context.Background(), ws)
	if err != nil {
		tb.Fatalf("workspace %s: %v", ws, err)
	}
	return rec.ShardID
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
