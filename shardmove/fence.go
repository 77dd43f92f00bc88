package shardmove

import (
	"context"
	"database/sql"
	"fmt"
)

// The source's fence: the drain after the freeze is a time bound (a node
// that has not heard of read_only, or a write admitted just before it
// heard and slow to reach its COMMIT, may still write to the source), so
// before the final round the mover also fences the workspace in the
// source database itself. A row in shardmove_fence makes a trigger refuse
// every new event of the workspace on that shard with SQLSTATE 40001
// (serialization_failure: the store retries it a few times, then answers
// 503 with Retry-After, and the client's retry is routed to wherever the
// directory then says). Every post, edit, delete, reaction and pin appends
// an event in its transaction, so none of them can commit on the source
// after the fence; a write that inserted its event before the fence
// committed holds its channel's row until its own COMMIT, which the
// FOR SHARE fence waits for, and the final round copies it.
//
// The fence row stays after the switch (a node still on its old record is
// refused, not silently writing to the old shard); it is removed when the
// move aborts, and from a shard a workspace is moved to.

const fenceTable = "shardmove_fence"

// installFence creates the fence's table, function and trigger on a
// shard, idempotently (under an advisory lock: concurrent CREATE OR
// REPLACE of one function can fail).
func installFence(ctx context.Context, db *sql.DB) error {
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
	var hasEvents bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass('events') IS NOT NULL`).Scan(&hasEvents); err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	if !hasEvents {
		// A schema without the event log (a test's crafted one): nothing
		// to fence.
		return tx.Commit()
	}
	for _, q := range []string{
		`CREATE OR REPLACE FUNCTION shardmove_fenced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM ` + fenceTable + ` WHERE workspace = NEW.workspace_id) THEN
		RAISE EXCEPTION 'workspace % has moved off this shard (shardmove fence)', NEW.workspace_id USING ERRCODE = '40001';
	END IF;
	RETURN NEW;
END $$`,
		`CREATE OR REPLACE TRIGGER shardmove_fence BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION shardmove_fenced()`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("install the fence: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("install the fence: %w", err)
	}
	return nil
}

// setFence fences ws on db (on) or lifts its fence (off).
func setFence(ctx context.Context, db *sql.DB, ws string, on bool) error {
	q := `INSERT INTO ` + fenceTable + ` (workspace) VALUES ($1) ON CONFLICT (workspace) DO NOTHING`
	if !on {
		q = `DELETE FROM ` + fenceTable + ` WHERE workspace = $1`
	}
	if _, err := db.ExecContext(ctx, q, ws); err != nil {
		return fmt.Errorf("fence %s (%v): %w", ws, on, err)
	}
	return nil
}
