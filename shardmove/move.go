package shardmove

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"parley"
	"parley/tenantdir"
)

// job is one move in progress.
type job struct {
	mv       *Mover
	ws       string
	src, tgt *sql.DB
	s        *schema
	sum      *Summary
	org      string
	users    map[string]bool // the accounts the workspace needs on the target
	userList []string
}

// snapshot opens a read-only REPEATABLE READ transaction on the source:
// one consistent view for a whole copy or round, taken without a lock
// that a writer would wait for.
func (j *job) snapshot(ctx context.Context) (*sql.Tx, error) {
	tx, err := j.src.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return tx, nil
}

// scopeOf selects the workspace's rows of t.
func (j *job) scopeOf(t *table) scope {
	switch t.class {
	case workspaceRow:
		return scope{where: "id = $1", args: []any{j.ws}}
	case byChannel:
		return scope{where: "channel_id IN (SELECT id FROM channels WHERE workspace_id = $1)", args: []any{j.ws}}
	case byUser:
		col := "user_id"
		if t.name == "users" {
			col = "id"
		}
		return scope{where: col + " = ANY($1)", args: []any{j.userList}}
	case byOrg:
		return scope{where: "id = $1", args: []any{j.org}}
	}
	return scope{where: "workspace_id = $1", args: []any{j.ws}}
}

// prepare migrates the target, reads both schemas and clears any rows of
// the workspace the target holds (an earlier attempt's).
func (j *job) prepare(ctx context.Context, rec tenantdir.Record) error {
	if !j.mv.cfg.NoMigrate {
		if err := ensureSchema(ctx, rec.TargetDSN); err != nil {
			return err
		}
	}
	// The move is registered on the target (fence.go), and the target's
	// fence lifted for ws: it may be a shard ws was moved away from
	// earlier.
	if err := registerMove(ctx, j.tgt, j.ws, roleTarget, j.mv.m); err != nil {
		return err
	}
	if err := setFence(ctx, j.tgt, j.ws, false); err != nil {
		return err
	}
	var err error
	if j.s, err = loadSchema(ctx, j.src); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	ts, err := loadSchema(ctx, j.tgt)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if err := sameSchema(j.s, ts); err != nil {
		return err
	}
	n, err := deleteWorkspace(ctx, j.tgt, j.s, j.ws, j.mv.cfg.Batch, 0, nil)
	if err != nil {
		return fmt.Errorf("clear the target: %w", err)
	}
	if n > 0 {
		j.mv.log.Warn("the target held rows of the workspace: deleted them before copying", "workspace", j.ws, "rows", n)
	}
	return nil
}

// addUsers adds the ids the query returns to the accounts copied.
func (j *job) addUsers(ctx context.Context, q querier, query string) error {
	rows, err := q.QueryContext(ctx, query, j.ws)
	if err != nil {
		return fmt.Errorf("accounts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id sql.NullString
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("accounts: %w", err)
		}
		if id.Valid && !j.users[id.String] {
			j.users[id.String] = true
			j.userList = append(j.userList, id.String)
		}
	}
	return rows.Err()
}

// copy copies every row of the workspace from one snapshot of the source.
func (j *job) copy(ctx context.Context) error {
	start := time.Now()
	tx, err := j.snapshot(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT org_id FROM workspaces WHERE id = $1`, j.ws).Scan(&j.org); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "workspace %s has no row on its source shard", j.ws)
		}
		return fmt.Errorf("read workspace: %w", err)
	}
	// Every account a row of the workspace names: members, bots, and the
	// authors and reactors of old messages who have left since.
	var parts []string
	for _, t := range j.s.tables {
		if t.class == byWorkspace && contains(t.cols, "user_id") {
			parts = append(parts, `SELECT user_id FROM `+quote(t.name)+` WHERE workspace_id = $1`)
		}
	}
	if len(parts) > 0 {
		if err := j.addUsers(ctx, tx, strings.Join(parts, " UNION ")); err != nil {
			return err
		}
	}
	for _, t := range j.s.tables {
		n, err := copyRows(ctx, tx, j.tgt, t, j.scopeOf(t), j.mv.cfg.Batch, func(b int) {
			j.mv.m.rows.WithLabelValues("copy").Add(float64(b))
		})
		j.sum.RowsCopied += n
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		if n > 0 {
			j.mv.progress(Progress{Phase: "copy", Table: t.name, Rows: j.sum.RowsCopied})
		}
	}
	j.sum.Copy = time.Since(start)
	return tx.Commit()
}

// catchUp runs rounds until one changes at most LagRows rows, or
// MaxRounds have run.
func (j *job) catchUp(ctx context.Context) error {
	start := time.Now()
	defer func() { j.sum.CatchUp = time.Since(start) }()
	for r := 1; r <= j.mv.cfg.MaxRounds; r++ {
		n, lag, err := j.round(ctx)
		if err != nil {
			return fmt.Errorf("catch-up round %d: %w", r, err)
		}
		j.sum.Rounds = r
		j.sum.RowsCaughtUp += n
		j.mv.progress(Progress{Phase: "catchup", Round: r, Rows: n, Lag: lag})
		if n <= int64(j.mv.cfg.LagRows) {
			return nil
		}
	}
	return nil
}

// channelSeqs is the workspace's channels and their last_seq.
func channelSeqs(ctx context.Context, q querier, ws string) (map[string]int64, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, last_seq FROM channels WHERE workspace_id = $1`, ws)
	if err != nil {
		return nil, fmt.Errorf("channels: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, fmt.Errorf("channels: %w", err)
		}
		out[id] = seq
	}
	return out, rows.Err()
}

