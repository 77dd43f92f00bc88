package shardmove

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"parley"
	"parley/storeguard"
	"parley/storetest"
)

// TestMoveFencesTheSource: after a move, a node still writing to the old
// shard (a router that never heard of the move, here a store on the source
// used directly) is refused: the post fails as unavailable (503 with
// Retry-After through the API), and no event of the workspace is added to
// the source. Another workspace on the source keeps posting. Moving the
// workspace back lifts the fence on the shard it returns to, and an
// aborted move lifts the source's; after each, no trigger is left.
func TestMoveFencesTheSource(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src, tgt := r.stores["eu1"], r.stores["eu2"]
	tm := seedTeam(t, src, nil, 5)
	other := seedTeam(t, src, nil, 2)
	r.place(t, tm.ws.ID, "eu1")
	r.place(t, other.ws.ID, "eu1")
	// The stale write comes right after the switch, before the purge
	// (the window a node that never heard of the freeze writes in).
	ch := tm.channels[0]
	var staleErr error
	stale := false
	mv := r.mover(t, Config{Drain: -1, Progress: func(p Progress) {
		if p.Phase == "switch" {
			stale = true
			_, _, staleErr = src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "stale node", ClientMsgID: "stale-1"})
		}
	}})
	sum, err := mv.Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatalf("purge after a refused stale write: %v", err)
	}
	if !stale || staleErr == nil {
		t.Fatalf("a post to the moved workspace on its old shard after the switch succeeded (tried: %v)", stale)
	}
	if !storeguard.Lost(staleErr) {
		t.Errorf("the fenced post's error is not one a client retries (503): %v", staleErr)
	}
	var n int
	if err := r.dbs["eu1"].QueryRow(`SELECT COUNT(*) FROM events WHERE workspace_id = $1`, tm.ws.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the source holds %d events of the moved workspace", n)
	}
	// Edits, reactions and pins of the moved workspace on the source are
	// refused too: each appends an event. (Its messages were purged, so
	// the other workspace's posts stand in for "still works".)
	if _, _, err := src.PostMessage(ctx, other.owner.ID, other.channels[0].ID, parley.NewMessage{Text: "still here"}); err != nil {
		t.Fatalf("another workspace on the source: %v", err)
	}
	// The target takes the same post, with its client_msg_id.
	if _, _, err := tgt.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "stale node", ClientMsgID: "stale-1"}); err != nil {
		t.Fatalf("the post on the target: %v", err)
	}

	// Back to eu1: the fence there is lifted, eu2 is fenced.
	sum, err = mv.Run(ctx, tm.ws.ID, "eu1")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "home again"}); err != nil {
		t.Fatalf("a post after moving back: %v", err)
	}
	// eu2 was purged: its fence went with the purge, and the triggers
	// with the move (TestFenceOnlyWhileMoving).
	noFence(t, r.dbs["eu1"], "eu1 after moving back")
	noFence(t, r.dbs["eu2"], "eu2 after its purge")

	// An aborted move (checks fail: the target vanishes after the fence)
	// leaves the source writable: the fence is lifted with AbortMove. A
	// cancelled context stands in for the failure after the freeze.
	cctx, cancel := context.WithCancel(ctx)
	mv2 := r.mover(t, Config{Drain: -1, Progress: func(p Progress) {
		if p.Phase == "final" {
			cancel()
		}
	}})
	if _, err := mv2.Run(cctx, tm.ws.ID, "eu2"); err == nil {
		t.Fatal("a move cancelled after its final round completed")
	}
	if _, _, err := src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "after the abort"}); err != nil {
		t.Fatalf("a post after an aborted move: %v", err)
	}
	// The abort took the fence, its triggers and the registrations away.
	noFence(t, r.dbs["eu1"], "the source after an abort after the fence")
	noFence(t, r.dbs["eu2"], "the target after an abort")
}

