package tenantdir

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// dir is a directory on one NATS server: a catalogue, its relay, an API
// projection and one replica per region, all sharing chaos.
type dir struct {
	url   string
	n     NATS
	cat   *Catalogue
	relay *Relay
	chaos *Chaos
}

func newDir(t testing.TB, regions ...string) *dir {
	t.Helper()
	d := &dir{url: mustServer(t), chaos: &Chaos{}}
	d.n = NATS{Conn: mustConn(t, d.url), Prefix: "parley.", Stream: "TD"}
	d.cat = mustCatalogue(t, CatalogueConfig{Path: filepath.Join(t.TempDir(), "control.db")})
	var err error
	if d.relay, err = NewRelay(context.Background(), RelayConfig{Catalogue: d.cat, NATS: d.n}); err != nil {
		t.Fatal(err)
	}
	d.cat.SetOnChange(d.relay.Kick)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.relay.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, region := range regions {
		// Each region's replica on a connection of its own, as on its own
		// node.
		rn := d.n
		rn.Conn = mustConn(t, d.url)
		p, err := StartProjection(context.Background(), ProjectionConfig{NATS: rn, Audience: AudienceAPI, Chaos: d.chaos})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		r, err := StartReplica(ReplicaConfig{NATS: rn, Projection: p, Region: region, Chaos: d.chaos})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Stop() })
		<-p.Ready()
	}
	for _, region := range regions {
		mustDo(t, second(d.cat.AddShard(context.Background(), Shard{ID: region + "1", Region: region, DSN: "dsn-" + region})))
	}
	return d
}