// round brings the target up to one new snapshot of the source. The
// channels whose last_seq differs between the two get their new events
// appended, and the messages those events name compared with their
// reactions and pins (every change to those tables appends an event
// naming the message, in the same transaction); every other table of the
// workspace is compared whole. It returns the rows written
// or deleted, and how many events the target was behind.
func (j *job) round(ctx context.Context) (int64, int64, error) {
	tx, err := j.snapshot(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback()
	have, err := channelSeqs(ctx, tx, j.ws)
	if err != nil {
		return 0, 0, err
	}
	got, err := channelSeqs(ctx, j.tgt, j.ws)
	if err != nil {
		return 0, 0, err
	}
	var changed, gone []string
	var lag int64
	for id, seq := range have {
		if g, ok := got[id]; !ok || g != seq {
			changed = append(changed, id)
			lag += seq - g
		}
	}
	for id := range got {
		if _, ok := have[id]; !ok {
			gone = append(gone, id)
			changed = append(changed, id)
		}
	}
	sort.Strings(changed)
	if err := j.addUsers(ctx, tx, `SELECT user_id FROM workspace_members WHERE workspace_id = $1`); err != nil {
		return 0, 0, err
	}
	// What the new events name: the messages they created or changed
	// (and those messages' thread roots), which are all the rows of the
	// logged tables that can have changed.
	batch := j.mv.cfg.Batch
	after := map[string]int64{}
	touched := map[string]bool{}
	for _, ch := range changed {
		if slices.Contains(gone, ch) {
			continue
		}
		var last int64
		if err := j.tgt.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE workspace_id = $1 AND channel_id = $2`,
			j.ws, ch).Scan(&last); err != nil {
			return 0, lag, fmt.Errorf("events: %w", err)
		}
		after[ch] = last
		if err := namedIn(ctx, tx, j.ws, ch, last, touched); err != nil {
			return 0, lag, err
		}
	}
	ids := slices.Sorted(maps.Keys(touched))
	var total int64
	for _, t := range j.s.tables {
		sc := j.scopeOf(t)
		var n int64
		switch {
		case t.name == "events":
			// The log is append-only: copy what follows the target's last seq.
			for _, ch := range changed {
				var c int64
				if slices.Contains(gone, ch) {
					c, err = deleteScope(ctx, j.tgt, t, sc.and("channel_id = $1", ch), batch)
				} else {
					c, err = copyRows(ctx, tx, j.tgt, t, sc.and("channel_id = $1 AND seq > $2", ch, after[ch]), batch, nil)
				}
				n += c
				if err != nil {
					break
				}
			}
		case loggedTables[t.name] && t.class == byWorkspace:
			if len(gone) == 0 {
				if len(ids) == 0 {
					continue
				}
				col := "message_id"
				if t.name == "messages" {
					col = "id"
				}
				sc = sc.and(col+" = ANY($1)", ids)
			}
			n, err = syncRows(ctx, tx, j.tgt, t, sc, batch, false)
		default:
			n, err = syncRows(ctx, tx, j.tgt, t, sc, batch, t.class == byUser || t.class == byOrg)
		}
		if err != nil {
			return total, lag, err
		}
		total += n
	}
	j.mv.m.rows.WithLabelValues("catchup").Add(float64(total))
	return total, lag, tx.Commit()
}

// switchOver freezes the workspace, drains, runs the final catch-up,
// checks both shards agree and switches the catalogue to the target. It
// returns the channels' last_seq as verified.
func (j *job) switchOver(ctx context.Context) (map[string]int64, error) {
	cat := j.mv.cfg.Catalogue
	start := time.Now()
	if _, err := cat.Freeze(ctx, j.ws); err != nil {
		return nil, err
	}
	j.mv.progress(Progress{Phase: "freeze", Note: fmt.Sprintf("read_only; draining %v", j.mv.cfg.Drain)})
	drainStart := time.Now()
	select {
	case <-time.After(j.mv.cfg.Drain):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	j.sum.Drain = time.Since(drainStart)
	// Fence the workspace in the source (fence.go): the fence commits once
	// every write of the workspace that passed the fence's check there has
	// finished, and no later one commits, so the final round sees the
	// source's last state.
	if err := setFence(ctx, j.src, j.ws, true); err != nil {
		return nil, err
	}
	var verified map[string]int64
	for attempt := 1; ; attempt++ {
		t0 := time.Now()
		n, lag, err := j.round(ctx)
		j.sum.Final += time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("final catch-up: %w", err)
		}
		j.sum.FinalRounds = attempt
		j.sum.RowsCaughtUp += n
		j.mv.progress(Progress{Phase: "final", Round: attempt, Rows: n, Lag: lag})
		t0 = time.Now()
		verified, err = j.verify(ctx)
		j.sum.Verify += time.Since(t0)
		if err == nil {
			break
		}
		if attempt == 3 {
			return nil, fmt.Errorf("verify: %w", err)
		}
		j.mv.log.Warn("the shards differ after the final catch-up: another round", "workspace", j.ws, "err", err)
	}
	if _, err := cat.CompleteMove(ctx, j.ws); err != nil {
		// The commit may have happened and its answer been lost.
		rec, rerr := cat.Workspace(context.WithoutCancel(ctx), j.ws)
		if rerr != nil || rec.ShardID != j.sum.To || rec.Status != tenantdir.StatusActive {
			return nil, err
		}
	}
	j.sum.ReadOnly = time.Since(start)
	j.mv.progress(Progress{Phase: "switch", Note: fmt.Sprintf("active on %s after %v read-only", j.sum.To, j.sum.ReadOnly.Round(time.Millisecond))})
	return verified, nil
}

// verify checks, on one snapshot of the source, that the target has the
// same channels at the same last_seq and the same number of rows in every
// table (and, with Checksums, the same rows).
func (j *job) verify(ctx context.Context) (map[string]int64, error) {
	tx, err := j.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	have, err := channelSeqs(ctx, tx, j.ws)
	if err != nil {
		return nil, err
	}
	got, err := channelSeqs(ctx, j.tgt, j.ws)
	if err != nil {
		return nil, err
	}
	if !maps.Equal(have, got) {
		return nil, fmt.Errorf("channels' last_seq differ: source %v, target %v", have, got)
	}
	scopes := make([]scope, len(j.s.tables))
	for i, t := range j.s.tables {
		scopes[i] = j.scopeOf(t)
	}
	var counts, tcounts map[string]int64
	if err := both(func() (err error) { counts, err = countAll(ctx, tx, j.s.tables, scopes); return },
		func() (err error) { tcounts, err = countAll(ctx, j.tgt, j.s.tables, scopes); return }); err != nil {
		return nil, err
	}
	var diffs []string
	for i, t := range j.s.tables {
		sc := scopes[i]
		a, b := counts[t.name], tcounts[t.name]
		keep := t.class == byUser || t.class == byOrg
		if a != b && !(keep && b > a) {
			diffs = append(diffs, fmt.Sprintf("%s: %d on the source, %d on the target", t.name, a, b))
		}
		if j.mv.cfg.Checksums && !keep {
			var x, y string
			if err := both(func() (err error) { x, err = tableSum(ctx, tx, t, sc); return },
				func() (err error) { y, err = tableSum(ctx, j.tgt, t, sc); return }); err != nil {
				return nil, err
			}
			if x != y {
				diffs = append(diffs, t.name+": checksums differ")
			}
		}
	}
	if len(diffs) > 0 {
		return nil, errors.New(strings.Join(diffs, "; "))
	}
	j.sum.Tables = counts
	return have, tx.Commit()
}

// purgeSource deletes the workspace's rows from the source once the
// switch has had PurgeDelay to reach every node, unless the source moved
// on since the check (a write that slipped past the freeze: the rows are
// kept for an operator, and the error says so).
func (mv *Mover) purgeSource(ws, shard, dsn string, s *schema, verified map[string]int64) error {
	time.Sleep(mv.cfg.PurgeDelay)
	ctx := context.Background()
	db, err := openShard(ctx, shard, dsn)
	if err != nil {
		return fmt.Errorf("purge source: %w", err)
	}
	defer db.Close()
	now, err := channelSeqs(ctx, db, ws)
	if err != nil {
		return fmt.Errorf("purge source: %w", err)
	}
	if !maps.Equal(now, verified) {
		mv.m.moves.WithLabelValues("source_changed").Inc()
		mv.log.Error("the source shard was written after the switch: its rows are kept", "workspace", ws, "shard", shard)
		return fmt.Errorf("purge source %s: the source was written after the switch (last_seq %v, verified %v): not purged", shard, now, verified)
	}
	n, err := deleteWorkspace(ctx, db, s, ws, mv.cfg.Batch, mv.cfg.PurgePause, func(table string, rows int64) {
		mv.m.rows.WithLabelValues("purge").Add(float64(rows))
		mv.progress(Progress{Phase: "purge", Table: table, Rows: rows})
	})
	if err != nil {
		return fmt.Errorf("purge source %s: %w", shard, err)
	}
	mv.log.Info("source purged", "workspace", ws, "shard", shard, "rows", n)
	// The source's part is over: its fence row goes (the workspace has no
	// rows left there for a stale write to change), and its triggers
	// unless another move has the shard as its source.
	uctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := unregisterMove(uctx, db, ws, roleSource, true, mv.m); err != nil {
		return fmt.Errorf("purge source %s: purged, but the fence stays (run the move again to remove it): %w", shard, err)
	}
	return nil
}

// deleteWorkspace deletes ws's rows from db, children first, batch rows a
// transaction, pausing between tables: the workspace's own tables, its
// channels' rows, its workspaces row, and its organisation if no other
// workspace there refers to it. Accounts stay.
func deleteWorkspace(ctx context.Context, db *sql.DB, s *schema, ws string, batch int, pause time.Duration,
	onTable func(string, int64)) (int64, error) {
	var org sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT org_id FROM workspaces WHERE id = $1`, ws).Scan(&org); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read workspace: %w", err)
	}
	j := &job{ws: ws}
	var total int64
	for i := len(s.tables) - 1; i >= 0; i-- {
		t := s.tables[i]
		if t.class != byWorkspace && t.class != byChannel && t.class != workspaceRow {
			continue
		}
		n, err := deleteScope(ctx, db, t, j.scopeOf(t), batch)
		total += n
		if err != nil {
			return total, err
		}
		if n > 0 {
			if onTable != nil {
				onTable(t.name, n)
			}
			if pause > 0 {
				time.Sleep(pause)
			}
		}
	}
	if org.Valid {
		if _, err := db.ExecContext(ctx, `DELETE FROM orgs WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM workspaces WHERE org_id = $1)`,
			org.String); err != nil {
			return total, fmt.Errorf("delete org: %w", err)
		}
	}
	return total, nil
}

// namedIn adds to ids every string in the data of channel ch's events
// after seq: message ids among them (the ids are compared against the
// messages table, so the other strings only cost a lookup).
func namedIn(ctx context.Context, q querier, ws, ch string, after int64, ids map[string]bool) error {
	rows, err := q.QueryContext(ctx, `SELECT data FROM events WHERE workspace_id = $1 AND channel_id = $2 AND seq > $3`, ws, ch, after)
	if err != nil {
		return fmt.Errorf("new events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return fmt.Errorf("new events: %w", err)
		}
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return fmt.Errorf("new events: channel %s: %w", ch, err)
		}
		strs(v, ids)
	}
	return rows.Err()
}

// strs adds the id-like strings of a decoded JSON value to out.
func strs(v any, out map[string]bool) {
	switch x := v.(type) {
	case string:
		if len(x) > 0 && len(x) <= 64 && !strings.ContainsAny(x, " \n") {
			out[x] = true
		}
	case []any:
		for _, e := range x {
			strs(e, out)
		}
	case map[string]any:
		for _, e := range x {
			strs(e, out)
		}
	}
}
