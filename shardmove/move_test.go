package shardmove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/storeguard"
	"parley/storetest"
	"parley/tenantdir"
)

// ack is a post a writer was told had committed.
type ack struct {
	shard, channel, id string
	seq                int64
}

// writers post continuously into a workspace the way a router will send
// them: each write first looks the workspace up through the directory
// client, backs off while it is read_only and goes to the store of the
// shard the record names.
type writers struct {
	acks    sync.Map // writer index -> []ack (each writer's own slice)
	refused atomic.Int64
	errs    chan error
	stop    chan struct{}
	wg      sync.WaitGroup
	n       atomic.Int64
	onShard sync.Map // shard -> *atomic.Int64
}

func startWriters(t testing.TB, r *rig, tm *team, perChannel int, every time.Duration) *writers {
	t.Helper()
	w := &writers{errs: make(chan error, 100), stop: make(chan struct{})}
	idx := 0
	for _, ch := range tm.channels {
		for k := range perChannel {
			me, u := idx, tm.members[1+k%(len(tm.members)-1)]
			idx++
			w.wg.Go(func() {
				var mine []ack
				var tops []string // this writer's top-level posts, never deleted
				defer func() { w.acks.Store(me, mine) }()
				tick := time.NewTicker(every)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-w.stop:
						return
					case <-tick.C:
					}
					ctx := context.Background()
					rec, err := r.client.Lookup(ctx, tm.ws.ID)
					if err != nil {
						w.errs <- fmt.Errorf("lookup: %w", err)
						return
					}
					if rec.Status == tenantdir.StatusReadOnly {
						w.refused.Add(1) // the router's 503 + Retry-After
						continue
					}
					st := r.stores[rec.ShardID]
					m, created, err := st.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{
						Text: fmt.Sprintf("writer %d post %d", me, n), ClientMsgID: fmt.Sprintf("w%d-%d", me, n)})
					if storeguard.Lost(err) {
						// The source's fence: a write admitted just before
						// the freeze reached the shard after the fence (a
						// 503 the client retries).
						w.refused.Add(1)
						continue
					}
					if err != nil || !created {
						w.errs <- fmt.Errorf("writer %d post %d on %s: created %v, %w", me, n, rec.ShardID, created, err)
						return
					}
					mine = append(mine, ack{shard: rec.ShardID, channel: ch.ID, id: m.ID, seq: m.Seq})
					tops = append(tops, m.ID)
					// Changes to older rows, which the catch-up must find too.
					if err := func() error {
						switch n % 6 {
						case 1:
							_, err = st.AddReaction(ctx, u.ID, m.ID, "eyes")
						case 2:
							_, err = st.EditMessage(ctx, u.ID, tops[max(0, len(tops)-3)], "edited")
						case 3:
							var re *parley.Message
							re, _, err = st.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{Text: "a reply", ThreadRootID: m.ID,
								ClientMsgID: fmt.Sprintf("w%d-%d-reply", me, n)})
							if err == nil {
								mine = append(mine, ack{shard: rec.ShardID, channel: ch.ID, id: re.ID, seq: re.Seq})
								if n%4 == 3 {
									err = st.DeleteMessage(ctx, u.ID, re.ID)
								}
							}
						case 4:
							_, err = st.Pin(ctx, u.ID, m.ID)
						case 5:
							// A write that appends no event: the catch-up
							// compares its table whole, the fence covers it.
							_, err = st.MarkRead(ctx, tm.members[0].ID, ch.ID, m.Seq)
						}
						return err
					}(); err != nil {
						if parley.ErrorCode(err) == parley.ECONFLICT || parley.ErrorCode(err) == parley.ELIMIT {
							continue // a cap (pins), not a failure
						}
						if storeguard.Lost(err) {
							w.refused.Add(1) // the fence, as above
							continue
						}
						w.errs <- fmt.Errorf("writer %d change %d on %s: %w", me, n, rec.ShardID, err)
						return
					}
					w.n.Add(1)
					c, _ := w.onShard.LoadOrStore(rec.ShardID, new(atomic.Int64))
					c.(*atomic.Int64).Add(1)
				}
			})
		}
	}
	return w
}

