package shardstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"parley"
	"parley/shardstore"
	"parley/sqlstore"
	"parley/storetest"
)

// blockingSink is an export sink that stops at the first channel until
// release is closed: an export in flight.
type blockingSink struct {
	exportSink
	running chan struct{}
	release chan struct{}
}

func (s *blockingSink) Channel(ch *parley.ExportChannel) error {
	if len(s.channels) == 0 {
		close(s.running)
		<-s.release
	}
	return s.exportSink.Channel(ch)
}

// TestShardDSNChange: a shard's DSN changed in the catalogue
// (Catalogue.SetShardDSN, what `parley shards set` does) takes effect
// without a restart: new calls about its workspaces go to the new
// database, an id the old one lacked and the new one has is found (the
// negative cache is dropped), and the old store is closed only once the
// call still running on it (an export) has returned, having read the old
// database to the end.
func TestShardDSNChange(t *testing.T) {
	c := newClusterN(t, &storetest.Recorder{}, 2, func(cfg *shardstore.Config) {
		cfg.ShardListTTL = 50 * time.Millisecond
		cfg.NegativeTTL = time.Hour // only the list's change may drop an entry
	})
	r, ctx := c.r, bg()
	owner := storetest.MustUser(t, r, "owner")
	var w *parley.Workspace
	for w == nil {
		ws := storetest.MustWorkspace(t, r, owner)
		if c.shardOf(t, ws.ID) == c.shards[1] {
			w = ws
		}
	}
	oldDSN := c.dsns[1]
	before := storetest.MustChannel(t, r, w, owner, "before", parley.KindPublic)
	storetest.MustPost(t, r, owner, before, "in the old database")

	// The new database: the same workspace (as a restore or a copy would
	// have it) with a channel the old one has not got.
	newDSN := shardDB(t)
	st, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: newDSN})
	storetest.NoErr(t, err)
	defer st.Close()
	def, err := r.Shard(ctx, c.shards[0])
	storetest.NoErr(t, err)
	u, err := def.ReadUserCopy(ctx, owner.ID)
	storetest.NoErr(t, err)
	storetest.NoErr(t, st.PutUserCopy(ctx, u))
	_, err = st.CreateWorkspaceWithID(ctx, w.ID, owner.ID, w.Name, w.Slug)
	storetest.NoErr(t, err)
	onlyNew, err := st.CreateChannel(ctx, owner.ID, w.ID, parley.NewChannel{Name: "only-new", Kind: parley.KindPublic})
	storetest.NoErr(t, err)

	_, err = r.GetChannel(ctx, owner.ID, onlyNew.ID)
	storetest.Code(t, err, parley.ENOTFOUND) // remembered as unknown

	// An export in flight on the old store.
	sink := &blockingSink{running: make(chan struct{}), release: make(chan struct{})}
	exported := make(chan error, 1)
	go func() {
		exported <- r.ExportWorkspace(context.Background(), owner.ID, w.ID, parley.ExportOptions{}, sink)
	}()
	select {
	case <-sink.running:
	case err := <-exported:
		t.Fatalf("the export ended early: %v", err)
	}

	if _, err := c.dir.cat.SetShardDSN(ctx, c.shards[1], newDSN); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "calls to go to the new database", func() bool {
		page, err := r.ListChannels(ctx, owner.ID, w.ID, parley.ChannelQuery{})
		if err != nil {
			return false
		}
		for _, ch := range page.Channels {
			if ch.ID == onlyNew.ID {
				return true
			}
		}
		return false
	})
	got, err := r.GetChannel(ctx, owner.ID, onlyNew.ID)
	storetest.NoErr(t, err)
	if got.Name != "only-new" {
		t.Fatalf("channel = %+v", got)
	}
	created := storetest.MustChannel(t, r, w, owner, "created-after", parley.KindPublic)
	if n := channelsIn(t, newDSN, created.ID); n != 1 {
		t.Fatalf("the channel created after the change is %d times in the new database, want 1", n)
	}
	if n := channelsIn(t, oldDSN, created.ID); n != 0 {
		t.Fatalf("the channel created after the change is %d times in the old database, want 0", n)
	}

	// The old store stays open while the export runs, which reads the old
	// database to the end.
	retired := func() float64 { return counterValue(t, c.reg, "parley_shardstore_shard_stores_retired_total") }
	if n := retired(); n != 0 {
		t.Fatalf("%v stores retired while an export runs on the old one", n)
	}
	close(sink.release)
	storetest.NoErr(t, <-exported)
	if len(sink.messages) != 1 || sink.messages[0] != "in the old database" {
		t.Fatalf("export from the old database = %+v", sink.exportSink)
	}
	waitFor(t, 10*time.Second, "the old store to close", func() bool { return retired() == 1 })
	if n := labelled(t, c, "parley_shardstore_shard_stores_retired_total", "result", "drained"); n != 1 {
		t.Fatalf("the old store closed with calls running (drained = %v)", n)
	}
}

// channelsIn counts the channels with that id in one database.
func channelsIn(t *testing.T, dsn, id string) int {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(bg(), `SELECT COUNT(*) FROM channels WHERE id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// labelled sums a counter's series whose label has that value.
func labelled(t *testing.T, c *cluster, name, label, value string) float64 {
	t.Helper()
	mfs, err := c.reg.Gather()
	storetest.NoErr(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
