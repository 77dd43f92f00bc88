package tenantdir

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"parley"
)

func TestPickShard(t *testing.T) {
	cases := []struct {
		name  string
		loads []shardLoad
		want  string
	}{
		{"fewest workspaces", []shardLoad{{"a", ShardActive, 10, 3}, {"b", ShardActive, 10, 1}, {"c", ShardActive, 10, 2}}, "b"},
		{"by weight", []shardLoad{{"a", ShardActive, 10, 5}, {"b", ShardActive, 100, 20}}, "b"}, // 0.5 vs 0.2
		{"draining skipped", []shardLoad{{"a", ShardDraining, 10, 0}, {"b", ShardActive, 10, 9}}, "b"},
		{"full skipped", []shardLoad{{"a", ShardActive, 2, 2}, {"b", ShardActive, 10, 9}}, "b"},
		{"tie: fewer workspaces", []shardLoad{{"a", ShardActive, 20, 2}, {"b", ShardActive, 10, 1}}, "b"},
		{"tie: smallest id", []shardLoad{{"b", ShardActive, 10, 1}, {"a", ShardActive, 10, 1}}, "a"},
	}
	for _, tc := range cases {
		got, err := pickShard(tc.loads)
		if err != nil || got != tc.want {
			t.Errorf("%s: pickShard = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := pickShard([]shardLoad{{"a", ShardDraining, 10, 0}, {"b", ShardActive, 1, 1}}); err == nil {
		t.Error("pickShard with no room: no error")
	}
}

func TestCataloguePlacement(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		for _, s := range []Shard{{ID: "eu1", Region: "eu", Capacity: 10, DSN: "postgres://eu1"},
			{ID: "eu2", Region: "eu", Capacity: 10, DSN: "postgres://eu2"}, {ID: "us1", Region: "us", Capacity: 10}} {
			if _, err := c.AddShard(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		// Ten workspaces in eu spread evenly; none lands in us.
		counts := map[string]int{}
		for i := range 10 {
			r, err := c.Place(ctx, Placement{WorkspaceID: fmt.Sprintf("w%d", i), Region: "eu"})
			if err != nil {
				t.Fatal(err)
			}
			if r.Region != "eu" || r.Status != StatusActive || r.Version == 0 {
				t.Fatalf("placed %+v", r)
			}
			counts[r.ShardID]++
		}
		if counts["eu1"] != 5 || counts["eu2"] != 5 {
			t.Fatalf("placement spread %v, want 5 and 5", counts)
		}
		// A draining shard gets none.
		if _, err := c.DrainShard(ctx, "eu1"); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			r, err := c.Place(ctx, Placement{WorkspaceID: fmt.Sprintf("x%d", i), Region: "eu"})
			if err != nil {
				t.Fatal(err)
			}
			if r.ShardID != "eu2" {
				t.Fatalf("placed on %s while eu1 drains", r.ShardID)
			}
		}
		// eu2 is full now (10), eu1 drains: no room.
		_, err := c.Place(ctx, Placement{WorkspaceID: "y", Region: "eu"})
		if parley.ErrorCode(err) != parley.ELIMIT {
			t.Fatalf("place with no room: %v, want %s", err, parley.ELIMIT)
		}
		shards, err := c.ListShards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range shards {
			got[s.ID] = fmt.Sprintf("%s/%d", s.State, s.Workspaces)
		}
		if want := map[string]string{"eu1": "draining/5", "eu2": "active/10", "us1": "active/0"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("shards %v, want %v", got, want)
		}
		// Shards is the same list without the counts.
		brief, err := c.Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range shards {
			shards[i].Workspaces = 0
		}
		if fmt.Sprint(brief) != fmt.Sprint(shards) {
			t.Fatalf("Shards %+v, want ListShards without counts %+v", brief, shards)
		}
	})
}

func TestCatalogueBadInput(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		if _, err := c.AddShard(ctx, Shard{ID: "s1", Region: "eu"}); err != nil {
			t.Fatal(err)
		}
		checks := []struct {
			name string
			err  error
			code string
		}{
			{"duplicate shard", second(c.AddShard(ctx, Shard{ID: "s1", Region: "eu"})), parley.ECONFLICT},
			{"bad shard id", second(c.AddShard(ctx, Shard{ID: "a.b", Region: "eu"})), parley.EINVALID},
			{"bad region", second(c.AddShard(ctx, Shard{ID: "s2", Region: ""})), parley.EINVALID},
			{"negative capacity", second(c.AddShard(ctx, Shard{ID: "s3", Region: "eu", Capacity: -1})), parley.EINVALID},
			{"drain unknown", second(c.DrainShard(ctx, "nope")), parley.ENOTFOUND},
			{"bad workspace id", second(c.Place(ctx, Placement{WorkspaceID: "a b", Region: "eu"})), parley.EINVALID},
			{"unknown region", second(c.Place(ctx, Placement{WorkspaceID: "w", Region: "mars"})), parley.ELIMIT},
			{"named shard elsewhere", second(c.Place(ctx, Placement{WorkspaceID: "w", Region: "us", Shard: "s1"})), parley.ENOTFOUND},
			{"negative limit", second(c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu", Limits: map[string]int64{"members": -1}})), parley.EINVALID},
			{"zero limit", second(c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu", Limits: map[string]int64{"channels": 0}})), parley.EINVALID},
			{"unknown limit", second(c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu", Limits: map[string]int64{"seats": 5}})), parley.EINVALID},
			{"unknown feature", second(c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu", Features: map[string]bool{"huddles": false}})), parley.EINVALID},
			{"show unknown", second(c.Workspace(ctx, "nope")), parley.ENOTFOUND},
			{"move unknown", second(c.BeginMove(ctx, "nope", "s1")), parley.ENOTFOUND},
		}
		for _, ch := range checks {
			if parley.ErrorCode(ch.err) != ch.code {
				t.Errorf("%s: %v, want %s", ch.name, ch.err, ch.code)
			}
		}
		if _, err := c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu"}); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Errorf("place twice: %v", err)
		}
		// Nothing half-written: only the successful changes are logged.
		total, _, err := c.ChangeCount(ctx)
		if err != nil || total != 2 {
			t.Errorf("change log has %d entries (%v), want 2 (one shard, one workspace)", total, err)
		}
	})
}

func second[T any](_ T, err error) error { return err }

func TestCatalogueMoveTransitions(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		for _, s := range []Shard{{ID: "a", Region: "eu", DSN: "dsn-a"}, {ID: "b", Region: "eu", DSN: "dsn-b"},
			{ID: "d", Region: "eu"}, {ID: "u", Region: "us"}} {
			if _, err := c.AddShard(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.DrainShard(ctx, "d"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu", Shard: "a",
			Limits: map[string]int64{"members": 50}, Features: map[string]bool{"integrations": true}}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []struct{ to, code string }{{"a", parley.EINVALID}, {"d", parley.ECONFLICT}, {"u", parley.ENOTFOUND}, {"zz", parley.ENOTFOUND}} {
			if _, err := c.BeginMove(ctx, "w", bad.to); parley.ErrorCode(err) != bad.code {
				t.Errorf("move to %s: %v, want %s", bad.to, err, bad.code)
			}
		}
		if _, err := c.CompleteMove(ctx, "w"); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Errorf("complete a move never begun: %v", err)
		}
		r, err := c.BeginMove(ctx, "w", "b")
		if err != nil || r.Status != StatusMoving || r.TargetShard != "b" || r.TargetDSN != "dsn-b" || r.DSN != "dsn-a" {
			t.Fatalf("begin move: %+v %v", r, err)
		}
		if _, err := c.BeginMove(ctx, "w", "b"); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Errorf("begin twice: %v", err)
		}
		if _, err := c.Unfreeze(ctx, "w"); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Errorf("unfreeze a moving workspace: %v", err)
		}
		if r, err = c.Freeze(ctx, "w"); err != nil || r.Status != StatusReadOnly || r.TargetShard != "b" {
			t.Fatalf("freeze: %+v %v", r, err)
		}
		v := r.Version
		if r, err = c.CompleteMove(ctx, "w"); err != nil || r.Status != StatusActive || r.ShardID != "b" || r.TargetShard != "" || r.DSN != "dsn-b" || r.Version <= v {
			t.Fatalf("complete: %+v %v", r, err)
		}
		if r.Limits["members"] != 50 || !r.Features["integrations"] {
			t.Fatalf("overrides lost in the move: %+v", r)
		}
		// Abort goes back to the source.
		if _, err := c.BeginMove(ctx, "w", "a"); err != nil {
			t.Fatal(err)
		}
		if r, err = c.AbortMove(ctx, "w"); err != nil || r.ShardID != "b" || r.Status != StatusActive || r.TargetShard != "" {
			t.Fatalf("abort: %+v %v", r, err)
		}
		// Maintenance freeze and back.
		if _, err := c.Freeze(ctx, "w"); err != nil {
			t.Fatal(err)
		}
		if r, err = c.Unfreeze(ctx, "w"); err != nil || r.Status != StatusActive {
			t.Fatalf("unfreeze: %+v %v", r, err)
		}
		if _, err = c.SetOverrides(ctx, "w", map[string]int64{"members": 10, "invite_links": 3}, nil); parley.ErrorCode(err) != parley.EINVALID {
			t.Fatalf("set an unknown limit: %v, want bad_request", err)
		}
		if _, err = c.SetOverrides(ctx, "w", nil, map[string]bool{"huddles": true}); parley.ErrorCode(err) != parley.EINVALID {
			t.Fatalf("set an unknown feature: %v, want bad_request", err)
		}
		if r, err = c.SetOverrides(ctx, "w", map[string]int64{}, nil); err != nil || r.Limits != nil || !r.Features["integrations"] {
			t.Fatalf("clear limits: %+v %v", r, err)
		}
		// Every change is in the log, with the state it made.
		got, err := c.Workspace(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		pending, err := c.Pending(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		last := pending[len(pending)-1]
		if last.Workspace == nil || last.Seq != got.Version || fmt.Sprint(*last.Workspace) != fmt.Sprint(got) {
			t.Fatalf("last change %+v, catalogue %+v", last.Workspace, got)
		}
	})
}

// TestCatalogueConcurrentPlacement: many placements at once, some of the
// same workspace, on both stores: each workspace is placed once (the
// others get a conflict, never a raw unique violation).
func TestCatalogueConcurrentPlacement(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		for _, id := range []string{"a", "b"} {
			if _, err := c.AddShard(ctx, Shard{ID: id, Region: "eu", Capacity: 100}); err != nil {
				t.Fatal(err)
			}
		}
		const n = 20
		var wg sync.WaitGroup
		errs := make(chan error, 2*n)
		for i := range 2 * n {
			wg.Go(func() {
				_, err := c.Place(ctx, Placement{WorkspaceID: fmt.Sprintf("w%d", i%n), Region: "eu"})
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		conflicts := 0
		for err := range errs {
			if parley.ErrorCode(err) != parley.ECONFLICT {
				t.Fatalf("concurrent place: %v", err)
			}
			conflicts++
		}
		if conflicts != n {
			t.Fatalf("%d conflicts, want %d (each workspace placed once)", conflicts, n)
		}
		shards, err := c.ListShards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if total := shards[0].Workspaces + shards[1].Workspaces; total != n {
			t.Fatalf("%d workspaces placed, want %d", total, n)
		}
	})
}

// TestCatalogueSlugReservation: a slug is held by one placed workspace at
// a time, on whatever shard; placements by id alone reserve none; a freed
// slug (a deleted workspace) and an unplaced workspace's slug can be
// taken again.
func TestCatalogueSlugReservation(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		for _, id := range []string{"a", "b"} {
			mustDo(t, second(c.AddShard(ctx, Shard{ID: id, Region: "eu"})))
		}
		mustDo(t, second(c.Place(ctx, Placement{WorkspaceID: "w1", Region: "eu", Shard: "a", Slug: "acme"})))
		_, err := c.Place(ctx, Placement{WorkspaceID: "w2", Region: "eu", Shard: "b", Slug: "acme"})
		if parley.ErrorCode(err) != parley.ECONFLICT || !strings.Contains(err.Error(), "slug") {
			t.Fatalf("second placement of a slug: %v, want a slug conflict", err)
		}
		if _, err := c.Workspace(ctx, "w2"); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("the refused placement was written: %v", err)
		}
		if _, err := c.Place(ctx, Placement{WorkspaceID: "w3", Region: "eu", Slug: "Not A Slug"}); parley.ErrorCode(err) != parley.EINVALID {
			t.Fatalf("bad slug: %v", err)
		}
		// By id alone: any number, no slug.
		mustDo(t, second(c.Place(ctx, Placement{WorkspaceID: "old1", Region: "eu"})))
		mustDo(t, second(c.Place(ctx, Placement{WorkspaceID: "old2", Region: "eu"})))
		if s, err := c.Slug(ctx, "old1"); err != nil || s != "" {
			t.Fatalf("slug of a placement by id = %q, %v", s, err)
		}

		// Freeing with another slug changes nothing; with its own, frees it.
		mustDo(t, c.FreeSlug(ctx, "w1", "other"))
		if s, _ := c.Slug(ctx, "w1"); s != "acme" {
			t.Fatalf("slug after freeing another = %q", s)
		}
		before, _, _ := c.ChangeCount(ctx)
		mustDo(t, c.FreeSlug(ctx, "w1", "acme"))
		mustDo(t, c.FreeSlug(ctx, "w1", "acme")) // again: a no-op
		mustDo(t, c.FreeSlug(ctx, "nope", "acme"))
		if after, _, _ := c.ChangeCount(ctx); after != before {
			t.Fatalf("freeing a slug logged %d changes", after-before)
		}
		if _, err := c.Workspace(ctx, "w1"); err != nil {
			t.Fatalf("freeing the slug removed the entry: %v", err)
		}
		mustDo(t, second(c.Place(ctx, Placement{WorkspaceID: "w2", Region: "eu", Shard: "b", Slug: "acme"})))

		// Unplacing frees the slug with the entry.
		mustDo(t, second(c.Unplace(ctx, "w2", "b")))
		mustDo(t, second(c.Place(ctx, Placement{WorkspaceID: "w4", Region: "eu", Slug: "acme"})))
	})
}

// TestCatalogueConcurrentSlug: many placements of one slug at once (each
// a different workspace): one wins, the others get a slug conflict, never
// a raw unique violation.
func TestCatalogueConcurrentSlug(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		for _, id := range []string{"a", "b"} {
			mustDo(t, second(c.AddShard(ctx, Shard{ID: id, Region: "eu", Capacity: 100})))
		}
		const n = 16
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				_, err := c.Place(ctx, Placement{WorkspaceID: fmt.Sprintf("w%d", i), Region: "eu", Slug: "same"})
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		wins := 0
		for err := range errs {
			switch {
			case err == nil:
				wins++
			case parley.ErrorCode(err) != parley.ECONFLICT || !strings.Contains(err.Error(), `slug "same" is taken`):
				t.Fatalf("concurrent placement of one slug: %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d placements of one slug won, want 1", wins)
		}
	})
}

// TestCatalogueUnplace: only an active entry on the named shard with no
// move can be removed; the removal is logged as a tombstone newer than
// the entry, and the entry is gone.
func TestCatalogueUnplace(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		for _, id := range []string{"a", "b"} {
			mustDo(t, second(c.AddShard(ctx, Shard{ID: id, Region: "eu", DSN: "dsn-" + id})))
		}
		placed, err := c.Place(ctx, Placement{WorkspaceID: "w", Region: "eu", Shard: "a", Slug: "ws"})
		mustDo(t, err)
		if _, err := c.Unplace(ctx, "w", "b"); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Fatalf("unplace from another shard: %v", err)
		}
		mustDo(t, second(c.BeginMove(ctx, "w", "b")))
		if _, err := c.Unplace(ctx, "w", "a"); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Fatalf("unplace while moving: %v", err)
		}
		mustDo(t, second(c.AbortMove(ctx, "w")))
		mustDo(t, second(c.Freeze(ctx, "w")))
		if _, err := c.Unplace(ctx, "w", "a"); parley.ErrorCode(err) != parley.ECONFLICT {
			t.Fatalf("unplace while read-only: %v", err)
		}
		cur, err := c.Unfreeze(ctx, "w")
		mustDo(t, err)

		tomb, err := c.Unplace(ctx, "w", "a")
		mustDo(t, err)
		if !tomb.Removed || tomb.Version <= cur.Version || tomb.Version <= placed.Version || tomb.DSN != "dsn-a" {
			t.Fatalf("tombstone %+v after %+v", tomb, cur)
		}
		if _, err := c.Workspace(ctx, "w"); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("workspace after unplace: %v", err)
		}
		if _, err := c.Unplace(ctx, "w", "a"); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("unplace twice: %v", err)
		}
		pending, err := c.Pending(ctx, 1000)
		mustDo(t, err)
		last := pending[len(pending)-1]
		if last.Workspace == nil || !last.Workspace.Removed || last.Seq != tomb.Version {
			t.Fatalf("last change %+v, want the tombstone", last.Workspace)
		}
		shards, err := c.ListShards(ctx)
		mustDo(t, err)
		if shards[0].Workspaces != 0 {
			t.Fatalf("shard a still counts %d workspaces", shards[0].Workspaces)
		}
	})
}

