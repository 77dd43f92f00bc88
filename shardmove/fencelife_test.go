package shardmove

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/storetest"
)

// fenceTriggers lists the tables of db that have the fence's trigger.
func fenceTriggers(t testing.TB, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE NOT t.tgisinternal AND t.tgname LIKE 'shardmove%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var rel string
		if err := rows.Scan(&rel); err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// registry lists db's registered moves as "workspace/role", and its fence
// rows' workspaces.
func registry(t testing.TB, db *sql.DB) (moves, fences []string) {
	t.Helper()
	list := func(q string) []string {
		var has bool
		if err := db.QueryRow(`SELECT to_regclass($1) IS NOT NULL`, movesTable).Scan(&has); err != nil {
			t.Fatal(err)
		}
		if !has {
			return nil
		}
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(out)
		return out
	}
	return list(`SELECT workspace || '/' || role FROM ` + movesTable),
		list(`SELECT workspace FROM ` + fenceTable)
}

// noFence fails t unless db has no fence trigger, no registered move and
// no fence row.
func noFence(t testing.TB, db *sql.DB, what string) {
	t.Helper()
	if trg := fenceTriggers(t, db); len(trg) > 0 {
		t.Errorf("%s: fence triggers on %v", what, trg)
	}
	if moves, fences := registry(t, db); len(moves)+len(fences) > 0 {
		t.Errorf("%s: moves registered %v, fence rows %v", what, moves, fences)
	}
}

// TestFenceOnlyWhileMoving: the fence's triggers are on the source while
// its move runs (none on the target, none before), and after the switch
// and the source's purge neither shard has any trigger, registration or
// fence row; writes on both work. A stale node's writes to the moved
// workspace on the old shard after the purge find nothing there: each
// fails (not found or forbidden, by the store's own checks) and no row of
// the workspace is written there.
func TestFenceOnlyWhileMoving(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src, tgt := r.stores["eu1"], r.stores["eu2"]
	tm := seedTeam(t, src, nil, 10)
	other := seedTeam(t, src, nil, 2)
	r.place(t, tm.ws.ID, "eu1")
	ch := tm.channels[0]
	root := storetest.MustPost(t, src, tm.owner, ch, "a thread")
	noFence(t, r.dbs["eu1"], "before the move")

	var during []string
	var duringMoves, duringTgt []string
	var tgtTriggers []string
	mv := r.mover(t, Config{Drain: -1, PurgeDelay: time.Millisecond, Progress: func(p Progress) {
		if p.Phase == "catchup" && during == nil {
			during = fenceTriggers(t, r.dbs["eu1"])
			duringMoves, _ = registry(t, r.dbs["eu1"])
			duringTgt, _ = registry(t, r.dbs["eu2"])
			tgtTriggers = fenceTriggers(t, r.dbs["eu2"])
		}
	}})
	sum, err := mv.Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatal(err)
	}
	if len(during) < 8 {
		t.Errorf("fence triggers on the source during the move: %v", during)
	}
	if fmt.Sprint(duringMoves) != fmt.Sprint([]string{tm.ws.ID + "/source"}) ||
		fmt.Sprint(duringTgt) != fmt.Sprint([]string{tm.ws.ID + "/target"}) {
		t.Errorf("moves registered during the move: source %v, target %v", duringMoves, duringTgt)
	}
	if len(tgtTriggers) > 0 {
		t.Errorf("fence triggers on the target during the move: %v", tgtTriggers)
	}
	noFence(t, r.dbs["eu1"], "the source after the purge")
	noFence(t, r.dbs["eu2"], "the target after the move")

	// Writes work on both shards.
	if _, _, err := src.PostMessage(ctx, other.owner.ID, other.channels[0].ID, parley.NewMessage{Text: "still here"}); err != nil {
		t.Errorf("another workspace on the source: %v", err)
	}
	if _, err := src.MarkRead(ctx, other.members[1].ID, other.channels[0].ID, 1); err != nil {
		t.Errorf("a read marker of another workspace on the source: %v", err)
	}
	last := storetest.MustPost(t, tgt, tm.owner, ch, "on the target")
	if _, err := tgt.MarkRead(ctx, tm.members[1].ID, ch.ID, last.Seq); err != nil {
		t.Errorf("a read marker on the target: %v", err)
	}

	// A stale node, after the purge, on the old shard.
	stale := []struct {
		name string
		do   func() error
	}{
		{"post", func() error {
			_, _, err := src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "stale"})
			return err
		}},
		{"read marker", func() error { _, err := src.MarkRead(ctx, tm.members[1].ID, ch.ID, last.Seq); return err }},
		{"thread follow", func() error { _, err := src.FollowThread(ctx, tm.members[2].ID, root.ID); return err }},
		{"role change", func() error {
			return src.SetMemberRole(ctx, tm.owner.ID, tm.ws.ID, tm.members[3].ID, parley.RoleAdmin)
		}},
		{"reaction", func() error { _, err := src.AddReaction(ctx, tm.members[1].ID, root.ID, "tada"); return err }},
		{"channel", func() error {
			_, err := src.CreateChannel(ctx, tm.owner.ID, tm.ws.ID, parley.NewChannel{Name: "late"})
			return err
		}},
	}
	for _, w := range stale {
		err := w.do()
		switch code := parley.ErrorCode(err); {
		case err == nil:
			t.Errorf("a stale %s on the purged source succeeded", w.name)
		case code != parley.ENOTFOUND && code != parley.EFORBIDDEN:
			t.Errorf("a stale %s on the purged source: %v (code %q), want not_found or forbidden", w.name, err, code)
		}
	}
	if left := counts(t, r.dbs["eu1"], tm.ws.ID); total(left) != 0 {
		t.Errorf("stale writes left rows of the moved workspace on the source: %v", left)
	}
}

