package tenantdir

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// setup is a catalogue on SQLite, a relay and the bus it publishes on.
func setup(t *testing.T) (*Catalogue, *Relay, NATS) {
	t.Helper()
	n, _ := mustBus(t)
	cat := mustCatalogue(t, CatalogueConfig{Path: filepath.Join(t.TempDir(), "control.db")})
	r, err := NewRelay(context.Background(), RelayConfig{Catalogue: cat, NATS: n})
	if err != nil {
		t.Fatal(err)
	}
	cat.SetOnChange(r.Kick)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return cat, r, n
}

// churn makes a catalogue with shards in two regions and workspaces that
// were moved, frozen and given overrides.
func churn(t *testing.T, cat *Catalogue) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []Shard{{ID: "eu1", Region: "eu", DSN: "postgres://u:secret-eu1@db1/p"},
		{ID: "eu2", Region: "eu", DSN: "postgres://u:secret-eu2@db2/p"}, {ID: "us1", Region: "us", DSN: "postgres://u:secret-us1@db3/p"}} {
		if _, err := cat.AddShard(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		region := "eu"
		if i%3 == 0 {
			region = "us"
		}
		if _, err := cat.Place(ctx, Placement{WorkspaceID: fmt.Sprintf("w%02d", i), Region: region,
			Limits: map[string]int64{"members": int64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	mustDo(t, second(cat.BeginMove(ctx, "w01", "eu2")))
	mustDo(t, second(cat.Freeze(ctx, "w01")))
	mustDo(t, second(cat.CompleteMove(ctx, "w01")))
	mustDo(t, second(cat.BeginMove(ctx, "w02", "eu1")))
	mustDo(t, second(cat.Freeze(ctx, "w04")))
	mustDo(t, second(cat.SetOverrides(ctx, "w05", nil, map[string]bool{"file_uploads": false})))
	mustDo(t, second(cat.DrainShard(ctx, "eu1")))
	// A placement whose creation failed, removed: a tombstone in the log.
	gone, err := cat.Place(ctx, Placement{WorkspaceID: "gone", Region: "eu", Slug: "gone"})
	mustDo(t, err)
	mustDo(t, second(cat.Unplace(ctx, "gone", gone.ShardID)))
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// want is the catalogue as aud may see it.
func want(t *testing.T, cat *Catalogue, aud Audience) []Record {
	t.Helper()
	recs, err := cat.Workspaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		recs[i] = recs[i].ForAudience(aud)
	}
	return recs
}

func TestProjectionReplayRebuildsCatalogue(t *testing.T) {
	cat, relay, n := setup(t)
	churn(t, cat)
	if _, err := relay.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, aud := range Audiences {
		t.Run(string(aud), func(t *testing.T) {
			// A projection started after every change replays the whole
			// stream and ends up identical to the catalogue.
			p, err := StartProjection(context.Background(), ProjectionConfig{NATS: n, Audience: aud})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			<-p.Ready()
			got, exp := p.Workspaces(), want(t, cat, aud)
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("projection differs from the catalogue:\n got %+v\nwant %+v", got, exp)
			}
			shards, err := cat.ListShards(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ps := p.Shards()
			if len(ps) != len(shards) {
				t.Fatalf("%d shards projected, want %d", len(ps), len(shards))
			}
			for i := range ps {
				s := shards[i].ForAudience(aud)
				s.Workspaces = 0
				if !reflect.DeepEqual(ps[i], s) {
					t.Fatalf("shard %+v, want %+v", ps[i], s)
				}
			}
		})
	}
	if _, pending, err := cat.ChangeCount(context.Background()); err != nil || pending != 0 {
		t.Fatalf("%d changes still pending (%v)", pending, err)
	}
}

func TestProjectionFollowsChanges(t *testing.T) {
	cat, _, n := setup(t)
	p, err := StartProjection(context.Background(), ProjectionConfig{NATS: n, Audience: AudienceEdge})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	<-p.Ready()
	churn(t, cat)
	exp := want(t, cat, AudienceEdge)
	waitFor(t, 10*time.Second, "the projection to catch up", func() bool { return reflect.DeepEqual(p.Workspaces(), exp) })
}

// TestEdgeStreamCarriesNoCredential reads every message of every stream:
// the edge audience's never holds a DSN (or any part of one); the API's
// does.
func TestEdgeStreamCarriesNoCredential(t *testing.T) {
	cat, relay, n := setup(t)
	churn(t, cat)
	if _, err := relay.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, aud := range Audiences {
		stream, err := js.Stream(ctx, n.StreamName(aud))
		if err != nil {
			t.Fatal(err)
		}
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			t.Fatalf("%s stream is empty", aud)
		}
		secrets := 0
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := stream.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(m.Data, []byte("secret-")) || bytes.Contains(m.Data, []byte(`"dsn"`)) {
				secrets++
			}
		}
		switch {
		case aud == AudienceEdge && secrets > 0:
			t.Errorf("%d edge messages carry a credential", secrets)
		case aud == AudienceAPI && secrets == 0:
			t.Errorf("no API message carries a DSN: the check would pass vacuously")
		}
	}
}

func TestIngestDelayChaos(t *testing.T) {
	cat, _, n := setup(t)
	chaos := &Chaos{}
	p, err := StartProjection(context.Background(), ProjectionConfig{NATS: n, Audience: AudienceAPI, Chaos: chaos})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	<-p.Ready()
	mustDo(t, second(cat.AddShard(context.Background(), Shard{ID: "s", Region: "eu"})))
	const delay = 300 * time.Millisecond
	chaos.SetIngestDelay(delay)
	start := time.Now()
	mustDo(t, second(cat.Place(context.Background(), Placement{WorkspaceID: "w", Region: "eu"})))
	waitFor(t, 10*time.Second, "the delayed change", func() bool { _, ok := p.Workspace("w"); return ok })
	if took := time.Since(start); took < delay {
		t.Fatalf("change applied after %v, before the %v ingestion delay", took, delay)
	}
}

// TestRelayRepublishesToEmptyStreams: the streams are derived data. A
// relay that finds them empty (a new NATS, a lost JetStream directory)
// republishes the catalogue's current state, and a projection on them
// again equals the catalogue.
func TestRelayRepublishesToEmptyStreams(t *testing.T) {
	cat, relay, _ := setup(t)
	churn(t, cat)
	if _, err := relay.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh, _ := mustBus(t)
	r2, err := NewRelay(context.Background(), RelayConfig{Catalogue: cat, NATS: fresh})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, aud := range Audiences {
		p, err := StartProjection(context.Background(), ProjectionConfig{NATS: fresh, Audience: aud})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Ready()
		got, exp := p.Workspaces(), want(t, cat, aud)
		p.Stop()
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("%s projection after a resync differs:\n got %+v\nwant %+v", aud, got, exp)
		}
	}
}
