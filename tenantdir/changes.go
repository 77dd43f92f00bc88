package tenantdir

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"parley"
)

// Change is one entry of the catalogue's change log: the full new state
// of a shard or a workspace (with credentials: the log lives in the
// control database, next to them). Publishing strips what each audience
// may not see.
type Change struct {
	Seq       int64   `json:"seq"`
	Kind      string  `json:"kind"` // "shard" or "workspace"
	Shard     *Shard  `json:"shard,omitempty"`
	Workspace *Record `json:"workspace,omitempty"`
}

// Change kinds.
const (
	KindShard     = "shard"
	KindWorkspace = "workspace"
)

// ForAudience is the change as aud may see it.
func (ch Change) ForAudience(aud Audience) Change {
	if ch.Shard != nil {
		s := ch.Shard.ForAudience(aud)
		ch.Shard = &s
	}
	if ch.Workspace != nil {
		r := ch.Workspace.ForAudience(aud)
		ch.Workspace = &r
	}
	return ch
}

// appendChange inserts a change-log row and returns its sequence; the
// payload is written by the caller once it carries that sequence as its
// version.
func (c *Catalogue) appendChange(ctx context.Context, tx *sql.Tx, kind, key string, now time.Time) (int64, error) {
	var seq int64
	err := tx.QueryRowContext(ctx, `INSERT INTO tenantdir_changes (kind, key, payload, created_at)
		VALUES ($1, $2, '', $3) RETURNING seq`, kind, key, c.ts(now)).Scan(&seq)
	return seq, err
}

func (c *Catalogue) setPayload(ctx context.Context, tx *sql.Tx, ch Change) error {
	data, err := json.Marshal(ch)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE tenantdir_changes SET payload = $1 WHERE seq = $2`, string(data), ch.Seq)
	return err
}

// logShard appends s's new state to the change log and stamps its
// version.
func (c *Catalogue) logShard(ctx context.Context, tx *sql.Tx, s *Shard) error {
	seq, err := c.appendChange(ctx, tx, KindShard, s.ID, s.ChangedAt)
	if err != nil {
		return err
	}
	s.Version = seq
	if _, err := tx.ExecContext(ctx, `UPDATE tenantdir_shards SET version = $1 WHERE id = $2`, seq, s.ID); err != nil {
		return err
	}
	logged := *s
	logged.Workspaces = 0
	return c.setPayload(ctx, tx, Change{Seq: seq, Kind: KindShard, Shard: &logged})
}

// logWorkspace stamps the workspace's version, then appends its full
// record (read back, with DSNs) to the change log.
func (c *Catalogue) logWorkspace(ctx context.Context, tx *sql.Tx, r *Record) error {
	seq, err := c.appendChange(ctx, tx, KindWorkspace, r.WorkspaceID, r.ChangedAt)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tenantdir_workspaces SET version = $1 WHERE id = $2`, seq, r.WorkspaceID); err != nil {
		return err
	}
	full, err := c.workspace(ctx, tx, r.WorkspaceID)
	if err != nil {
		return err
	}
	*r = full
	return c.setPayload(ctx, tx, Change{Seq: seq, Kind: KindWorkspace, Workspace: &full})
}

// Pending returns up to limit changes not yet published, oldest first.
func (c *Catalogue) Pending(ctx context.Context, limit int) ([]Change, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT seq, payload FROM tenantdir_changes
		WHERE published_at IS NULL ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("pending changes: %w", err)
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var seq int64
		var payload string
		if err := rows.Scan(&seq, &payload); err != nil {
			return nil, fmt.Errorf("pending changes: %w", err)
		}
		var ch Change
		if err := json.Unmarshal([]byte(payload), &ch); err != nil {
			return nil, fmt.Errorf("change %d: %w", seq, err)
		}
		out = append(out, ch)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending changes: %w", err)
	}
	return out, nil
}

// MarkPublished records that the changes up to seq are in every
// audience's stream.
func (c *Catalogue) MarkPublished(ctx context.Context, seqs []int64) error {
	now := c.ts(time.Now())
	for _, s := range seqs {
		if _, err := c.db.ExecContext(ctx, `UPDATE tenantdir_changes SET published_at = $1 WHERE seq = $2 AND published_at IS NULL`, now, s); err != nil {
			return fmt.Errorf("mark change %d published: %w", s, err)
		}
	}
	return nil
}