// TestConcurrentMovesShareTheFence: two moves from one source; the first
// to finish (switch and purge) leaves the triggers to the second, whose
// fence still refuses a late write after its final round; once the second
// is purged too, no trigger is left on either shard.
func TestConcurrentMovesShareTheFence(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src := r.stores["eu1"]
	a := seedTeam(t, src, nil, 5)
	b := seedTeam(t, src, nil, 5)
	r.place(t, a.ws.ID, "eu1")
	r.place(t, b.ws.ID, "eu1")

	reached, release := make(chan struct{}), make(chan struct{})
	var lateErr error
	late := false
	mvB := r.mover(t, Config{Drain: -1, PurgeDelay: time.Millisecond, Progress: func(p Progress) {
		switch p.Phase {
		case "catchup":
			if reached != nil {
				close(reached)
				reached = nil
				<-release
			}
		case "final":
			if !late {
				late = true
				_, lateErr = r.dbs["eu1"].Exec(`UPDATE workspaces SET name = 'late' WHERE id = $1`, b.ws.ID)
			}
		}
	}})
	started := reached
	doneB := make(chan error, 1)
	var sumB *Summary
	go func() {
		var err error
		sumB, err = mvB.Run(ctx, b.ws.ID, "eu2")
		doneB <- err
	}()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	<-started
	before := fenceTriggers(t, r.dbs["eu1"])
	if len(before) == 0 {
		t.Fatal("no fence triggers on the source during B's move")
	}

	sumA, err := r.mover(t, Config{Drain: -1, PurgeDelay: time.Millisecond}).Run(ctx, a.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sumA.Purged; err != nil {
		t.Fatal(err)
	}
	if after := fenceTriggers(t, r.dbs["eu1"]); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("A's end changed the source's triggers while B moves: %v → %v", before, after)
	}
	if moves, fences := registry(t, r.dbs["eu1"]); fmt.Sprint(moves) != fmt.Sprint([]string{b.ws.ID + "/source"}) || len(fences) != 0 {
		t.Errorf("the source's registry after A: moves %v, fence rows %v", moves, fences)
	}

	close(release)
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	var pgErr *pgconn.PgError
	if !late || !errors.As(lateErr, &pgErr) || pgErr.Code != "40001" {
		t.Errorf("a late write to B after its fence (tried %v): %v, want SQLSTATE 40001", late, lateErr)
	}
	if err := <-sumB.Purged; err != nil {
		t.Fatal(err)
	}
	noFence(t, r.dbs["eu1"], "the source after both moves")
	noFence(t, r.dbs["eu2"], "the target after both moves")
}

