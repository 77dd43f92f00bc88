package shardmove

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strconv"
)

// The source's fence: the drain after the freeze is a time bound (a node
// that has not heard of read_only, or a write admitted just before it
// heard and slow to reach its COMMIT, may still write to the source), so
// before the final round the mover also fences the workspace in the
// source database itself, where every write has to go.
//
// A trigger on every table the mover attributes to a workspace (schema.go:
// the tables with a workspace_id, workspaces itself, and the tables keyed
// by a channel, through the channel's workspace, which never changes)
// checks each row inserted, updated or deleted: if shardmove_fence has a
// row for its workspace, the write fails with SQLSTATE 40001
// (serialization_failure: the store retries it a few times, then answers
// 503 with Retry-After, and the client's retry is routed to wherever the
// directory then says). The accounts (users, sessions, notify_prefs,
// notify_state) and orgs are not fenced: the purge never deletes them.
//
// The handshake: before reading shardmove_fence the trigger takes a
// shared transaction-level advisory lock keyed by the workspace, held
// until the writer's COMMIT or ROLLBACK; the mover inserts the fence row
// holding the exclusive one. So the fence commits only after every write
// that passed the check has finished (and the final round, which starts
// after, copies it), and a write checked later sees the row: one queued
// behind the mover's lock reads shardmove_fence after the fence committed
// (a READ COMMITTED statement takes a fresh snapshot; a writer at a
// stricter isolation that had to wait is refused outright, its snapshot
// being older than the fence). This replaces the lock fence the mover
// used to take on the channels' rows (SELECT … FOR SHARE), which waited
// only for writes that appended an event.
//
// The mover's own writes (the purge's and abort's deletes, the copy's
// upserts) set shardmove.bypass for their transaction (SET LOCAL), which
// the trigger honours; nothing else sets it.
//
// The fence row stays after the switch (a node still on its old record is
// refused, not silently writing to the old shard); it is removed when the
// move aborts, and from a shard a workspace is moved to.

const (
	fenceTable = "shardmove_fence"
	// fenceTrigger is the trigger's name on each fenced table, fenceFunc
	// its function. (shardmove_fence/shardmove_fenced, the events-only
	// first version, are dropped where found.)
	fenceTrigger = "shardmove_fence_write"
	fenceFunc    = "shardmove_fence_check"
	// fenceLockClass is the first key of the handshake's advisory locks;
	// the second is hashtext(workspace id). (Two keys: a separate space
	// from the single-key locks the mover takes elsewhere.) A collision of
	// two workspaces' hashes only makes one wait for the other's fence.
	fenceLockClass = 7391005
	// setBypass lets the mover's own writes through the fence; only the
	// mover runs it, inside its transactions.
	setBypass = `SET LOCAL shardmove.bypass = 'on'`
)

// fenceFuncSQL is the trigger function. Its argument says where the row's
// workspace is: 'workspace_id', 'id' (the workspaces table) or 'channel'
// (the channel's workspace).
var fenceFuncSQL = `CREATE OR REPLACE FUNCTION ` + fenceFunc + `() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	ws text;
BEGIN
	IF current_setting('shardmove.bypass', true) = 'on' THEN
		IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
		RETURN NEW;
	END IF;
	IF TG_ARGV[0] = 'workspace_id' THEN
		IF TG_OP = 'DELETE' THEN ws := OLD.workspace_id; ELSE ws := NEW.workspace_id; END IF;
	ELSIF TG_ARGV[0] = 'id' THEN
		IF TG_OP = 'DELETE' THEN ws := OLD.id; ELSE ws := NEW.id; END IF;
	ELSIF TG_OP = 'DELETE' THEN
		SELECT c.workspace_id INTO ws FROM channels c WHERE c.id = OLD.channel_id;
	ELSE
		SELECT c.workspace_id INTO ws FROM channels c WHERE c.id = NEW.channel_id;
	END IF;
	IF ws IS NOT NULL THEN
		IF NOT pg_try_advisory_xact_lock_shared(` + strconv.Itoa(fenceLockClass) + `, hashtext(ws)) THEN
			-- The mover is setting a fence: wait for it to commit.
			PERFORM pg_advisory_xact_lock_shared(` + strconv.Itoa(fenceLockClass) + `, hashtext(ws));
			IF current_setting('transaction_isolation') <> 'read committed' THEN
				RAISE EXCEPTION 'workspace % is being fenced on this shard (shardmove fence)', ws USING ERRCODE = '40001';
			END IF;
		END IF;
		IF EXISTS (SELECT 1 FROM ` + fenceTable + ` WHERE workspace = ws) THEN
			RAISE EXCEPTION 'workspace % has moved off this shard (shardmove fence)', ws USING ERRCODE = '40001';
		END IF;
	END IF;
	IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
	RETURN NEW;
END $$`

// unfenced are the workspace's tables the fence leaves open: the outbox's
// rows (sqlstore/outbox.go) are delivery bookkeeping that a node
// acknowledges, many channels of many workspaces a statement, after their
// events committed; refusing the acknowledgement of a fenced workspace's
// row would fail the others' with it, and losing it to the purge loses
// nothing (its events were copied by the final round, and are published
// again from the target's log if need be). A row is added there only with
// an event, which is fenced.
var unfenced = map[string]bool{"channel_outbox": true}

