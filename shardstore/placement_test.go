package shardstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"parley"
	"parley/shardstore"
	"parley/storetest"
	"parley/tenantdir"
)

// TestSlugRaceAcrossShards: many creations of one slug at once, through
// three routers (three nodes) over three PostgreSQL shards: exactly one
// workspace has it, on one shard and in the catalogue; every other
// creation is 409 conflict, and no placement is left behind.
func TestSlugRaceAcrossShards(t *testing.T) {
	c := newCluster(t, &storetest.Recorder{})
	routers := []*shardstore.Router{c.r}
	for range 2 {
		node := *c
		routers = append(routers, node.open(t, &storetest.Recorder{}).r)
	}
	owner := storetest.MustUser(t, c.r, "racer")
	before, err := c.dir.cat.Workspaces(bg())
	storetest.NoErr(t, err)

	const n = 15
	const slug = "one-slug"
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	won := make([]*parley.Workspace, n)
	for i := range n {
		wg.Go(func() {
			<-start
			won[i], errs[i] = routers[i%len(routers)].CreateWorkspace(bg(), owner.ID, fmt.Sprintf("Racer %d", i), slug)
		})
	}
	close(start)
	wg.Wait()
	var winner *parley.Workspace
	for i, err := range errs {
		switch {
		case err == nil:
			if winner != nil {
				t.Fatalf("two creations of slug %q won: %s and %s", slug, winner.ID, won[i].ID)
			}
			winner = won[i]
		case parley.ErrorCode(err) != parley.ECONFLICT:
			t.Fatalf("creation %d: %v, want %s", i, err, parley.ECONFLICT)
		}
	}
	if winner == nil {
		t.Fatal("no creation won")
	}

	// One shard has the slug; the catalogue holds one new entry, with it.
	holders := 0
	for _, dsn := range c.dsns {
		db, err := sql.Open("pgx", dsn)
		storetest.NoErr(t, err)
		var k int
		storetest.NoErr(t, db.QueryRowContext(bg(), `SELECT COUNT(*) FROM workspaces WHERE slug = $1`, slug).Scan(&k))
		db.Close()
		holders += k
	}
	if holders != 1 {
		t.Fatalf("%d workspaces with slug %q across the shards, want 1", holders, slug)
	}
	after, err := c.dir.cat.Workspaces(bg())
	storetest.NoErr(t, err)
	if len(after) != len(before)+1 {
		t.Fatalf("the catalogue holds %d new entries, want 1 (the winner's)", len(after)-len(before))
	}
	if s, err := c.dir.cat.Slug(bg(), winner.ID); err != nil || s != slug {
		t.Fatalf("the winner's reserved slug = %q, %v", s, err)
	}
}

// TestDeletedWorkspaceFreesSlug: as in a single database, a deleted
// workspace's slug can be taken at once by a new workspace (on whatever
// shard); while the workspace lives, it cannot.
func TestDeletedWorkspaceFreesSlug(t *testing.T) {
	c := newCluster(t, &storetest.Recorder{})
	owner := storetest.MustUser(t, c.r, "reuser")
	w, err := c.r.CreateWorkspace(bg(), owner.ID, "First", "reused")
	storetest.NoErr(t, err)
	_, err = c.r.CreateWorkspace(bg(), owner.ID, "Second", "reused")
	storetest.Code(t, err, parley.ECONFLICT)

	storetest.NoErr(t, c.r.DeleteWorkspace(bg(), owner.ID, w.ID, "reused"))
	if s, err := c.dir.cat.Slug(bg(), w.ID); err != nil || s != "" {
		t.Fatalf("deleted workspace's reserved slug = %q, %v", s, err)
	}
	w2, err := c.r.CreateWorkspace(bg(), owner.ID, "Second", "reused")
	storetest.NoErr(t, err)
	if s, _ := c.dir.cat.Slug(bg(), w2.ID); s != "reused" {
		t.Fatalf("new workspace's reserved slug = %q", s)
	}
	if got := counterValue(t, c.reg, "parley_shardstore_slug_frees_total"); got != 1 {
		t.Fatalf("slug frees = %v, want 1", got)
	}
}