// Resync marks the newest change of every shard and workspace unpublished,
// so that the relay publishes the catalogue's whole current state again
// (its streams were lost). It returns how many changes it marked.
func (c *Catalogue) Resync(ctx context.Context) (int64, error) {
	res, err := c.db.ExecContext(ctx, `UPDATE tenantdir_changes SET published_at = NULL
		WHERE published_at IS NOT NULL AND seq IN (SELECT MAX(seq) FROM tenantdir_changes GROUP BY kind, key)`)
	if err != nil {
		return 0, fmt.Errorf("resync the change log: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("resync the change log: %w", err)
	}
	return n, nil
}

// ChangeCount is how many changes the log holds (tests, show).
func (c *Catalogue) ChangeCount(ctx context.Context) (total, pending int, err error) {
	err = c.db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) - COUNT(published_at) FROM tenantdir_changes`).Scan(&total, &pending)
	if err != nil {
		err = fmt.Errorf("count changes: %w", err)
	}
	return
}

// The status transitions of a workspace (a move, issue 17 item 5, walks
// them: BeginMove, Freeze, CompleteMove; AbortMove goes back):
//
//	active --BeginMove--> moving --Freeze--> read_only --CompleteMove--> active (on the target)
//	active --Freeze--> read_only --Unfreeze--> active   (maintenance, no target)
//	moving|read_only (with a target) --AbortMove--> active (on the source)

// BeginMove marks an active workspace moving to shard to (active, in its
// region, not its current shard).
func (c *Catalogue) BeginMove(ctx context.Context, ws, to string) (Record, error) {
	return c.transition(ctx, ws, "begin move", func(tx *sql.Tx, r *Record) error {
		if r.Status != StatusActive {
			return parley.Errorf(parley.ECONFLICT, "workspace %s is %s, not active", ws, r.Status)
		}
		if to == r.ShardID {
			return parley.Errorf(parley.EINVALID, "workspace %s is already on shard %s", ws, to)
		}
		loads, err := c.loads(ctx, tx, r.Region)
		if err != nil {
			return err
		}
		if err := checkTarget(loads, to, r.Region); err != nil {
			return err
		}
		r.Status, r.TargetShard = StatusMoving, to
		return nil
	})
}

// Freeze makes a workspace read-only: the switch window of a move (from
// moving) or maintenance (from active).
func (c *Catalogue) Freeze(ctx context.Context, ws string) (Record, error) {
	return c.transition(ctx, ws, "freeze", func(_ *sql.Tx, r *Record) error {
		if r.Status == StatusReadOnly {
			return parley.Errorf(parley.ECONFLICT, "workspace %s is already read-only", ws)
		}
		r.Status = StatusReadOnly
		return nil
	})
}

// Unfreeze makes a read-only workspace that is not mid-move active again.
func (c *Catalogue) Unfreeze(ctx context.Context, ws string) (Record, error) {
	return c.transition(ctx, ws, "unfreeze", func(_ *sql.Tx, r *Record) error {
		if r.Status != StatusReadOnly || r.TargetShard != "" {
			return parley.Errorf(parley.ECONFLICT, "workspace %s is %s%s: only a read-only workspace that is not moving can be unfrozen",
				ws, r.Status, moveNote(r))
		}
		r.Status = StatusActive
		return nil
	})
}

// CompleteMove switches a moving or frozen workspace to its target shard
// and makes it active there.
func (c *Catalogue) CompleteMove(ctx context.Context, ws string) (Record, error) {
	return c.transition(ctx, ws, "complete move", func(_ *sql.Tx, r *Record) error {
		if r.TargetShard == "" {
			return parley.Errorf(parley.ECONFLICT, "workspace %s is not moving", ws)
		}
		r.ShardID, r.TargetShard, r.Status = r.TargetShard, "", StatusActive
		return nil
	})
}

// AbortMove leaves a workspace on its source shard, active.
func (c *Catalogue) AbortMove(ctx context.Context, ws string) (Record, error) {
	return c.transition(ctx, ws, "abort move", func(_ *sql.Tx, r *Record) error {
		if r.TargetShard == "" {
			return parley.Errorf(parley.ECONFLICT, "workspace %s is not moving", ws)
		}
		r.TargetShard, r.Status = "", StatusActive
		return nil
	})
}

// SetOverrides replaces a workspace's limits and feature overrides (nil
// leaves that set as it is; an empty map clears it).
func (c *Catalogue) SetOverrides(ctx context.Context, ws string, limits map[string]int64, features map[string]bool) (Record, error) {
	if err := checkOverrides(limits, features); err != nil {
		return Record{}, err
	}
	return c.transition(ctx, ws, "set overrides", func(_ *sql.Tx, r *Record) error {
		if limits != nil {
			r.Limits = limits
		}
		if features != nil {
			r.Features = features
		}
		return nil
	})
}

func moveNote(r *Record) string {
	if r.TargetShard != "" {
		return " (moving to " + r.TargetShard + ")"
	}
	return ""
}

// transition reads a workspace, lets fn change it, writes it and logs it,
// all in one transaction.
func (c *Catalogue) transition(ctx context.Context, ws, op string, fn func(tx *sql.Tx, r *Record) error) (Record, error) {
	var rec Record
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := c.workspace(ctx, tx, ws)
		if err != nil {
			return err
		}
		if err := fn(tx, &r); err != nil {
			return err
		}
		r.ChangedAt = now
		var target any
		if r.TargetShard != "" {
			target = r.TargetShard
		}
		lim, fea := encodeOverrides(r.Limits, r.Features)
		if _, err := tx.ExecContext(ctx, `UPDATE tenantdir_workspaces SET shard_id = $1, target_shard_id = $2, status = $3,
			limits = $4, features = $5, changed_at = $6 WHERE id = $7`,
			r.ShardID, target, r.Status, lim, fea, c.ts(now), ws); err != nil {
			return err
		}
		rec = r
		return c.logWorkspace(ctx, tx, &rec)
	})
	if err != nil {
		return Record{}, fmt.Errorf("%s %s: %w", op, ws, err)
	}
	return rec, nil
}