// fenceMode is the trigger argument for table t, "" for a table that is
// not fenced.
func fenceMode(t *table) string {
	if unfenced[t.name] {
		return ""
	}
	switch t.class {
	case byWorkspace:
		return "workspace_id"
	case workspaceRow:
		return "id"
	case byChannel:
		return "channel"
	}
	return ""
}

// installFence creates the fence's table and function, and its trigger on
// every table of the shard's schema the mover attributes to a workspace
// (so a table a later migration adds is fenced from the next move on),
// idempotently: under an advisory lock (concurrent CREATE OR REPLACE of
// one function can fail), and a trigger is created only where it is
// missing or differs, since creating one locks its table against writes.
// Until every table has its trigger no fence is set (the mover installs
// before it starts).
func installFence(ctx context.Context, db *sql.DB) error {
	s, err := loadSchema(ctx, db)
	if err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7391004417)`); err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+fenceTable+
		` (workspace TEXT PRIMARY KEY, fenced_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fenceFuncSQL); err != nil {
		return fmt.Errorf("install the fence: function: %w", err)
	}
	// The triggers there are: table -> trigger name -> argument.
	rows, err := tx.QueryContext(ctx, `SELECT c.relname, t.tgname, t.tgargs FROM pg_trigger t
		JOIN pg_class c ON c.oid = t.tgrelid
		WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND NOT t.tgisinternal AND t.tgname IN ($1, 'shardmove_fence')`, fenceTrigger)
	if err != nil {
		return fmt.Errorf("install the fence: read triggers: %w", err)
	}
	have := map[string]string{}
	var old []string
	for rows.Next() {
		var rel, name string
		var args []byte
		if err := rows.Scan(&rel, &name, &args); err != nil {
			rows.Close()
			return fmt.Errorf("install the fence: read triggers: %w", err)
		}
		if name == fenceTrigger {
			have[rel] = string(bytes.TrimSuffix(args, []byte{0}))
		} else {
			old = append(old, rel)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("install the fence: read triggers: %w", err)
	}
	rows.Close()
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	_, hasChannels := s.byName["channels"]
	for _, t := range s.tables {
		mode := fenceMode(t)
		if mode == "" || (mode == "channel" && !hasChannels) || have[t.name] == mode {
			continue
		}
		// One table a transaction: creating a trigger locks its table
		// against writes, and a transaction holding one table's lock while
		// waiting for another's deadlocks with the writers.
		if err := createFenceTrigger(ctx, db, t.name, mode); err != nil {
			return err
		}
	}
	// The first version's trigger (events only, INSERT only) goes once
	// the new ones are in.
	for _, rel := range old {
		if err := inTx(ctx, db, `DROP TRIGGER IF EXISTS shardmove_fence ON `+quote(rel)); err != nil {
			return fmt.Errorf("install the fence: drop the old trigger on %s: %w", rel, err)
		}
	}
	if len(old) > 0 {
		if err := inTx(ctx, db, `DROP FUNCTION IF EXISTS shardmove_fenced()`); err != nil {
			return fmt.Errorf("install the fence: drop the old function: %w", err)
		}
	}
	return nil
}

// createFenceTrigger puts the fence's trigger on table.
func createFenceTrigger(ctx context.Context, db *sql.DB, table, mode string) error {
	if err := inTx(ctx, db, `CREATE OR REPLACE TRIGGER `+fenceTrigger+
		` BEFORE INSERT OR UPDATE OR DELETE ON `+quote(table)+
		` FOR EACH ROW EXECUTE FUNCTION `+fenceFunc+`('`+mode+`')`); err != nil {
		return fmt.Errorf("install the fence: trigger on %s: %w", table, err)
	}
	return nil
}

// inTx runs one DDL statement in a transaction of its own, under the
// install's advisory lock.
func inTx(ctx context.Context, db *sql.DB, q string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7391004417)`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return err
	}
	return tx.Commit()
}

// setFence fences ws on db (on) or lifts its fence (off). Fencing takes the
// handshake's exclusive lock for ws first, so it commits only once every
// write of ws that passed the trigger's check has committed or rolled
// back.
func setFence(ctx context.Context, db *sql.DB, ws string, on bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence %s (%v): %w", ws, on, err)
	}
	defer tx.Rollback()
	q := `DELETE FROM ` + fenceTable + ` WHERE workspace = $1`
	if on {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, fenceLockClass, ws); err != nil {
			return fmt.Errorf("fence %s: wait for its writes in flight: %w", ws, err)
		}
		q = `INSERT INTO ` + fenceTable + ` (workspace) VALUES ($1) ON CONFLICT (workspace) DO NOTHING`
	}
	if _, err := tx.ExecContext(ctx, q, ws); err != nil {
		return fmt.Errorf("fence %s (%v): %w", ws, on, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence %s (%v): %w", ws, on, err)
	}
	return nil
}

// bypassExec runs one statement of the mover's on db in a transaction of
// its own that passes the fence.
func bypassExec(ctx context.Context, db *sql.DB, q string, args ...any) (sql.Result, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, setBypass); err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return res, tx.Commit()
}