// TestFenceCoversEveryWrite: once the source's fence has committed, every
// kind of write of the moved workspace there is refused with 40001, not
// only those that append an event: a read marker, a thread follow, a role
// change, a reaction, the workspace's own row and a row keyed by a
// channel (notify_sent). None of them reaches the target, the purge
// empties the source, and another workspace on the source writes on.
func TestFenceCoversEveryWrite(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src, tgt := r.stores["eu1"], r.stores["eu2"]
	tm := seedTeam(t, src, nil, 20)
	other := seedTeam(t, src, nil, 2)
	r.place(t, tm.ws.ID, "eu1")
	ch := tm.channels[0]
	root := storetest.MustPost(t, src, tm.owner, ch, "a thread")
	if _, _, err := src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "a reply", ThreadRootID: root.ID}); err != nil {
		t.Fatal(err)
	}
	last := storetest.MustPost(t, src, tm.owner, ch, "the latest")
	reader, follower, promoted := tm.members[1], tm.members[2], tm.members[3]

	writes := []struct {
		name string
		do   func() error
	}{
		{"read marker", func() error { _, err := src.MarkRead(ctx, reader.ID, ch.ID, last.Seq); return err }},
		{"thread follow", func() error { _, err := src.FollowThread(ctx, follower.ID, root.ID); return err }},
		{"role change", func() error { return src.SetMemberRole(ctx, tm.owner.ID, tm.ws.ID, promoted.ID, parley.RoleAdmin) }},
		{"reaction", func() error { _, err := src.AddReaction(ctx, reader.ID, last.ID, "tada"); return err }},
	}
	raw := []struct{ name, q string }{
		{"workspace row", `UPDATE workspaces SET name = 'renamed late' WHERE id = '` + tm.ws.ID + `'`},
		{"notify_sent (by channel)", `INSERT INTO notify_sent (user_id, channel_id, seq) VALUES ('` + reader.ID + `', '` + ch.ID + `', 1)`},
		{"channel member's deletion", `DELETE FROM channel_members WHERE channel_id = '` + ch.ID + `' AND user_id = '` + reader.ID + `'`},
	}
	tried := false
	mv := r.mover(t, Config{Drain: -1, PurgeDelay: time.Millisecond, Progress: func(p Progress) {
		// "final" is reported after the final round, which runs after the
		// fence committed: the writes of a node that missed the freeze.
		if p.Phase != "final" || tried {
			return
		}
		tried = true
		for _, w := range writes {
			err := w.do()
			if err == nil {
				t.Errorf("%s on the fenced source succeeded", w.name)
			} else if !storeguard.Lost(err) {
				t.Errorf("%s on the fenced source: %v, not an error a client retries (503)", w.name, err)
			}
		}
		for _, w := range raw {
			_, err := r.dbs["eu1"].Exec(w.q)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "40001" {
				t.Errorf("%s on the fenced source: %v, want SQLSTATE 40001", w.name, err)
			}
		}
	}})
	sum, err := mv.Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatalf("purge: %v", err)
	}
	if !tried {
		t.Fatal("no final round reported")
	}
	if left := counts(t, r.dbs["eu1"], tm.ws.ID); total(left) != 0 {
		t.Errorf("the source still holds rows of the moved workspace: %v", left)
	}
	// The target has the state as of the fence: none of the refused writes.
	var seq int64
	if err := r.dbs["eu2"].QueryRow(`SELECT last_read_seq FROM channel_members WHERE channel_id = $1 AND user_id = $2`,
		ch.ID, reader.ID).Scan(&seq); err != nil || seq == last.Seq {
		t.Errorf("the reader's marker on the target: %d (%v); the refused one was %d", seq, err, last.Seq)
	}
	if th, err := tgt.FollowThread(ctx, follower.ID, root.ID); err != nil || !th.Following {
		t.Errorf("a follow on the target, where the workspace now is: %+v, %v", th, err)
	}
	// Another workspace on the source is not fenced.
	if _, err := src.MarkRead(ctx, other.members[1].ID, other.channels[0].ID, 1); err != nil {
		t.Errorf("a read marker of another workspace on the source: %v", err)
	}
	if err := src.SetMemberRole(ctx, other.owner.ID, other.ws.ID, other.members[1].ID, parley.RoleAdmin); err != nil {
		t.Errorf("a role change in another workspace on the source: %v", err)
	}
}