// TestSetShardDSN: a shard's new DSN is logged with the shard, and with
// every workspace on it or moving to it (their records carry it); the
// others are untouched; the same DSN again, or an unknown shard, changes
// nothing.
func TestSetShardDSN(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *Catalogue) {
		ctx := context.Background()
		for _, s := range []Shard{{ID: "a", Region: "eu", DSN: "postgres://old-a"}, {ID: "b", Region: "eu", DSN: "postgres://b"}} {
			if _, err := c.AddShard(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		for ws, shard := range map[string]string{"on-a": "a", "on-b": "b", "to-a": "b"} {
			if _, err := c.Place(ctx, Placement{WorkspaceID: ws, Region: "eu", Shard: shard}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.BeginMove(ctx, "to-a", "a"); err != nil {
			t.Fatal(err)
		}
		total, _, err := c.ChangeCount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before, err := c.Pending(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.SetShardDSN(ctx, "a", "postgres://new-a")
		if err != nil {
			t.Fatal(err)
		}
		if s.DSN != "postgres://new-a" || s.Version == 0 {
			t.Fatalf("shard after the change: %+v", s)
		}
		after, err := c.Pending(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		logged := map[string]Change{}
		for _, ch := range after[len(before):] {
			if ch.Shard != nil {
				logged["shard "+ch.Shard.ID] = ch
			} else {
				logged[ch.Workspace.WorkspaceID] = ch
			}
		}
		if len(logged) != 3 || logged["shard a"].Shard == nil || logged["shard a"].Shard.DSN != "postgres://new-a" ||
			logged["on-a"].Workspace == nil || logged["on-a"].Workspace.DSN != "postgres://new-a" ||
			logged["to-a"].Workspace == nil || logged["to-a"].Workspace.TargetDSN != "postgres://new-a" ||
			logged["to-a"].Workspace.DSN != "postgres://b" {
			t.Fatalf("logged %+v, want shard a, on-a and to-a with the new DSN", logged)
		}
		rec, err := c.Workspace(ctx, "on-a")
		if err != nil || rec.DSN != "postgres://new-a" || rec.Version != logged["on-a"].Seq {
			t.Fatalf("on-a after the change: %+v, %v", rec, err)
		}
		if _, err := c.SetShardDSN(ctx, "a", "postgres://new-a"); err != nil {
			t.Fatal(err)
		}
		_, err = c.SetShardDSN(ctx, "nope", "postgres://x")
		if parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("unknown shard: %v, want %s", err, parley.ENOTFOUND)
		}
		if n, _, err := c.ChangeCount(ctx); err != nil || n != total+3 {
			t.Fatalf("changes %d, %v; want %d (a no-op and a refusal log nothing)", n, err, total+3)
		}
	})
}
