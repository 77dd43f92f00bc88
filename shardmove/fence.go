package shardmove

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
// The triggers exist only while a move needs them (their cost is a
// PL/pgSQL call in every write of every workspace on the shard): each move
// registers itself in the shard's shardmove_moves (registerMove) as the
// source or the target, after BeginMove and before the copy (so the DDL
// is not in the read-only window), and the source's triggers are
// installed then; it unregisters when its part on the shard is over (the
// target at the switch, the source when its purge completes, both on an
// abort), and the triggers are dropped when no move in progress has the
// shard as its source (unregisterMove). A mover that dies leaves its
// registration behind, and the triggers with it (a cost, not a hazard),
// until the move is run again (Mover.Run's recovery and sweep unregister
// it).
//
// The fence row stays from the fence until the source's purge completes
// (a node still on its old record is refused, not silently writing to the
// old shard), and goes with the registration then: the workspace's rows
// are gone from the source, so a stale write finds nothing to change
// there (ENOTFOUND or EFORBIDDEN from the store's own checks; no row of
// the workspace is written). It is lifted when the move aborts, and from
// a shard a workspace is moved to. After a purge that refused (the source
// was written after the switch), the registration, the fence and the
// triggers stay until the move is run again.

const (
	fenceTable = "shardmove_fence"
	// movesTable is the registry of moves in progress on the shard
	// (registerMove); roleSource and roleTarget its roles.
	movesTable = "shardmove_moves"
	roleSource = "source"
	roleTarget = "target"
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

// fenceObjects creates the fence's tables and function in tx (which holds
// the install lock). shardmove_moves is the registry of the moves in
// progress that involve the shard, by workspace and role: the triggers
// stay while it names a move whose source the shard is.
func fenceObjects(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS ` + fenceTable +
			` (workspace TEXT PRIMARY KEY, fenced_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
		`CREATE TABLE IF NOT EXISTS ` + movesTable +
			` (workspace TEXT NOT NULL, role TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (workspace, role))`,
		fenceFuncSQL,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// lockInstall takes the install lock for tx: every change to the fence's
// objects, triggers and registry is made under it.
func lockInstall(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7391004417)`)
	return err
}

// registerMove records on db that the move of ws involves it as role
// (roleSource or roleTarget), creating the fence's objects if need be;
// for a source it then installs the triggers (installFence). A target
// needs none: nothing but the mover writes ws there until the switch, and
// the mover's writes pass the fence anyway.
func registerMove(ctx context.Context, db *sql.DB, ws, role string, m *metrics) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("register the move on the %s: %w", role, err)
	}
	defer tx.Rollback()
	if err := lockInstall(ctx, tx); err != nil {
		return fmt.Errorf("register the move on the %s: %w", role, err)
	}
	if err := fenceObjects(ctx, tx); err != nil {
		return fmt.Errorf("register the move on the %s: %w", role, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+movesTable+` (workspace, role) VALUES ($1, $2)
		ON CONFLICT (workspace, role) DO UPDATE SET started_at = now()`, ws, role); err != nil {
		return fmt.Errorf("register the move on the %s: %w", role, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("register the move on the %s: %w", role, err)
	}
	if role != roleSource {
		return nil
	}
	return installFence(ctx, db, m)
}

// unregisterMove removes the move of ws as role from db's registry (and,
// with lift, ws's fence row: the workspace's rows are gone from db, or it
// is active there again), then drops the triggers if no move has db as
// its source any more. A shard that never had the fence is left alone.
func unregisterMove(ctx context.Context, db *sql.DB, ws, role string, lift bool, m *metrics) error {
	var has bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, fenceTable).Scan(&has); err != nil {
		return fmt.Errorf("unregister the move: %w", err)
	}
	if !has {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("unregister the move: %w", err)
	}
	defer tx.Rollback()
	if err := lockInstall(ctx, tx); err != nil {
		return fmt.Errorf("unregister the move: %w", err)
	}
	// (A shard fenced by a version without the registry gets one here.)
	if err := fenceObjects(ctx, tx); err != nil {
		return fmt.Errorf("unregister the move: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+movesTable+` WHERE workspace = $1 AND role = $2`, ws, role); err != nil {
		return fmt.Errorf("unregister the move: %w", err)
	}
	if lift {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+fenceTable+` WHERE workspace = $1`, ws); err != nil {
			return fmt.Errorf("unregister the move: lift the fence: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("unregister the move: %w", err)
	}
	return dropIdleFence(ctx, db, m)
}

// dropIdleFence drops the fence's triggers from db unless a move in
// progress has db as its source. Each drop is a transaction of its own
// that checks the registry under the install lock, so a move registering
// meanwhile stops the drops, and its install, which reads the triggers
// after its registration, puts back those already dropped.
func dropIdleFence(ctx context.Context, db *sql.DB, m *metrics) error {
	rows, err := db.QueryContext(ctx, `SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND NOT t.tgisinternal AND t.tgname = $1
		ORDER BY c.relname`, fenceTrigger)
	if err != nil {
		return fmt.Errorf("drop the fence: read triggers: %w", err)
	}
	var tables []string
	for rows.Next() {
		var rel string
		if err := rows.Scan(&rel); err != nil {
			rows.Close()
			return fmt.Errorf("drop the fence: read triggers: %w", err)
		}
		tables = append(tables, rel)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("drop the fence: read triggers: %w", err)
	}
	for _, rel := range tables {
		ran, err := ddl(ctx, db, `DROP TRIGGER IF EXISTS `+fenceTrigger+` ON `+quote(rel), true, "drop", m)
		if err != nil {
			return fmt.Errorf("drop the fence: trigger on %s: %w", rel, err)
		}
		if !ran {
			return nil // a move has the shard as its source now
		}
	}
	return nil
}

// installFence creates the fence's objects, and its trigger on every
// table of the shard's schema the mover attributes to a workspace (so a
// table a later migration adds is fenced from the next move on),
// idempotently: under an advisory lock (concurrent CREATE OR REPLACE of
// one function can fail), and a trigger is created only where it is
// missing or differs, since creating one locks its table against writes.
// Until every table has its trigger no fence is set (the mover installs
// before it copies). registerMove calls it for a move's source.
func installFence(ctx context.Context, db *sql.DB, m *metrics) error {
	s, err := loadSchema(ctx, db)
	if err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	defer tx.Rollback()
	if err := lockInstall(ctx, tx); err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	if err := fenceObjects(ctx, tx); err != nil {
		return fmt.Errorf("install the fence: %w", err)
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
		if _, err := ddl(ctx, db, `CREATE OR REPLACE TRIGGER `+fenceTrigger+
			` BEFORE INSERT OR UPDATE OR DELETE ON `+quote(t.name)+
			` FOR EACH ROW EXECUTE FUNCTION `+fenceFunc+`('`+mode+`')`, false, "install", m); err != nil {
			return fmt.Errorf("install the fence: trigger on %s: %w", t.name, err)
		}
	}
	// The first version's trigger (events only, INSERT only) goes once
	// the new ones are in.
	for _, rel := range old {
		if _, err := ddl(ctx, db, `DROP TRIGGER IF EXISTS shardmove_fence ON `+quote(rel), false, "install", m); err != nil {
			return fmt.Errorf("install the fence: drop the old trigger on %s: %w", rel, err)
		}
	}
	if len(old) > 0 {
		if _, err := ddl(ctx, db, `DROP FUNCTION IF EXISTS shardmove_fenced()`, false, "install", m); err != nil {
			return fmt.Errorf("install the fence: drop the old function: %w", err)
		}
	}
	return nil
}

// ddlLockTimeout bounds how long one DDL statement of the fence waits for
// its table's lock. CREATE and DROP TRIGGER take SHARE ROW EXCLUSIVE,
// which waits for every transaction writing the table, and every write
// that comes after queues behind the waiting DDL: a long transaction on
// the shard would stall all its writers. With the timeout they queue at
// most this long; the DDL gives way, and tries again after a pause.
var ddlLockTimeout = time.Second

// ddl runs one DDL statement in a transaction of its own, under the
// install lock, with lock_timeout, retrying after a lock timeout (with
// backoff, until ctx ends). With idleOnly the statement runs only if no
// move in progress has the shard as its source (checked in the same
// transaction), and ran says whether it did.
func ddl(ctx context.Context, db *sql.DB, q string, idleOnly bool, op string, m *metrics) (ran bool, err error) {
	pause := 50 * time.Millisecond
	for {
		ran, err := ddlOnce(ctx, db, q, idleOnly)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			if err == nil && ran {
				m.fenceDDL(op, "done")
			}
			return ran, err
		}
		m.fenceDDL(op, "lock_timeout")
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return false, fmt.Errorf("%w (its table's lock was not had within %v: %v)", ctx.Err(), ddlLockTimeout, err)
		}
		pause = min(2*pause, 2*time.Second)
	}
}

func ddlOnce(ctx context.Context, db *sql.DB, q string, idleOnly bool) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if err := lockInstall(ctx, tx); err != nil {
		return false, err
	}
	if idleOnly {
		var busy bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+movesTable+` WHERE role = $1)`, roleSource).Scan(&busy); err != nil {
			return false, err
		}
		if busy {
			return false, nil
		}
	}
	// (Set after the install lock, which is waited for as long as it takes.)
	if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = `+strconv.FormatInt(ddlLockTimeout.Milliseconds(), 10)); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return false, err
	}
	return true, tx.Commit()
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

// liftFence deletes ws's fence row from db (the workspace is active
// there), creating the fence's objects if need be.
func liftFence(ctx context.Context, db *sql.DB, ws string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("lift the fence of %s: %w", ws, err)
	}
	defer tx.Rollback()
	if err := lockInstall(ctx, tx); err != nil {
		return fmt.Errorf("lift the fence of %s: %w", ws, err)
	}
	if err := fenceObjects(ctx, tx); err != nil {
		return fmt.Errorf("lift the fence of %s: %w", ws, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM `+fenceTable+` WHERE workspace = $1`, ws); err != nil {
		return fmt.Errorf("lift the fence of %s: %w", ws, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("lift the fence of %s: %w", ws, err)
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
