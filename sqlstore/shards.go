package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"parley"
)

// What store routing (package shardstore) needs from one shard's store
// beyond parley.Store: finding which workspace an id belongs to, and
// keeping copies of user rows on the shards whose memberships refer to
// them. None of these authorise anything: they act for the router.

// MessageWorkspace returns the workspace of a message (a thread root
// included), or ENOTFOUND.
func (s *Store) MessageWorkspace(ctx context.Context, messageID string) (string, error) {
	var ws string
	err := s.rdb.QueryRowContext(ctx, `SELECT workspace_id FROM messages WHERE id = $1`, messageID).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "message not found")
	}
	if err != nil {
		return "", fmt.Errorf("message workspace: %w", err)
	}
	return ws, nil
}

// FileWorkspace returns the workspace of a file, or ENOTFOUND.
func (s *Store) FileWorkspace(ctx context.Context, fileID string) (string, error) {
	return s.workspaceOfRow(ctx, "files", "file", fileID)
}

// UploadWorkspace returns the workspace of a resumable upload, or
// ENOTFOUND.
func (s *Store) UploadWorkspace(ctx context.Context, uploadID string) (string, error) {
	return s.workspaceOfRow(ctx, "file_uploads", "upload", uploadID)
}

// workspaceOfRow reads workspace_id of the row of table with that id.
func (s *Store) workspaceOfRow(ctx context.Context, table, what, id string) (string, error) {
	var ws string
	err := s.rdb.QueryRowContext(ctx, `SELECT workspace_id FROM `+table+` WHERE id = $1`, id).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "%s not found", what)
	}
	if err != nil {
		return "", fmt.Errorf("%s workspace: %w", what, err)
	}
	return ws, nil
}

// InviteWorkspace returns the workspace an invite code is for, used up or
// expired ones included (AcceptInvite says which), or ENOTFOUND.
func (s *Store) InviteWorkspace(ctx context.Context, code string) (string, error) {
	hash := hashInviteCode(strings.ToLower(strings.TrimSpace(code)))
	var ws string
	err := s.rdb.QueryRowContext(ctx, `SELECT workspace_id FROM invites WHERE code_hash = $1`, hash).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "invite not found or expired")
	}
	if err != nil {
		return "", fmt.Errorf("invite workspace: %w", err)
	}
	return ws, nil
}

// SlugTaken reports whether a workspace of this database has the slug.
func (s *Store) SlugTaken(ctx context.Context, slug string) (bool, error) {
	var one int
	err := s.rdb.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE slug = $1`, slug).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check slug: %w", err)
	}
	return true, nil
}

// HasWorkspace reports whether this database holds the workspace's row
// (deleted or not), once no creation of it can still commit: the router
// asks before it removes the placement of a workspace whose creation
// failed, so as never to orphan one that did commit.
//
// A caller's error does not end a creation. On PostgreSQL a transaction
// whose COMMIT was sent commits however its client fared (a context
// cancelled or a connection lost while waiting for the answer), as late as
// the server gets to it: a slow fsync or a synchronous standby's
// acknowledgement has no bound a timeout here could wait out. So the
// creation holds an advisory lock on its id for its whole transaction
// (creationFence), and this check takes the same lock first: it waits for
// a creation in flight to commit or roll back, then reads. A creation
// whose COMMIT was never sent cannot commit, and its statements ran (the
// lock first) before its caller got the error. On SQLite the check is a
// write: the one writer runs it after every write queued before it, the
// creation included (a queued write whose context ended is dropped
// unrun).
func (s *Store) HasWorkspace(ctx context.Context, workspaceID string) (bool, error) {
	var has bool
	err := s.write(ctx, "has workspace", func(ctx context.Context, tx *Tx) error {
		if err := s.creationFence(ctx, tx, workspaceID); err != nil {
			return err
		}
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE id = $1`, workspaceID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("has workspace: %w", err)
		}
		has = true
		return nil
	})
	return has, err
}

// creationLockClass is the first key of the advisory locks creationFence
// takes (the second is a hash of the workspace id), apart from any other
// advisory lock of the schema.
const creationLockClass = 0x70617273 // "pars"