// TestFenceWaitsForWritesInFlight shows the handshake's order with two
// connections: a write that passed the fence's check (a read marker, which
// appends no event) holds its transaction open; the mover's fence then
// waits for it (its lock request is seen pending, and no final round
// starts); once the write commits the fence completes, and the final round
// copies the write to the target.
func TestFenceWaitsForWritesInFlight(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src := r.stores["eu1"]
	tm := seedTeam(t, src, nil, 20)
	r.place(t, tm.ws.ID, "eu1")
	ch := tm.channels[1]
	last := storetest.MustPost(t, src, tm.owner, ch, "the latest")
	reader := tm.members[2]

	var writer *sql.Tx
	var final atomic.Bool
	opened := make(chan error, 1)
	mv := r.mover(t, Config{Drain: -1, Progress: func(p Progress) {
		switch p.Phase {
		case "freeze":
			// A node that admitted the write before it heard of the
			// freeze: its transaction is under way on the source.
			tx, err := r.dbs["eu1"].Begin()
			if err == nil {
				_, err = tx.Exec(`UPDATE channel_members SET last_read_seq = $1 WHERE channel_id = $2 AND user_id = $3`,
					last.Seq, ch.ID, reader.ID)
			}
			writer = tx
			opened <- err
		case "final":
			final.Store(true)
		}
	}})
	done := make(chan error, 1)
	var sum *Summary
	go func() {
		var err error
		sum, err = mv.Run(ctx, tm.ws.ID, "eu2")
		done <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("the move ended before its freeze: %v", err)
	}
	t.Cleanup(func() { writer.Rollback() }) // a failed test's writer must not hold the mover forever
	waitFor(t, 20*time.Second, "the fence to wait for the write in flight", func() bool {
		var n int
		if err := r.dbs["eu1"].QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = $1 AND objsubid = 2`, fenceLockClass).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if final.Load() {
		t.Fatal("the final round ran while a write that passed the fence was still open")
	}
	var fenced int
	if err := r.dbs["eu1"].QueryRow(`SELECT COUNT(*) FROM `+fenceTable+` WHERE workspace = $1`, tm.ws.ID).Scan(&fenced); err != nil || fenced != 0 {
		t.Fatalf("the fence row committed before the write in flight: %d, %v", fenced, err)
	}
	if err := writer.Commit(); err != nil {
		t.Fatalf("the write in flight: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("move: %v", err)
	}
	if !final.Load() {
		t.Error("no final round reported")
	}
	var seq int64
	if err := r.dbs["eu2"].QueryRow(`SELECT last_read_seq FROM channel_members WHERE channel_id = $1 AND user_id = $2`,
		ch.ID, reader.ID).Scan(&seq); err != nil || seq != last.Seq {
		t.Fatalf("the write in flight on the target: last_read_seq %d (%v), want %d", seq, err, last.Seq)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatalf("purge: %v", err)
	}
}

// TestInstallFence: the fence's triggers are derived from the schema —
// every table attributed to a workspace, a table a migration adds among
// them, with its argument; none on the accounts, orgs or the outbox —
// installed by concurrent movers at once without error, and the first
// version's trigger (events only) is replaced.
func TestInstallFence(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	db := r.dbs["eu1"]
	// The first version, as a shard moved from before has it.
	for _, q := range []string{
		`CREATE TABLE ` + fenceTable + ` (workspace TEXT PRIMARY KEY, fenced_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
		`CREATE FUNCTION shardmove_fenced() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`,
		`CREATE TRIGGER shardmove_fence BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION shardmove_fenced()`,
		`CREATE TABLE fence_extra (workspace_id TEXT NOT NULL, id TEXT PRIMARY KEY)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- installFence(ctx, db, nil) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent installs: %v", err)
		}
	}
	got := map[string]string{}
	rows, err := db.Query(`SELECT c.relname, t.tgname, encode(t.tgargs, 'escape') FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE NOT t.tgisinternal AND t.tgname LIKE 'shardmove%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var rel, name, args string
		if err := rows.Scan(&rel, &name, &args); err != nil {
			t.Fatal(err)
		}
		if name != fenceTrigger {
			t.Errorf("trigger %s still on %s", name, rel)
		}
		got[rel] = strings.TrimSuffix(args, `\000`)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"events": "workspace_id", "messages": "workspace_id", "channel_members": "workspace_id",
		"thread_memberships": "workspace_id", "workspace_members": "workspace_id", "fence_extra": "workspace_id",
		"workspaces": "id", "notify_sent": "channel"}
	for rel, arg := range want {
		if got[rel] != arg {
			t.Errorf("trigger on %s: argument %q, want %q", rel, got[rel], arg)
		}
	}
	for _, rel := range []string{"users", "sessions", "notify_prefs", "notify_state", "orgs", "channel_outbox", "settings", fenceTable} {
		if _, ok := got[rel]; ok {
			t.Errorf("%s is fenced", rel)
		}
	}
	var old int
	if err := db.QueryRow(`SELECT COUNT(*) FROM pg_proc WHERE proname = 'shardmove_fenced'`).Scan(&old); err != nil || old != 0 {
		t.Errorf("the first version's function: %d, %v", old, err)
	}
	// Installing again leaves the triggers as they are (creating one
	// would lock its table against writes).
	versions := func() string {
		var v string
		if err := db.QueryRow(`SELECT string_agg(xmin::text, ',' ORDER BY oid) FROM pg_trigger WHERE tgname = $1`, fenceTrigger).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := versions()
	if err := installFence(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	if after := versions(); after != before {
		t.Errorf("a second install rewrote the triggers: %s → %s", before, after)
	}
}