// place places a workspace and waits until every replica has it.
func (d *dir) place(t testing.TB, ws, region string) Record {
	t.Helper()
	r, err := d.cat.Place(context.Background(), Placement{WorkspaceID: ws, Region: region})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// client is a node's client on a connection of its own.
func (d *dir) client(t testing.TB, cfg ClientConfig) (*Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.NATS = d.n
	cfg.NATS.Conn = mustConn(t, d.url)
	cfg.Audience, cfg.Registerer = AudienceAPI, reg
	if cfg.Chaos == nil {
		cfg.Chaos = d.chaos
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, reg
}

// lookupEventually retries until the replicas have the workspace (the
// relay publishes after the commit).
func lookupEventually(t testing.TB, c *Client, ws string) Record {
	t.Helper()
	var rec Record
	waitFor(t, 10*time.Second, "workspace "+ws+" in the directory", func() bool {
		r, err := c.Lookup(context.Background(), ws)
		rec = r
		return err == nil
	})
	return rec
}

func TestClientOneLoadUnderConcurrency(t *testing.T) {
	d := newDir(t, "eu")
	d.place(t, "w", "eu")
	// Wait for the replica through another client, so that the one under
	// test starts cold.
	warm, _ := d.client(t, ClientConfig{Regions: []string{"eu"}})
	lookupEventually(t, warm, "w")

	c, reg := d.client(t, ClientConfig{Regions: []string{"eu"}})
	const n = 200
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			<-start
			r, err := c.Lookup(context.Background(), "w")
			if err == nil && r.ShardID != "eu1" {
				err = fmt.Errorf("shard %s", r.ShardID)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if loads := counter(t, reg, "parley_tenantdir_loads_total"); loads != 1 {
		t.Fatalf("%v loads for %d concurrent lookups of one key, want 1", loads, n)
	}
	if reqs := counter(t, reg, "parley_tenantdir_replica_requests_total"); reqs != 1 {
		t.Fatalf("%v replica requests, want 1", reqs)
	}
	if got := counter(t, reg, "parley_tenantdir_lookups_total"); got != n {
		t.Fatalf("lookups counted %v, want %d", got, n)
	}
}

func TestClientNoStampedeAfterExpiry(t *testing.T) {
	d := newDir(t, "eu")
	d.place(t, "w", "eu")
	c, reg := d.client(t, ClientConfig{Regions: []string{"eu"}, TTL: 50 * time.Millisecond, RefreshAfter: time.Hour})
	lookupEventually(t, c, "w")
	before := counter(t, reg, "parley_tenantdir_loads_total")
	waitFor(t, 5*time.Second, "the entry to expire", func() bool { _, ok := c.cache.GetEntryQuietly("w"); return !ok })
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 100 {
		wg.Go(func() {
			<-start
			if _, err := c.Lookup(context.Background(), "w"); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	// The 50 ms TTL may pass again while the 100 run on a slow machine;
	// each expiry allows one load, never one per caller.
	if loads := counter(t, reg, "parley_tenantdir_loads_total") - before; loads < 1 || loads > 3 {
		t.Fatalf("%v loads after expiry for 100 concurrent lookups", loads)
	}
}

func TestClientRefreshAhead(t *testing.T) {
	d := newDir(t, "eu")
	d.place(t, "w", "eu")
	c, reg := d.client(t, ClientConfig{Regions: []string{"eu"}, RefreshAfter: 20 * time.Millisecond})
	lookupEventually(t, c, "w")
	base := counter(t, reg, "parley_tenantdir_loads_total")
	// Lookups keep answering from the cache (never a miss) while the
	// entry is reloaded in the background.
	misses := counter(t, reg, "parley_tenantdir_lookups_total", "result", "miss")
	waitFor(t, 10*time.Second, "a background refresh", func() bool {
		if _, err := c.Lookup(context.Background(), "w"); err != nil {
			t.Fatal(err)
		}
		return counter(t, reg, "parley_tenantdir_loads_total") > base
	})
	if m := counter(t, reg, "parley_tenantdir_lookups_total", "result", "miss"); m != misses {
		t.Fatalf("refresh-ahead missed %v times", m-misses)
	}
}

func TestClientInvalidationAcrossThreeNodes(t *testing.T) {
	d := newDir(t, "eu")
	mustDo(t, second(d.cat.AddShard(context.Background(), Shard{ID: "eu2", Region: "eu", DSN: "dsn-eu2"})))
	r := d.place(t, "w", "eu")
	var clients []*Client
	var regs []*prometheus.Registry
	var warm []float64 // each client's loads once it has the record
	for range 3 {
		c, reg := d.client(t, ClientConfig{Regions: []string{"eu"}})
		lookupEventually(t, c, "w")
		clients, regs = append(clients, c), append(regs, reg)
		warm = append(warm, counter(t, reg, "parley_tenantdir_loads_total", "result", "ok"))
	}
	to := "eu2"
	if r.ShardID == "eu2" {
		to = "eu1"
	}
	mustDo(t, second(d.cat.BeginMove(context.Background(), "w", to)))
	moved, err := d.cat.CompleteMove(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		waitFor(t, 5*time.Second, fmt.Sprintf("client %d to hear of the move", i), func() bool {
			got, err := c.Lookup(context.Background(), "w")
			return err == nil && got.Version == moved.Version && got.ShardID == to
		})
		// Heard on the bus, not reloaded: no load since the client had
		// the record. (How it got the record first is not what this test
		// measures; TestClientOneLoadUnderConcurrency counts those loads.)
		if loads := counter(t, regs[i], "parley_tenantdir_loads_total", "result", "ok"); loads != warm[i] {
			t.Errorf("client %d loaded %v times during the move", i, loads-warm[i])
		}
		if lag := counter(t, regs[i], "parley_tenantdir_invalidation_lag_seconds"); lag < 2 {
			t.Errorf("client %d observed %v invalidation lags, want 2 (begin, complete)", i, lag)
		}
	}
}

func TestClientRacesRegions(t *testing.T) {
	d := newDir(t, "eu", "us")
	d.place(t, "w", "eu")
	warm, _ := d.client(t, ClientConfig{Regions: []string{"eu", "us"}})
	lookupEventually(t, warm, "w")
	for _, off := range []string{"eu", "us"} {
		t.Run(off+" off", func(t *testing.T) {
			d.chaos.SetRegionOff(off, true)
			defer d.chaos.SetRegionOff(off, false)
			c, reg := d.client(t, ClientConfig{Regions: []string{"eu", "us"}, RequestTimeout: 5 * time.Second})
			start := time.Now()
			r, err := c.Lookup(context.Background(), "w")
			if err != nil || r.ShardID != "eu1" {
				t.Fatalf("lookup with %s off: %+v %v", off, r, err)
			}
			// The answering region won without waiting out the dead one.
			if took := time.Since(start); took >= 5*time.Second {
				t.Fatalf("lookup waited %v for the region that is off", took)
			}
			on := map[string]string{"eu": "us", "us": "eu"}[off]
			if ok := counter(t, reg, "parley_tenantdir_replica_requests_total", "region", on, "result", "ok"); ok != 1 {
				t.Fatalf("region %s answered %v times", on, ok)
			}
		})
	}
}

func TestClientLastKnownGood(t *testing.T) {
	d := newDir(t, "eu", "us")
	d.place(t, "w", "eu")
	c, reg := d.client(t, ClientConfig{Regions: []string{"eu", "us"}, RequestTimeout: 100 * time.Millisecond,
		StaleRetry: 20 * time.Millisecond})
	good := lookupEventually(t, c, "w")

	d.chaos.SetRegionOff("eu", true)
	d.chaos.SetRegionOff("us", true)
	c.Invalidate("w")
	got, err := c.Lookup(context.Background(), "w")
	if err != nil || got.Version != good.Version {
		t.Fatalf("lookup with every region off: %+v %v, want the last good record", got, err)
	}
	if stale := counter(t, reg, "parley_tenantdir_stale_serves_total"); stale < 1 {
		t.Fatal("a stale serve was not counted")
	}
	// With nothing known, total failure is EUNAVAILABLE, not a wrong
	// answer.
	if _, err := c.Lookup(context.Background(), "never-seen"); parley.ErrorCode(err) != parley.EUNAVAILABLE {
		t.Fatalf("unknown workspace with every region off: %v", err)
	}

	// Back on: the background retry replaces the stale entry.
	d.chaos.SetRegionOff("eu", false)
	d.chaos.SetRegionOff("us", false)
	okBefore := counter(t, reg, "parley_tenantdir_loads_total", "result", "ok")
	waitFor(t, 10*time.Second, "a fresh load", func() bool {
		c.Lookup(context.Background(), "w")
		return counter(t, reg, "parley_tenantdir_loads_total", "result", "ok") > okBefore
	})
	staleAfter := counter(t, reg, "parley_tenantdir_stale_serves_total")
	c.Lookup(context.Background(), "w")
	if s := counter(t, reg, "parley_tenantdir_stale_serves_total"); s != staleAfter {
		t.Fatalf("still serving stale after the regions came back")
	}
}

func TestClientNotFound(t *testing.T) {
	d := newDir(t, "eu", "us")
	c, _ := d.client(t, ClientConfig{Regions: []string{"eu", "us"}})
	if _, err := c.Lookup(context.Background(), "nobody"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("unknown workspace: %v", err)
	}
}

func TestLookupLatencyChaos(t *testing.T) {
	d := newDir(t, "eu")
	d.place(t, "w", "eu")
	chaos := &Chaos{}
	c, _ := d.client(t, ClientConfig{Regions: []string{"eu"}, Chaos: chaos})
	lookupEventually(t, c, "w")
	const lat = 50 * time.Millisecond
	chaos.SetLookupLatency(lat, 1)
	start := time.Now()
	if _, err := c.Lookup(context.Background(), "w"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < lat {
		t.Fatalf("lookup took %v with %v of chaos latency on every lookup", took, lat)
	}
	chaos.SetLookupLatency(lat, 0)
	if d := chaos.lookupDelay(); d != 0 {
		t.Fatalf("fraction 0 still delays (%v)", d)
	}
}

// TestClientForgetsUnplaced: a client holding a workspace's record hears
// its removal and answers not_found, with no stale serve of the old
// record; a replica asked afterwards says not_found too.
func TestClientForgetsUnplaced(t *testing.T) {
	d := newDir(t, "eu")
	rec := d.place(t, "w", "eu")
	c, reg := d.client(t, ClientConfig{Regions: []string{"eu"}})
	lookupEventually(t, c, "w")
	mustDo(t, second(d.cat.Unplace(context.Background(), "w", rec.ShardID)))
	waitFor(t, 5*time.Second, "the client to forget the workspace", func() bool {
		_, err := c.Lookup(context.Background(), "w")
		return parley.ErrorCode(err) == parley.ENOTFOUND
	})
	if n := counter(t, reg, "parley_tenantdir_stale_serves_total"); n != 0 {
		t.Fatalf("%v stale serves", n)
	}
	// A new client loads it from the replica: not_found, once the
	// replica's projection has applied the removal (clients hear a change
	// as the relay publishes it; a projection applies it from its stream
	// consumer, which can be a moment behind).
	c2, _ := d.client(t, ClientConfig{Regions: []string{"eu"}})
	waitFor(t, 5*time.Second, "the replica to answer not_found", func() bool {
		c2.Invalidate("w")
		_, err := c2.Lookup(context.Background(), "w")
		return parley.ErrorCode(err) == parley.ENOTFOUND
	})
}

// TestClientOnChange: OnChange hears each change of a workspace once the
// cache has it (an override turned off here), and a change older than one
// heard already (a late duplicate on the bus) is neither applied again
// nor passed on.
func TestClientOnChange(t *testing.T) {
	d := newDir(t, "eu")
	d.place(t, "w", "eu")
	c, _ := d.client(t, ClientConfig{Regions: []string{"eu"}})
	first := lookupEventually(t, c, "w")
	heard := make(chan Record, 16)
	c.OnChange(func(r Record) { heard <- r })

	off, err := d.cat.SetOverrides(context.Background(), "w", nil, map[string]bool{"integrations": false})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-heard:
		if r.WorkspaceID != "w" || r.Version != off.Version || r.Features["integrations"] {
			t.Fatalf("OnChange got %+v, want version %d with integrations off", r, off.Version)
		}
		if got, err := c.Lookup(context.Background(), "w"); err != nil || got.Version != off.Version {
			t.Fatalf("after OnChange, Lookup = %+v %v: the cache should have the change", got, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnChange heard nothing")
	}

	// The placement's change again, late: older than what was heard.
	stale, err := json.Marshal(Change{Seq: first.Version, Kind: KindWorkspace, Workspace: &first})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.n.Conn.Publish(d.n.changeSubject(AudienceAPI, KindWorkspace, "w"), stale); err != nil {
		t.Fatal(err)
	}
	// A newer change after it: when it is heard, the stale one (published
	// before it on the same connection) was heard too.
	on, err := d.cat.SetOverrides(context.Background(), "w", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-heard:
		if r.Version != on.Version {
			t.Fatalf("OnChange got version %d, want only the newer %d", r.Version, on.Version)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnChange did not hear the newer change")
	}
	if got, err := c.Lookup(context.Background(), "w"); err != nil || got.Version != on.Version {
		t.Fatalf("Lookup = %+v %v, want version %d", got, err, on.Version)
	}
	c.OnChange(nil)
}