// creationFence takes, on PostgreSQL, the transaction-long advisory lock
// of workspace id's creation (see HasWorkspace). Two ids of one hash only
// share a wait.
func (s *Store) creationFence(ctx context.Context, tx *Tx, id string) error {
	if s.dialect != Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(creationLockClass), id); err != nil {
		return fmt.Errorf("workspace creation lock: %w", err)
	}
	return nil
}

// UserCopy is a users row as the router copies it from the control
// database to a shard. The password hash is never copied: only the
// control database checks passwords.
type UserCopy struct {
	ID, Email, Handle, Name, Title, AvatarHash string
	StatusEmoji, StatusText                    string
	StatusExpiresAt, DeactivatedAt             sql.NullInt64
	CreatedAt, UpdatedAt                       int64
	IsBot                                      bool
}

// ReadUserCopy reads a user's row to copy it, or ENOTFOUND.
func (s *Store) ReadUserCopy(ctx context.Context, userID string) (UserCopy, error) {
	var u UserCopy
	err := s.rdb.QueryRowContext(ctx, `SELECT id, email, handle, name, title, avatar_hash, status_emoji, status_text,
		status_expires_at, deactivated_at, created_at, updated_at, is_bot FROM users WHERE id = $1`, userID).
		Scan(&u.ID, &u.Email, &u.Handle, &u.Name, &u.Title, &u.AvatarHash, &u.StatusEmoji, &u.StatusText,
			&u.StatusExpiresAt, &u.DeactivatedAt, &u.CreatedAt, &u.UpdatedAt, &u.IsBot)
	if errors.Is(err, sql.ErrNoRows) {
		return UserCopy{}, parley.Errorf(parley.ENOTFOUND, "user not found")
	}
	if err != nil {
		return UserCopy{}, fmt.Errorf("read user copy: %w", err)
	}
	return u, nil
}

// HasUser reports whether this database holds the user's row.
func (s *Store) HasUser(ctx context.Context, userID string) (bool, error) {
	var one int
	err := s.rdb.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = $1`, userID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("has user: %w", err)
	}
	return true, nil
}

// PutUserCopy inserts a copy of a user's row, or brings an existing copy
// up to date. No event: the workspaces' members hear profile changes from
// the calls (UpdateMe, SetStatus…) the router makes on every shard.
func (s *Store) PutUserCopy(ctx context.Context, u UserCopy) error {
	return s.write(ctx, "put user copy", func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO users (id, email, handle, name, title, avatar_hash, password_hash,
			status_emoji, status_text, status_expires_at, deactivated_at, created_at, updated_at, is_bot)
			VALUES ($1, $2, $3, $4, $5, $6, '', $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (id) DO UPDATE SET email = excluded.email, handle = excluded.handle, name = excluded.name,
			  title = excluded.title, avatar_hash = excluded.avatar_hash, status_emoji = excluded.status_emoji,
			  status_text = excluded.status_text, status_expires_at = excluded.status_expires_at,
			  deactivated_at = excluded.deactivated_at, updated_at = excluded.updated_at, is_bot = excluded.is_bot`,
			u.ID, u.Email, u.Handle, u.Name, u.Title, u.AvatarHash, u.StatusEmoji, u.StatusText,
			u.StatusExpiresAt, u.DeactivatedAt, u.CreatedAt, u.UpdatedAt, u.IsBot)
		if isUniqueViolation(err) {
			// Another user here has the handle (or email): a bot's
			// handle, chosen on its shard, taken in the control database.
			return parley.Errorf(parley.ECONFLICT, "handle %q is already taken", u.Handle)
		}
		if err != nil {
			return fmt.Errorf("put user copy: %w", err)
		}
		return nil
	})
}

// SyncDeactivated sets or clears a user's deactivation on this database
// without a permission check (the router has made it on the shard that
// authorised it): sessions here are revoked and this database's
// workspaces told, as by DeactivateUser. A database without the user's
// row answers ENOTFOUND.
func (s *Store) SyncDeactivated(ctx context.Context, userID string, deactivated bool) (*parley.User, error) {
	return s.setDeactivated(ctx, "sync deactivated", userID, deactivated, func(context.Context, *Tx) error { return nil })
}
