package shardstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
	d, stop, err := startDirectory(tb.TempDir(), region)
	tb.Cleanup(stop)
	if err != nil {
		tb.Fatalf("test directory: %v", err)
	}
	return d
}

// startDirectory starts a directory in tmp; stop stops what started.
func startDirectory(tmp, region string) (d *directory, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	b, err := natsbus.Start(natsbus.Config{JetStreamDir: filepath.Join(tmp, "js"), Name: "shardstore-test"})
	if err != nil {
		return nil, stop, fmt.Errorf("start bus: %w", err)
	}
	stops = append(stops, func() { b.Close() })
	nc := tenantdir.NATS{Conn: b.Conn(), Prefix: b.SubjectPrefix()}
	ctx := context.Background()
	d = &directory{}
	if d.cat, err = tenantdir.OpenCatalogue(ctx, tenantdir.CatalogueConfig{Path: filepath.Join(tmp, "control.db")}); err != nil {
		return nil, stop, fmt.Errorf("open catalogue: %w", err)
	}
	stops = append(stops, func() { d.cat.Close() })
	reg := prometheus.NewRegistry()
	relay, err := tenantdir.NewRelay(ctx, tenantdir.RelayConfig{Catalogue: d.cat, NATS: nc, Registerer: reg})
	if err != nil {
		return nil, stop, fmt.Errorf("relay: %w", err)
	}
	d.cat.SetOnChange(relay.Kick)
	rctx, cancel := context.WithCancel(ctx)
	relayed := make(chan struct{})
	go func() { defer close(relayed); relay.Run(rctx) }()
	stops = append(stops, func() { cancel(); <-relayed })
	p, err := tenantdir.StartProjection(ctx, tenantdir.ProjectionConfig{NATS: nc, Audience: tenantdir.AudienceAPI})
	if err != nil {
		return nil, stop, fmt.Errorf("projection: %w", err)
	}
	stops = append(stops, p.Stop)
	rep, err := tenantdir.StartReplica(tenantdir.ReplicaConfig{NATS: nc, Projection: p, Region: region})
	if err != nil {
		return nil, stop, fmt.Errorf("replica: %w", err)
	}
	stops = append(stops, func() { rep.Stop() })
	if d.client, err = tenantdir.NewClient(tenantdir.ClientConfig{NATS: nc, Audience: tenantdir.AudienceAPI,
		Regions: []string{region}, Registerer: reg}); err != nil {
		return nil, stop, fmt.Errorf("client: %w", err)
	}
	stops = append(stops, func() { d.client.Close() })
	return d, stop, nil
}

// shared is the three-shard fixture most tests use: one directory and
// three databases for the whole package, emptied (every table truncated)
// before each test. A test's workspaces are new ids placed by the
// catalogue, whose loads stay within one of each other, so two
// consecutive placements are on two shards.
var shared struct {
	once   sync.Once
	err    error
	dir    *directory
	stop   func()
	region string
	shards []string
	dsns   []string
}

func sharedShards(tb testing.TB) {
	tb.Helper()
	shared.once.Do(func() {
		tmp, err := os.MkdirTemp("", "shardstore-test-")
		if err != nil {
			shared.err = err
			return
		}
		shared.region = "test"
		shared.dir, shared.stop, shared.err = startDirectory(tmp, shared.region)
		prev := shared.stop
		shared.stop = func() { prev(); os.RemoveAll(tmp) }
		if shared.err != nil {
			return
		}
		for i := range 3 {
			name := "parley_test_" + randHex()
			dsn := createDB(tb, name, migratedTemplate(tb))
			dropAtExit = append(dropAtExit, name)
			id := fmt.Sprintf("s%c", 'a'+i)
			if _, err := shared.dir.cat.AddShard(context.Background(), tenantdir.Shard{ID: id, Region: shared.region, DSN: dsn, Capacity: 1_000_000}); err != nil {
				shared.err = err
				return
			}
			shared.shards, shared.dsns = append(shared.shards, id), append(shared.dsns, dsn)
		}
	})
	if shared.err != nil {
		tb.Fatalf("shared shards: %v", shared.err)
	}
	for _, dsn := range shared.dsns {
		truncateAll(tb, dsn)
	}
}

// dropAtExit are databases TestMain drops after the last test.
var dropAtExit []string

