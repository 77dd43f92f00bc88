package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"parley"
)

// Bulk reads of whole workspace directories for the query caches. They act
// for the server: no actor, no authorisation.

// ReadDirectory reads the workspace's members (with roles), its channels of
// every kind (with member counts and last seqs) and every channel
// membership, in one read-only transaction so that the three agree: a cache
// can then tell which later events the snapshot already contains by
// comparing seqs. Four queries, whatever the size of the workspace; user
// ids are made of letters and digits, so a comma joins them safely.
func (s *Store) ReadDirectory(ctx context.Context, workspaceID string, v parley.DirectoryVisitor) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if s.dialect == Postgres {
		// One snapshot for every statement of the transaction.
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.rdb.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("read directory: begin: %w", err)
	}
	defer tx.Rollback()

	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE id = $1`, workspaceID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return parley.Errorf(parley.ENOTFOUND, "workspace not found")
	}
	if err != nil {
		return fmt.Errorf("read directory: workspace: %w", err)
	}
	if err := readDirectoryUsers(ctx, tx, workspaceID, s.now(), v.User); err != nil {
		return err
	}
	if err := readDirectoryChannels(ctx, tx, workspaceID, v.Channel); err != nil {
		return err
	}
	if err := readDirectoryMembers(ctx, tx, workspaceID, v.Member); err != nil {
		return err
	}
	return tx.Commit()
}

func readDirectoryUsers(ctx context.Context, tx *sql.Tx, workspaceID string, now time.Time, fn func(*parley.User, parley.Role)) error {
	rows, err := tx.QueryContext(ctx, `SELECT `+userColumns+`, wm.role
		FROM workspace_members wm JOIN users u ON u.id = wm.user_id
		WHERE wm.workspace_id = $1`, workspaceID)
	if err != nil {
		return fmt.Errorf("read directory users: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var role string
		u, err := scanUser(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &role)...)
		}), now)
		if err != nil {
			return fmt.Errorf("read directory users: %w", err)
		}
		if fn != nil {
			fn(u, parley.Role(role))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read directory users: %w", err)
	}
	return nil
}

func readDirectoryChannels(ctx context.Context, tx *sql.Tx, workspaceID string, fn func(*parley.Channel)) error {
	// channelFrom joins the memberships of $1; no user has the empty id, so
	// the caller-specific columns come back empty.
	rows, err := tx.QueryContext(ctx, `SELECT `+channelColumns+channelFrom+`
		WHERE c.workspace_id = $2`, "", workspaceID)
	if err != nil {
		return fmt.Errorf("read directory channels: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		ch, err := scanChannel(rows)
		if err != nil {
			return fmt.Errorf("read directory channels: %w", err)
		}
		if fn != nil {
			fn(ch)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read directory channels: %w", err)
	}
	return nil
}

func readDirectoryMembers(ctx context.Context, tx *sql.Tx, workspaceID string, fn func(channelID, userID string)) error {
	// One row per channel with its members' ids joined: a million
	// memberships cost a million trips through database/sql otherwise, and
	// this reads them three to four times faster. string_agg is in both
	// PostgreSQL and SQLite (3.44+).
	rows, err := tx.QueryContext(ctx, `SELECT channel_id, string_agg(user_id, ',') FROM channel_members
		WHERE workspace_id = $1 GROUP BY channel_id`, workspaceID)
	if err != nil {
		return fmt.Errorf("read directory members: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ch, users string
		if err := rows.Scan(&ch, &users); err != nil {
			return fmt.Errorf("read directory members: %w", err)
		}
		for users != "" {
			u, rest, _ := strings.Cut(users, ",")
			if fn != nil {
				fn(ch, u)
			}
			users = rest
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read directory members: %w", err)
	}
	return nil
}

// ChannelWorkspace returns the workspace of a channel, or ENOTFOUND.
func (s *Store) ChannelWorkspace(ctx context.Context, channelID string) (string, error) {
	var ws string
	err := s.rdb.QueryRowContext(ctx, `SELECT workspace_id FROM channels WHERE id = $1`, channelID).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "channel not found")
	}
	if err != nil {
		return "", fmt.Errorf("channel workspace: %w", err)
	}
	return ws, nil
}
