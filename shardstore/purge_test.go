package shardstore_test

import (
	"database/sql"
	"testing"
	"time"

	"parley"
	"parley/purge"
	"parley/storetest"
)

// TestPurgedWorkspaceUnplaced: once a deleted workspace on a shard other
// than the default is purged (not while its shard is down), its directory
// entry is gone (the catalogue
// and the directory's client answer not_found, the router does too) and
// its slug can be taken again; a purge resumed after a restart (a new
// purger's Resume) while the shard is down ends the same way once the
// shard answers.
func TestPurgedWorkspaceUnplaced(t *testing.T) {
	for _, resumed := range []bool{false, true} {
		name := "purged at deletion"
		if resumed {
			name = "purge resumed after a restart"
		}
		t.Run(name, func(t *testing.T) {
			c := newClusterN(t, &storetest.Recorder{}, 2)
			owner := storetest.MustUser(t, c.r, "owner")
			// The first workspace goes to the default shard, the next to
			// the other one (ties go to the smaller id).
			w1 := storetest.MustWorkspace(t, c.r, owner)
			w, err := c.r.CreateWorkspace(bg(), owner.ID, "Doomed", "doomed")
			storetest.NoErr(t, err)
			if got := c.shardOf(t, w.ID); got != c.shards[1] {
				t.Fatalf("workspace placed on %s, want %s", got, c.shards[1])
			}
			ch := storetest.MustChannel(t, c.r, w, owner, "last-words", parley.KindPublic)
			for range 3 {
				storetest.MustPost(t, c.r, owner, ch, "soon gone")
			}
			storetest.NoErr(t, c.r.DeleteWorkspace(bg(), owner.ID, w.ID, "doomed"))
			// With its shard down the purge fails and the entry stays.
			setConnections(t, c.dsns[1], false)
			_, err = c.r.PurgeWorkspace(bg(), w.ID, 1000)
			if err == nil {
				t.Fatal("a purge on a shard refusing connections succeeded")
			}
			setConnections(t, c.dsns[1], true)
			if got := c.shardOf(t, w.ID); got != c.shards[1] {
				t.Fatalf("after a failed purge the workspace is on %s", got)
			}

			p := purge.New(purge.Config{Store: c.r, Batch: 2, RetryAfter: 50 * time.Millisecond})
			defer p.Close()
			if resumed {
				// Resumed while the shard is still down: the listing is
				// partial (EUNAVAILABLE) and retried until the shard
				// answers, then the purge runs.
				setConnections(t, c.dsns[1], false)
				storetest.Code(t, p.Resume(bg()), parley.EUNAVAILABLE)
				setConnections(t, c.dsns[1], true)
			} else {
				p.Start(w.ID)
			}
			p.Wait()

			var rows int
			db, err := sql.Open("pgx", c.dsns[1])
			storetest.NoErr(t, err)
			defer db.Close()
			storetest.NoErr(t, db.QueryRowContext(bg(), `SELECT COUNT(*) FROM workspaces WHERE id = $1`, w.ID).Scan(&rows))
			if rows != 0 {
				t.Fatalf("the purged workspace's row is still on its shard")
			}
			if _, err := c.dir.cat.Workspace(bg(), w.ID); parley.ErrorCode(err) != parley.ENOTFOUND {
				t.Fatalf("catalogue entry of the purged workspace: %v, want %s", err, parley.ENOTFOUND)
			}
			waitFor(t, 10*time.Second, "the directory to answer not_found", func() bool {
				_, err := c.dir.client.Lookup(bg(), w.ID)
				return parley.ErrorCode(err) == parley.ENOTFOUND
			})
			_, err = c.r.GetWorkspace(bg(), owner.ID, w.ID)
			storetest.Code(t, err, parley.ENOTFOUND)
			if n := counterWithLabel(t, c.reg, "parley_shardstore_purged_unplaces_total", "result", "ok"); n != 1 {
				t.Fatalf("purged unplaces ok = %v, want 1", n)
			}
			// The other workspace keeps its entry; the slug is free.
			if got := c.shardOf(t, w1.ID); got != c.shards[0] {
				t.Fatalf("the other workspace is on %s", got)
			}
			_, err = c.r.CreateWorkspace(bg(), owner.ID, "Again", "doomed")
			storetest.NoErr(t, err)
		})
	}
}