// TestFenceDDLGivesWay: a transaction left open on a table the fence's
// install must lock does not make the table's other writers queue behind
// the waiting CREATE TRIGGER: it waits at most ddlLockTimeout, gives way
// (counted), and tries again; the install completes once the transaction
// ends.
func TestFenceDDLGivesWay(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	db := r.dbs["eu1"]
	tm := seedTeam(t, r.stores["eu1"], nil, 2)
	other := seedTeam(t, r.stores["eu1"], nil, 2)
	defer func(d time.Duration) { ddlLockTimeout = d }(ddlLockTimeout)
	ddlLockTimeout = 300 * time.Millisecond

	long, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { long.Rollback() })
	if _, err := long.Exec(`UPDATE workspaces SET name = name WHERE id = $1`, tm.ws.ID); err != nil {
		t.Fatal(err)
	}
	m := newMetrics(prometheus.NewRegistry())
	installed := make(chan error, 1)
	go func() { installed <- registerMove(ctx, db, tm.ws.ID, roleSource, m) }()
	// The install waits for the table's lock behind the open transaction.
	waitFor(t, 20*time.Second, "the trigger's DDL to wait on workspaces", func() bool {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE NOT granted AND mode = 'ShareRowExclusiveLock'
			AND relation = 'workspaces'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	// Another writer of the table gets through while the transaction is
	// still open (without the lock timeout it would wait for it, behind
	// the DDL; the statement timeout only bounds a failing test).
	w, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.ExecContext(ctx, `SET statement_timeout = '20s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, `UPDATE workspaces SET name = 'written meanwhile' WHERE id = $1`, other.ws.ID); err != nil {
		t.Fatalf("a writer behind the fence's DDL: %v", err)
	}
	select {
	case err := <-installed:
		t.Fatalf("the install finished while the transaction was open: %v", err)
	default:
	}
	// The writer got through, so the DDL gave up its place in the lock
	// queue at least once; the mover counts that when the error reaches
	// it, which may be just after the writer went on.
	waitFor(t, 20*time.Second, "the DDL's lock timeout to be counted", func() bool {
		return testutil.ToFloat64(m.ddl.WithLabelValues("install", "lock_timeout")) >= 1
	})
	if err := long.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-installed; err != nil {
		t.Fatalf("the install after the transaction ended: %v", err)
	}
	if trg := fenceTriggers(t, db); len(trg) < 8 {
		t.Errorf("triggers after the install: %v", trg)
	}
	if err := unregisterMove(ctx, db, tm.ws.ID, roleSource, true, m); err != nil {
		t.Fatal(err)
	}
	noFence(t, db, "after the unregistration")
}

// TestPreviousVersionFenceDropped: a shard the previous version fenced
// (triggers kept for good, no registry) loses its triggers at the end of
// the next move that touches it, here as the target.
func TestPreviousVersionFenceDropped(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	tm := seedTeam(t, r.stores["eu1"], nil, 5)
	r.place(t, tm.ws.ID, "eu1")
	old := r.dbs["eu2"]
	if err := installFence(ctx, old, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`DROP TABLE ` + movesTable); err != nil {
		t.Fatal(err)
	}
	if len(fenceTriggers(t, old)) == 0 {
		t.Fatal("no triggers to start with")
	}
	sum, err := r.mover(t, Config{Drain: -1, PurgeDelay: time.Millisecond}).Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatal(err)
	}
	noFence(t, old, "the previous version's shard after a move to it")
	noFence(t, r.dbs["eu1"], "the source")
}