func (w *writers) on(shard string) int64 {
	c, ok := w.onShard.Load(shard)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

func (w *writers) finish(t testing.TB) []ack {
	t.Helper()
	close(w.stop)
	w.wg.Wait()
	close(w.errs)
	for err := range w.errs {
		t.Error(err)
	}
	var all []ack
	w.acks.Range(func(_, v any) bool {
		all = append(all, v.([]ack)...)
		return true
	})
	return all
}

// TestMoveWhileWriting moves a busy workspace and checks nothing a writer
// was told had committed is lost, duplicated or reordered, the target
// passes the store's invariants, the source is emptied, and the other
// workspaces on both shards are untouched.
func TestMoveWhileWriting(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src, tgt := r.stores["eu1"], r.stores["eu2"]
	shared := storetest.MustUser(t, src, "shared")
	tm := seedTeam(t, src, shared, 200)
	other := seedTeam(t, src, shared, 40) // a second workspace on the source, sharing an account
	far := seedTeam(t, tgt, nil, 40)      // one already on the target
	r.place(t, tm.ws.ID, "eu1")
	otherBefore, farBefore := sums(t, r.dbs["eu1"], other.ws.ID), sums(t, r.dbs["eu2"], far.ws.ID)

	w := startWriters(t, r, tm, 2, 20*time.Millisecond)
	waitFor(t, 20*time.Second, "writers under way", func() bool { return w.n.Load() >= 30 })

	var phases sync.Map
	mv := r.mover(t, Config{Drain: 100 * time.Millisecond, PurgeDelay: 300 * time.Millisecond, Batch: 100, Checksums: true,
		Progress: func(p Progress) { phases.Store(p.Phase, true) }})
	sum, err := mv.Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	// The source is frozen as verified until the purge starts.
	srcLog := eventLog(t, r.dbs["eu1"], tm.ws.ID)
	rec, err := r.cat.Workspace(ctx, tm.ws.ID)
	if err != nil || rec.ShardID != "eu2" || rec.Status != tenantdir.StatusActive || rec.TargetShard != "" {
		t.Fatalf("catalogue after the move: %+v, %v", rec, err)
	}
	waitFor(t, 20*time.Second, "writers on the target", func() bool { return w.on("eu2") >= 30 })
	acks := w.finish(t)
	t.Logf("move: %d rows copied, %d caught up in %d+%d rounds, read-only %v; %d posts (%d on the source, %d on the target), %d refused while read-only",
		sum.RowsCopied, sum.RowsCaughtUp, sum.Rounds, sum.FinalRounds, sum.ReadOnly, len(acks), w.on("eu1"), w.on("eu2"), w.refused.Load())

	if w.on("eu1") == 0 {
		t.Error("no post reached the source during the move: the test moved an idle workspace")
	}
	if w.refused.Load() == 0 {
		t.Error("no write was refused: the writers never saw the read-only window")
	}
	for _, p := range []string{"copy", "catchup", "freeze", "final", "switch"} {
		if _, ok := phases.Load(p); !ok {
			t.Errorf("no %s progress reported", p)
		}
	}
	if sum.ReadOnly <= 0 || sum.RowsCopied == 0 || sum.Tables["messages"] == 0 {
		t.Errorf("summary: %+v", sum)
	}

	// Every acknowledged post is in the target's log at its seq, once.
	tgtLog := eventLog(t, r.dbs["eu2"], tm.ws.ID)
	created := map[string]int{}
	for ch, log := range tgtLog {
		for i, e := range log {
			if e.seq != int64(i+1) {
				t.Fatalf("channel %s: seq %d at position %d: a gap or a repeat", ch, e.seq, i)
			}
			if e.typ == parley.EventMessageCreated {
				var d struct {
					Message struct {
						ID string `json:"id"`
					} `json:"message"`
				}
				if err := json.Unmarshal([]byte(e.data), &d); err != nil {
					t.Fatal(err)
				}
				created[d.Message.ID]++
			}
		}
	}
	for id, n := range created {
		if n != 1 {
			t.Errorf("message %s created %d times in the log", id, n)
		}
	}
	for _, a := range acks {
		log := tgtLog[a.channel]
		if a.seq < 1 || a.seq > int64(len(log)) || !strings.Contains(log[a.seq-1].data, a.id) || log[a.seq-1].typ != parley.EventMessageCreated {
			t.Errorf("post %s (seq %d in %s, on %s) is not at its seq in the target's log", a.id, a.seq, a.channel, a.shard)
		}
	}
	// The source's log as of the switch is the start of the target's,
	// event for event.
	for ch, log := range srcLog {
		if len(log) > len(tgtLog[ch]) {
			t.Fatalf("channel %s: the source has %d events, the target %d", ch, len(log), len(tgtLog[ch]))
		}
		for i := range log {
			if log[i] != tgtLog[ch][i] {
				t.Fatalf("channel %s seq %d differs: source %+v, target %+v", ch, log[i].seq, log[i], tgtLog[ch][i])
			}
		}
	}
	storetest.CheckWorkspace(t, tgt, tm.owner.ID, tm.ws.ID)

	if err := <-sum.Purged; err != nil {
		t.Fatalf("purge: %v", err)
	}
	if left := counts(t, r.dbs["eu1"], tm.ws.ID); total(left) != 0 {
		t.Errorf("the source still holds rows of the moved workspace: %v", left)
	}
	if got := sums(t, r.dbs["eu1"], other.ws.ID); !maps.Equal(got, otherBefore) {
		t.Errorf("the other workspace on the source changed")
	}
	if got := sums(t, r.dbs["eu2"], far.ws.ID); !maps.Equal(got, farBefore) {
		t.Errorf("the workspace already on the target changed")
	}
	storetest.CheckWorkspace(t, src, other.owner.ID, other.ws.ID)
	if _, err := src.GetMe(ctx, shared.ID); err != nil {
		t.Errorf("the shared account left the source: %v", err)
	}
}

// TestMoveCopiesEveryTable moves an idle workspace and compares every
// table the schema attributes to a workspace, row for row; a table the
// mover cannot attribute stops the move before anything changes.
func TestMoveCopiesEveryTable(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src := r.stores["eu1"]
	tm := seedTeam(t, src, nil, 120)
	other := seedTeam(t, src, nil, 10)
	r.place(t, tm.ws.ID, "eu1")
	// A table a later migration might add: copied because it has a
	// workspace_id, with no change to the mover.
	for _, id := range []string{"eu1", "eu2"} {
		if _, err := r.dbs[id].Exec(`CREATE TABLE move_extra (workspace_id TEXT NOT NULL, id TEXT NOT NULL, note TEXT,
			PRIMARY KEY (workspace_id, id))`); err != nil {
			t.Fatal(err)
		}
	}
	// And one keyed by a channel only, as notify_sent is.
	for _, id := range []string{"eu1", "eu2"} {
		if _, err := r.dbs[id].Exec(`CREATE TABLE move_by_channel (channel_id TEXT NOT NULL, k TEXT NOT NULL,
			PRIMARY KEY (channel_id, k))`); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range []string{tm.channels[0].ID, tm.channels[1].ID, other.channels[0].ID} {
		if _, err := r.dbs["eu1"].Exec(`INSERT INTO move_by_channel VALUES ($1, $2)`, ch, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, ws := range []string{tm.ws.ID, tm.ws.ID, tm.ws.ID, other.ws.ID} {
		if _, err := r.dbs["eu1"].Exec(`INSERT INTO move_extra VALUES ($1, $2, 'x')`, ws, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("unattributable table", func(t *testing.T) {
		if _, err := r.dbs["eu1"].Exec(`CREATE TABLE move_orphan (message_id TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		_, err := r.mover(t, Config{}).Run(ctx, tm.ws.ID, "eu2")
		if !errors.Is(err, errUnclassified) || !strings.Contains(err.Error(), "move_orphan") {
			t.Fatalf("move with an unattributable table: %v", err)
		}
		rec, _ := r.cat.Workspace(ctx, tm.ws.ID)
		if rec.ShardID != "eu1" || rec.Status != tenantdir.StatusActive || rec.TargetShard != "" {
			t.Fatalf("catalogue after the refused move: %+v", rec)
		}
		if n := total(counts(t, r.dbs["eu2"], tm.ws.ID)); n != 0 {
			t.Fatalf("the target holds %d rows after the refused move", n)
		}
		if _, err := r.dbs["eu1"].Exec(`DROP TABLE move_orphan`); err != nil {
			t.Fatal(err)
		}
	})

	before, beforeSums := counts(t, r.dbs["eu1"], tm.ws.ID), sums(t, r.dbs["eu1"], tm.ws.ID)
	for _, tbl := range []string{"messages", "events", "reactions", "pins", "threads", "mentions", "invites", "channel_members", "move_extra", "move_by_channel"} {
		if before[tbl] == 0 {
			t.Fatalf("the seed wrote no %s: the test would not see it forgotten", tbl)
		}
	}
	sum, err := r.mover(t, Config{Batch: 7, PurgeDelay: time.Millisecond}).Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if after := counts(t, r.dbs["eu2"], tm.ws.ID); !maps.Equal(after, before) {
		t.Errorf("rows per table differ:\nsource %v\ntarget %v", before, after)
	}
	if after := sums(t, r.dbs["eu2"], tm.ws.ID); !maps.Equal(after, beforeSums) {
		for k := range after {
			if after[k] != beforeSums[k] {
				t.Errorf("table %s differs after the move", k)
			}
		}
	}
	if sum.RowsCopied < total(before) {
		t.Errorf("copied %d rows of %d", sum.RowsCopied, total(before))
	}
	storetest.CheckWorkspace(t, r.stores["eu2"], tm.owner.ID, tm.ws.ID)
	// The members' accounts came along: they can post on the target.
	storetest.MustPost(t, r.stores["eu2"], tm.members[2], tm.channels[0], "hello from the new shard")
	if err := <-sum.Purged; err != nil {
		t.Fatal(err)
	}
	if n := total(counts(t, r.dbs["eu1"], tm.ws.ID)); n != 0 {
		t.Errorf("source holds %d rows after the purge", n)
	}
	var n int
	if err := r.dbs["eu1"].QueryRow(`SELECT COUNT(*) FROM move_extra WHERE workspace_id = $1`, other.ws.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("the other workspace's extra rows: %d, %v", n, err)
	}
	if err := r.dbs["eu1"].QueryRow(`SELECT COUNT(*) FROM move_by_channel`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows by channel left on the source: %d (want the other workspace's 1), %v", n, err)
	}
}

// TestMoveAbortMidCopy fails a move half-way through its copy: the
// workspace stays active on its source, unchanged, the target holds none
// of it, neither has the fence's triggers, and the move can be run again.
func TestMoveAbortMidCopy(t *testing.T) {
	r := newRig(t)
	src := r.stores["eu1"]
	tm := seedTeam(t, src, nil, 150)
	r.place(t, tm.ws.ID, "eu1")
	before := sums(t, r.dbs["eu1"], tm.ws.ID)

	ctx, cancel := context.WithCancel(context.Background())
	copied := 0
	mv := r.mover(t, Config{Batch: 10, Progress: func(p Progress) {
		if p.Phase == "copy" {
			if copied++; copied == 3 {
				cancel() // the mover dies (or its database goes) mid-copy
			}
		}
	}})
	_, err := mv.Run(ctx, tm.ws.ID, "eu2")
	if err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("move cancelled mid-copy: %v", err)
	}
	rec, _ := r.cat.Workspace(context.Background(), tm.ws.ID)
	if rec.ShardID != "eu1" || rec.Status != tenantdir.StatusActive || rec.TargetShard != "" {
		t.Fatalf("catalogue after the abort: %+v", rec)
	}
	if n := total(counts(t, r.dbs["eu2"], tm.ws.ID)); n != 0 {
		t.Fatalf("the target holds %d rows after the abort", n)
	}
	// The source's triggers (installed before the copy) went with the abort.
	noFence(t, r.dbs["eu1"], "the source after the abort")
	noFence(t, r.dbs["eu2"], "the target after the abort")
	if got := sums(t, r.dbs["eu1"], tm.ws.ID); !maps.Equal(got, before) {
		t.Fatal("the source changed")
	}
	storetest.CheckWorkspace(t, src, tm.owner.ID, tm.ws.ID)

	sum, err := r.mover(t, Config{PurgeDelay: time.Millisecond}).Run(context.Background(), tm.ws.ID, "eu2")
	if err != nil {
		t.Fatalf("the move run again: %v", err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatal(err)
	}
	storetest.CheckWorkspace(t, r.stores["eu2"], tm.owner.ID, tm.ws.ID)
}

// TestMoveAfterMoverCrash runs a move again after a mover died: mid-move
// (the workspace read_only, a partial copy on the target) and after the
// switch (the source not yet purged); the dead movers' registrations,
// fence rows and triggers are gone once the move has been run again.
func TestMoveAfterMoverCrash(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src := r.stores["eu1"]
	tm := seedTeam(t, src, nil, 60)
	r.place(t, tm.ws.ID, "eu1")
	// The dead mover got as far as the freeze and left a partial, and
	// wrong, copy behind.
	if _, err := r.cat.BeginMove(ctx, tm.ws.ID, "eu2"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cat.Freeze(ctx, tm.ws.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dbs["eu2"].Exec(`INSERT INTO events VALUES ($1, 'ghost', 1, 'message.created', '{}', 0)`, tm.ws.ID); err != nil {
		t.Fatal(err)
	}
	// It had registered itself on both shards, the source's triggers in.
	if err := registerMove(ctx, r.dbs["eu1"], tm.ws.ID, roleSource, nil); err != nil {
		t.Fatal(err)
	}
	if err := registerMove(ctx, r.dbs["eu2"], tm.ws.ID, roleTarget, nil); err != nil {
		t.Fatal(err)
	}
	before := counts(t, r.dbs["eu1"], tm.ws.ID)
	sum, err := r.mover(t, Config{PurgeDelay: time.Hour}).Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatalf("move after a crash mid-move: %v", err)
	}
	// The target's registration went at the switch; the source keeps its
	// own (this move's) and the triggers until its purge.
	noFence(t, r.dbs["eu2"], "the target after the restarted move")
	if moves, _ := registry(t, r.dbs["eu1"]); fmt.Sprint(moves) != fmt.Sprint([]string{tm.ws.ID + "/source"}) {
		t.Errorf("the source's registry before its purge: %v", moves)
	}
	if after := counts(t, r.dbs["eu2"], tm.ws.ID); !maps.Equal(after, before) {
		t.Fatalf("target after the restarted move: %v, source had %v", after, before)
	}
	storetest.CheckWorkspace(t, r.stores["eu2"], tm.owner.ID, tm.ws.ID)
	// This mover dies too, before its purge (PurgeDelay an hour): running
	// the move again finishes it.
	if n := total(counts(t, r.dbs["eu1"], tm.ws.ID)); n == 0 {
		t.Fatal("the source was purged already")
	}
	// A write that reached the old source after the switch is not swept
	// away: the rows stay and the run says so. The source's fence refuses
	// such a write (TestMoveFencesTheSource); this one goes around it
	// (triggers off, as an operator's hand could).
	tx, err := r.dbs["eu1"].Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO events VALUES ($1, $2, 1000000, 'message.created', '{}', 0)`,
		tm.ws.ID, tm.channels[0].ID); err == nil {
		t.Fatal("the fence let a late event in")
	}
	tx.Rollback()
	if tx, err = r.dbs["eu1"].Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO events VALUES ($1, $2, 1000000, 'message.created', '{}', 0)`,
		tm.ws.ID, tm.channels[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	sum, err = r.mover(t, Config{}).Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err == nil || !strings.Contains(err.Error(), "not purged") {
		t.Fatalf("sweep of a source written after the switch: %v", err)
	}
	if n := total(counts(t, r.dbs["eu1"], tm.ws.ID)); n == 0 {
		t.Fatal("the late write was swept away")
	}
	if len(fenceTriggers(t, r.dbs["eu1"])) == 0 {
		t.Error("a source kept for an operator lost its fence's triggers")
	}
	// (The fence refuses the operator's clean-up too, but for the
	// mover's bypass.)
	if _, err := r.dbs["eu1"].Exec(`DELETE FROM events WHERE seq = 1000000`); err == nil {
		t.Fatal("the fence let a late event's deletion through")
	}
	if _, err := bypassExec(ctx, r.dbs["eu1"], `DELETE FROM events WHERE seq = 1000000`); err != nil {
		t.Fatal(err)
	}
	sum, err = r.mover(t, Config{}).Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatal(err)
	}
	if n := total(counts(t, r.dbs["eu1"], tm.ws.ID)); n != 0 {
		t.Fatalf("the source holds %d rows after the second run", n)
	}
	// The sweep removed the dead movers' registrations, fence and triggers.
	noFence(t, r.dbs["eu1"], "the source after the sweep")
	noFence(t, r.dbs["eu2"], "the target after the sweep")
	storetest.CheckWorkspace(t, r.stores["eu2"], tm.owner.ID, tm.ws.ID)
}

// TestMoveRefused: bad input and a second mover change nothing.
func TestMoveRefused(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src := r.stores["eu1"]
	tm := seedTeam(t, src, nil, 5)
	r.place(t, tm.ws.ID, "eu1")
	mv := r.mover(t, Config{})
	for _, c := range []struct{ ws, to string }{
		{"no-such-workspace", "eu2"},
		{"bad\x00id", "eu2"},
		{strings.Repeat("w", 100_000), "eu2"},
		{tm.ws.ID, "eu9"},
		{tm.ws.ID, ""},
		{tm.ws.ID, "eu2\x00"},
	} {
		if _, err := mv.Run(ctx, c.ws, c.to); err == nil {
			t.Errorf("move %.20q to %q: no error", c.ws, c.to)
		}
	}
	// A target whose database is gone: the move is aborted, the
	// workspace stays active on its source.
	if _, err := r.cat.AddShard(ctx, tenantdir.Shard{ID: "eu3", Region: "eu", Capacity: 10,
		DSN: strings.Replace(r.dsn["eu2"], "parley_test_", "parley_gone_", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := mv.Run(ctx, tm.ws.ID, "eu3"); err == nil || !strings.Contains(err.Error(), "eu3") {
		t.Errorf("move to a shard whose database is gone: %v", err)
	}
	// A second mover of the same workspace is refused while one runs.
	unlock, err := lockMove(ctx, r.dbs["eu1"], tm.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mv.Run(ctx, tm.ws.ID, "eu2"); err == nil || !strings.Contains(err.Error(), "another mover") {
		t.Errorf("a second mover: %v", err)
	}
	unlock()
	rec, _ := r.cat.Workspace(ctx, tm.ws.ID)
	if rec.ShardID != "eu1" || rec.Status != tenantdir.StatusActive || rec.TargetShard != "" {
		t.Fatalf("catalogue after refused moves: %+v", rec)
	}
	if n := total(counts(t, r.dbs["eu2"], tm.ws.ID)); n != 0 {
		t.Fatalf("the target holds %d rows", n)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("a mover without a catalogue")
	}
}