// truncateAll empties every table of the store's schema but goose's.
func truncateAll(tb testing.TB, dsn string) {
	tb.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT quote_ident(tablename) FROM pg_tables
		WHERE schemaname = 'public' AND tablename NOT LIKE 'goose%'`)
	if err != nil {
		tb.Fatalf("list tables: %v", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		rows.Scan(&t)
		tables = append(tables, t)
	}
	rows.Close()
	if len(tables) == 0 {
		return
	}
	if _, err := db.ExecContext(ctx, "TRUNCATE "+strings.Join(tables, ", ")+" RESTART IDENTITY CASCADE"); err != nil {
		tb.Fatalf("truncate: %v", err)
	}
}

// shardDB returns a fresh database for a shard, copied from a migrated
// template (migrating three databases per test would take most of the
// suite's time); it is dropped when tb ends.
func shardDB(tb testing.TB) string {
	tb.Helper()
	name := "parley_test_" + randHex()
	u := createDB(tb, name, migratedTemplate(tb))
	tb.Cleanup(func() { dropLater(name) })
	return u
}

// Dropping a database takes about a second on a loaded machine, three
// per test: a goroutine drops them while the next tests run, and TestMain
// waits for the last.
var (
	drops    = make(chan string, 1024)
	dropping sync.WaitGroup
)

func dropLater(name string) {
	dropping.Add(1)
	drops <- name
}

func TestMain(m *testing.M) {
	go func() {
		for name := range drops {
			if err := dropDatabase(name); err != nil {
				fmt.Fprintf(os.Stderr, "drop test database %s: %v\n", name, err)
			}
			dropping.Done()
		}
	}()
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	for _, name := range dropAtExit {
		dropLater(name)
	}
	dropping.Wait()
	if tmpl != "" {
		if err := dropDatabase(tmpl); err != nil {
			fmt.Fprintf(os.Stderr, "drop template database %s: %v\n", tmpl, err)
		}
	}
	os.Exit(code)
}

// migratedTemplate returns the name of a migrated database to copy.
func migratedTemplate(tb testing.TB) string {
	tb.Helper()
	tmplMu.Lock()
	defer tmplMu.Unlock()
	if tmpl == "" {
		name := "parley_shardtmpl_" + randHex()
		u := createDB(tb, name, "")
		s, err := sqlstore.Open(context.Background(), sqlstore.Config{PostgresURL: u})
		if err != nil {
			tb.Fatalf("migrate template: %v", err)
		}
		s.Close()
		tmpl = name
	}
	return tmpl
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

func dropDatabase(name string) error {
	db, err := sql.Open("pgx", testpg.ServerURL())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// cluster is one test's router over its three shards.
type cluster struct {
	r      *shardstore.Router
	region string
	shards []string // ids; shards[0] is the default
	dsns   []string
	reg    *prometheus.Registry
	dir    *directory
	// placements is the router's catalogue: the directory's, recording
	// the ids it places.
	placements *placementLog
	// quietRelay gives the shards' outbox relays the longest grace, so
	// that they publish nothing again while a test runs (the store
	// contract suite counts every publish: see sqlstore's contractRelay).
	quietRelay bool
}

// newCluster opens a router over the three shared shards, emptied, whose
// stores publish to pub; opts edit the router's configuration.
func newCluster(tb testing.TB, pub parley.EventPublisher, opts ...func(*shardstore.Config)) *cluster {
	tb.Helper()
	sharedShards(tb)
	c := &cluster{region: shared.region, reg: prometheus.NewRegistry(), dir: shared.dir,
		shards: shared.shards, dsns: shared.dsns}
	return c.open(tb, pub, opts...)
}

// newClusterN opens n fresh shards with a directory of their own and a
// router over them.
func newClusterN(tb testing.TB, pub parley.EventPublisher, n int, opts ...func(*shardstore.Config)) *cluster {
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
	return c.open(tb, pub, opts...)
}

// open opens the router over c's shards.
func (c *cluster) open(tb testing.TB, pub parley.EventPublisher, opts ...func(*shardstore.Config)) *cluster {
	tb.Helper()
	ctx := context.Background()
	d := c.dir
	lc := parley.DefaultLiveConfig()
	if c.quietRelay {
		lc.RelayGraceMS = parley.MaxRelayGraceMS
	}
	live := parley.StaticConfig(lc)
	// Small pools: the suite shares the PostgreSQL server (100
	// connections) with every other package of make test.
	base := sqlstore.Config{Publisher: pub, LiveConfig: live, ReadConns: 3, WriteConns: 6, WriteLanes: 4}
	def, err := shardstore.OpenShard(ctx, base, c.dsns[0])
	if err != nil {
		tb.Fatalf("open default shard: %v", err)
	}
	c.placements = &placementLog{Catalogue: d.cat}
	cfg := shardstore.Config{Default: def, DefaultShard: c.shards[0], Directory: d.client,
		Catalogue: c.placements, Region: c.region, Live: live, Registerer: c.reg,
		Open: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			return shardstore.OpenShard(ctx, base, dsn)
		}}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := shardstore.New(cfg)
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