// TestFailedCreationUnplaced: a creation that fails on its shard after
// the catalogue placed it leaves no entry: the catalogue and the
// directory's client answer not_found, and the slug can be used again.
func TestFailedCreationUnplaced(t *testing.T) {
	t.Run("shard refusing connections", func(t *testing.T) {
		c := newClusterN(t, &storetest.Recorder{}, 2)
		owner := storetest.MustUser(t, c.r, "owner")
		// The first workspace goes to the first shard (ties go to the
		// smaller id), so the next is placed on the second, which is down.
		w1 := storetest.MustWorkspace(t, c.r, owner)
		if got := c.shardOf(t, w1.ID); got != c.shards[0] {
			t.Fatalf("first workspace placed on %s", got)
		}
		setConnections(t, c.dsns[1], false)
		t.Cleanup(func() { setConnections(t, c.dsns[1], true) })

		_, err := c.r.CreateWorkspace(bg(), owner.ID, "Doomed", "doomed")
		if err == nil {
			t.Fatal("creation on a shard refusing connections succeeded")
		}
		// Nothing reached the shard: the placement is removed before the
		// call returns.
		recs, err := c.dir.cat.Workspaces(bg())
		storetest.NoErr(t, err)
		if len(recs) != 1 || recs[0].WorkspaceID != w1.ID {
			t.Fatalf("catalogue after the failed creation: %+v", recs)
		}
		if got := counterValue(t, c.reg, "parley_shardstore_placement_undos_total"); got != 1 {
			t.Fatalf("placement undos = %v, want 1", got)
		}
		setConnections(t, c.dsns[1], true)
		waitFor(t, 30*time.Second, "a creation of the freed slug to succeed", func() bool {
			_, err := c.r.CreateWorkspace(bg(), owner.ID, "Doomed", "doomed")
			return err == nil
		})
	})

	t.Run("creation refused by the shard", func(t *testing.T) {
		c := newClusterN(t, &storetest.Recorder{}, 2)
		owner := storetest.MustUser(t, c.r, "owner")
		for _, dsn := range c.dsns {
			execOn(t, dsn, `CREATE FUNCTION refuse_workspace() RETURNS trigger LANGUAGE plpgsql AS
				$$ BEGIN RAISE EXCEPTION 'the test refuses new workspaces'; END $$`)
			execOn(t, dsn, `CREATE TRIGGER refuse_workspace BEFORE INSERT ON workspaces
				FOR EACH ROW EXECUTE FUNCTION refuse_workspace()`)
		}
		_, err := c.r.CreateWorkspace(bg(), owner.ID, "Doomed", "doomed")
		storetest.Code(t, err, parley.EINTERNAL)
		ids := c.placements.ids()
		if len(ids) != 1 {
			t.Fatalf("placements = %v, want one", ids)
		}
		// The error may hide a commit: the router asks the shard, finds
		// no workspace, and only then removes the placement.
		waitFor(t, 30*time.Second, "the placement to be removed", func() bool {
			_, err := c.dir.cat.Workspace(bg(), ids[0])
			return parley.ErrorCode(err) == parley.ENOTFOUND
		})
		waitFor(t, 10*time.Second, "the directory to answer not_found", func() bool {
			_, err := c.dir.client.Lookup(bg(), ids[0])
			return parley.ErrorCode(err) == parley.ENOTFOUND
		})
		_, err = c.r.GetWorkspace(bg(), owner.ID, ids[0])
		storetest.Code(t, err, parley.ENOTFOUND)
		if n := counterWithLabel(t, c.reg, "parley_shardstore_placement_undos_total", "result", "ok"); n != 1 {
			t.Fatalf("placement undos ok = %v, want 1", n)
		}
		for _, dsn := range c.dsns {
			execOn(t, dsn, `DROP TRIGGER refuse_workspace ON workspaces`)
		}
		_, err = c.r.CreateWorkspace(bg(), owner.ID, "Doomed", "doomed")
		storetest.NoErr(t, err)
	})
}

// execOn runs a statement on a shard's database.
func execOn(t *testing.T, dsn, q string) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	storetest.NoErr(t, err)
	defer db.Close()
	if _, err := db.ExecContext(bg(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// counterWithLabel sums a counter vector's series whose label has value.
func counterWithLabel(t *testing.T, reg interface {
	Gather() ([]*dto.MetricFamily, error)
}, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	storetest.NoErr(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// placementLog is the test's real catalogue with a record of the
// workspace ids it placed (a failed creation returns none).
type placementLog struct {
	*tenantdir.Catalogue
	mu     sync.Mutex
	placed []string
}

func (l *placementLog) Place(ctx context.Context, p tenantdir.Placement) (tenantdir.Record, error) {
	rec, err := l.Catalogue.Place(ctx, p)
	if err == nil {
		l.mu.Lock()
		l.placed = append(l.placed, rec.WorkspaceID)
		l.mu.Unlock()
	}
	return rec, err
}

func (l *placementLog) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.placed...)
}
