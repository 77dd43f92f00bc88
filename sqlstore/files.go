package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"parley"
)

// Files (parley.FileService): metadata of uploaded files, who may download
// them, attachment to messages (PostMessage), the per-workspace usage the
// quota is checked against, resumable uploads and the sweep of deleted
// files' bytes. The bytes themselves are package files' business.

var _ parley.FileService = (*Store)(nil)

const fileColumns = `f.id, f.workspace_id, f.user_id, f.name, f.size, f.content_type, f.width, f.height,
	f.storage_key, f.thumbnail_key, f.channel_id, f.message_id, f.created_at`

func scanFile(sc scanner) (*parley.File, error) {
	var f parley.File
	var thumb, ch, msg sql.NullString
	var created int64
	if err := sc.Scan(&f.ID, &f.WorkspaceID, &f.UserID, &f.Name, &f.Size, &f.ContentType, &f.Width, &f.Height,
		&f.StorageKey, &thumb, &ch, &msg, &created); err != nil {
		return nil, err
	}
	f.ThumbnailKey, f.ChannelID, f.MessageID = thumb.String, ch.String, msg.String
	f.Thumbnail = thumb.Valid
	f.CreatedAt = fromMicros(created)
	return &f, nil
}

// checkUpload checks that actor may upload size bytes to the workspace: a
// member who is not deactivated, within the per-file limit; and returns
// the workspace's usage.
func checkUpload(ctx context.Context, q querier, actor, workspaceID string, size int64, quota parley.FileQuota) (int64, error) {
	if _, err := workspaceRole(ctx, q, workspaceID, actor); err != nil {
		return 0, err
	}
	var deactivated sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT deactivated_at FROM users WHERE id = $1`, actor).Scan(&deactivated); err != nil {
		return 0, fmt.Errorf("check uploader: %w", err)
	}
	if deactivated.Valid {
		return 0, parley.Errorf(parley.EFORBIDDEN, "your account is deactivated")
	}
	if quota.MaxFileBytes > 0 && size > quota.MaxFileBytes {
		return 0, parley.Errorf(parley.ETOOLARGE, "the file is larger than the limit of %d bytes", quota.MaxFileBytes)
	}
	var used int64
	err := q.QueryRowContext(ctx, `SELECT bytes FROM workspace_file_usage WHERE workspace_id = $1`, workspaceID).Scan(&used)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("file usage: %w", err)
	}
	if quota.WorkspaceMaxBytes > 0 && used+size > quota.WorkspaceMaxBytes {
		return 0, parley.Errorf(parley.ETOOLARGE,
			"the workspace's file storage is full: %d of %d bytes used, this file needs %d", used, quota.WorkspaceMaxBytes, size)
	}
	return used, nil
}

// CheckUpload runs checkUpload on a read connection.
func (s *Store) CheckUpload(ctx context.Context, actor, workspaceID string, size int64, q parley.FileQuota) error {
	_, err := checkUpload(ctx, s.reads(), actor, workspaceID, max(size, 0), q)
	return err
}

// useBytes changes a workspace's usage by delta.
func (tx *Tx) useBytes(ctx context.Context, workspaceID string, delta int64) error {
	if delta == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO workspace_file_usage (workspace_id, bytes) VALUES ($1, $2)
		ON CONFLICT (workspace_id) DO UPDATE SET bytes = workspace_file_usage.bytes + excluded.bytes`,
		workspaceID, delta); err != nil {
		return fmt.Errorf("file usage: %w", err)
	}
	return nil
}

// CreateFile records a stored file and counts it in the workspace's usage.
func (s *Store) CreateFile(ctx context.Context, actor, workspaceID string, f parley.File, q parley.FileQuota) (*parley.File, error) {
	if err := parley.ValidateFileName(f.Name); err != nil {
		return nil, err
	}
	var out *parley.File
	err := s.write(ctx, "create file", func(ctx context.Context, tx *Tx) error {
		// Checked and counted in one transaction: concurrent uploads
		// cannot together pass the quota (SQLite has one writer;
		// PostgreSQL's upsert below locks the usage row first).
		if _, err := tx.ExecContext(ctx, `INSERT INTO workspace_file_usage (workspace_id, bytes) VALUES ($1, 0)
			ON CONFLICT (workspace_id) DO UPDATE SET bytes = workspace_file_usage.bytes`, workspaceID); err != nil {
			return fmt.Errorf("lock file usage: %w", err)
		}
		if _, err := checkUpload(ctx, tx, actor, workspaceID, f.Size, q); err != nil {
			return err
		}
		g := f
		g.WorkspaceID, g.UserID, g.CreatedAt = workspaceID, actor, tx.now
		g.ChannelID, g.MessageID = "", ""
		g.Thumbnail = g.ThumbnailKey != ""
		if _, err := tx.ExecContext(ctx, `INSERT INTO files (id, workspace_id, user_id, name, size, content_type,
				width, height, storage_key, thumbnail_key, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			g.ID, workspaceID, actor, g.Name, g.Size, g.ContentType, g.Width, g.Height, g.StorageKey,
			nullString(g.ThumbnailKey), micros(tx.now)); err != nil {
			return fmt.Errorf("insert file: %w", err)
		}
		out = &g
		return tx.useBytes(ctx, workspaceID, g.Size)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetFile returns a live file actor may download: an attached one if they
// can read its channel, an unattached one if they uploaded it.
func (s *Store) GetFile(ctx context.Context, actor, fileID string) (*parley.File, error) {
	f, err := scanFile(s.reads().QueryRowContext(ctx,
		`SELECT `+fileColumns+` FROM files f WHERE f.id = $1 AND f.deleted_at IS NULL`, fileID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "file not found")
	}
	if err != nil {
		return nil, fmt.Errorf("get file: %w", err)
	}
	if err := canReadFile(ctx, s.reads(), actor, f); err != nil {
		return nil, err
	}
	return f, nil
}

func canReadFile(ctx context.Context, q querier, actor string, f *parley.File) error {
	notFound := parley.Errorf(parley.ENOTFOUND, "file not found")
	if f.ChannelID == "" {
		if f.UserID != actor {
			return notFound
		}
		if _, err := workspaceRole(ctx, q, f.WorkspaceID, actor); err != nil {
			return notFound
		}
		return nil
	}
	if _, err := loadChannel(ctx, q, actor, f.ChannelID); err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return notFound
		}
		return err
	}
	return nil
}

// ListChannelFiles pages a channel's attached files, newest first; the
// cursor is the last file id of the previous page.
func (s *Store) ListChannelFiles(ctx context.Context, actor, channelID, cursor string, limit int) (*parley.FilePage, error) {
	if _, err := loadChannel(ctx, s.reads(), actor, channelID); err != nil {
		return nil, err
	}
	key, err := decodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	limit = parley.ClampLimit(limit)
	query := `SELECT ` + fileColumns + ` FROM files f
		WHERE f.channel_id = $1 AND f.deleted_at IS NULL`
	args := []any{channelID}
	if key != "" {
		query += ` AND f.id < $2 ORDER BY f.id DESC LIMIT $3`
		args = append(args, key, limit)
	} else {
		query += ` ORDER BY f.id DESC LIMIT $2`
		args = append(args, limit)
	}
	rows, err := s.reads().QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	defer rows.Close()
	page := &parley.FilePage{Files: []parley.File{}}
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("list files: %w", err)
		}
		page.Files = append(page.Files, *f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	if len(page.Files) == limit {
		page.NextCursor = encodeCursor(page.Files[limit-1].ID)
	}
	return page, nil
}

// DeleteFile marks an unattached file of actor's deleted (the sweeper
// removes its bytes) and gives its bytes back to the workspace's usage.
func (s *Store) DeleteFile(ctx context.Context, actor, fileID string) error {
	return s.write(ctx, "delete file", func(ctx context.Context, tx *Tx) error {
		f, err := scanFile(tx.QueryRowContext(ctx,
			`SELECT `+fileColumns+` FROM files f WHERE f.id = $1 AND f.deleted_at IS NULL`, fileID))
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "file not found")
		}
		if err != nil {
			return fmt.Errorf("delete file: %w", err)
		}
		if err := canReadFile(ctx, tx, actor, f); err != nil {
			return err
		}
		if f.MessageID != "" {
			return parley.Errorf(parley.ECONFLICT, "the file is attached to a message: delete the message")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE files SET deleted_at = $1 WHERE id = $2`, micros(tx.now), f.ID); err != nil {
			return fmt.Errorf("delete file: %w", err)
		}
		return tx.useBytes(ctx, f.WorkspaceID, -f.Size)
	})
}

// attachFiles gives a new message the files of ids: each must be actor's,
// uploaded to the message's workspace, live and not attached yet (anything
// else is ENOTFOUND, as a file one cannot see). Called inside PostMessage's
// write, before the channel row is locked.
func (tx *Tx) attachFiles(ctx context.Context, actor string, m *parley.Message, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if len(ids) > parley.MaxFilesPerMessage {
		return parley.Errorf(parley.EINVALID, "a message takes at most %d files", parley.MaxFilesPerMessage)
	}
	seen := make(map[string]bool, len(ids))
	m.Files = make([]parley.File, 0, len(ids))
	for _, id := range ids {
		if err := parley.CheckText("file_ids", id); err != nil {
			return err
		}
		if seen[id] {
			return parley.Errorf(parley.EINVALID, "file %s is listed twice", id)
		}
		seen[id] = true
		f, err := scanFile(tx.QueryRowContext(ctx, `UPDATE files SET channel_id = $1, message_id = $2
			WHERE id = $3 AND workspace_id = $4 AND user_id = $5 AND message_id IS NULL AND deleted_at IS NULL
			RETURNING `+fileColumnsBare, m.ChannelID, m.ID, id, m.WorkspaceID, actor))
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "file %s not found (or attached already)", id)
		}
		if err != nil {
			return fmt.Errorf("attach file: %w", err)
		}
		m.Files = append(m.Files, publicFile(f))
	}
	return nil
}

var fileColumnsBare = strings.ReplaceAll(fileColumns, "f.", "")

// publicFile is the part of a file a message carries.
func publicFile(f *parley.File) parley.File {
	return parley.File{ID: f.ID, Name: f.Name, Size: f.Size, ContentType: f.ContentType,
		Width: f.Width, Height: f.Height, Thumbnail: f.Thumbnail, UserID: f.UserID, CreatedAt: f.CreatedAt}
}

// filesJSON is the messages.files value of a message's attachments.
func filesJSON(files []parley.File) (sql.NullString, error) {
	if len(files) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(files)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("encode files: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// dropMessageFiles marks a deleted message's files deleted (the sweeper
// removes their bytes) and gives their bytes back.
func (tx *Tx) dropMessageFiles(ctx context.Context, m *parley.Message) error {
	if len(m.Files) == 0 {
		return nil
	}
	var total int64
	err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM files
		WHERE message_id = $1 AND deleted_at IS NULL`, m.ID).Scan(&total)
	if err != nil {
		return fmt.Errorf("drop message files: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE files SET deleted_at = $1 WHERE message_id = $2 AND deleted_at IS NULL`,
		micros(tx.now), m.ID); err != nil {
		return fmt.Errorf("drop message files: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE messages SET files = NULL WHERE workspace_id = $1 AND id = $2`,
		m.WorkspaceID, m.ID); err != nil {
		return fmt.Errorf("drop message files: %w", err)
	}
	return tx.useBytes(ctx, m.WorkspaceID, -total)
}

// SweepFiles returns deleted files whose bytes are still to be removed,
// oldest first.
func (s *Store) SweepFiles(ctx context.Context, limit int) ([]parley.File, error) {
	rows, err := s.reads().QueryContext(ctx, `SELECT `+fileColumns+` FROM files f
		WHERE f.deleted_at IS NOT NULL ORDER BY f.deleted_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("sweep files: %w", err)
	}
	defer rows.Close()
	var out []parley.File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("sweep files: %w", err)
		}
		out = append(out, *f)
	}
	return out, rows.Err()
}

// PurgeFiles forgets deleted files whose bytes are gone.
func (s *Store) PurgeFiles(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, "purge files", func(ctx context.Context, tx *Tx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE id = $1 AND deleted_at IS NOT NULL`, id); err != nil {
				return fmt.Errorf("purge file: %w", err)
			}
		}
		return nil
	})
}

// DeleteWorkspaceFiles forgets a workspace's files and usage, and expires
// its uploads: the sweeper aborts them in the storage and forgets them.
func (s *Store) DeleteWorkspaceFiles(ctx context.Context, workspaceID string) error {
	return s.write(ctx, "delete workspace files", func(ctx context.Context, tx *Tx) error {
		for _, q := range []string{
			`DELETE FROM files WHERE workspace_id = $1`,
			`UPDATE file_uploads SET expires_at = 0 WHERE workspace_id = $1`,
			`DELETE FROM workspace_file_usage WHERE workspace_id = $1`,
		} {
			if _, err := tx.ExecContext(ctx, q, workspaceID); err != nil {
				return fmt.Errorf("delete workspace files: %w", err)
			}
		}
		return nil
	})
}

// FileSigningKey returns the cluster's URL signing key, making it once:
// the first writer's key wins and every node reads the same.
func (s *Store) FileSigningKey(ctx context.Context) ([]byte, error) {
	var key string
	err := s.reads().QueryRowContext(ctx, `SELECT key FROM file_signing_key WHERE id = 1`).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("file signing key: %w", err)
		}
		err = s.write(ctx, "file signing key", func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO file_signing_key (id, key) VALUES (1, $1)
				ON CONFLICT (id) DO NOTHING`, base64.StdEncoding.EncodeToString(b)); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, `SELECT key FROM file_signing_key WHERE id = 1`).Scan(&key)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("file signing key: %w", err)
	}
	return base64.StdEncoding.DecodeString(key)
}

const uploadColumns = `id, workspace_id, user_id, file_id, name, size, chunk_size, received, storage_key, backend_id, expires_at`

func scanUpload(sc scanner) (*parley.Upload, error) {
	var u parley.Upload
	var exp int64
	if err := sc.Scan(&u.ID, &u.WorkspaceID, &u.UserID, &u.FileID, &u.Name, &u.Size, &u.ChunkSize, &u.Offset,
		&u.StorageKey, &u.BackendID, &exp); err != nil {
		return nil, err
	}
	u.ExpiresAt = fromMicros(exp)
	return &u, nil
}

// CreateUpload records a resumable upload.
func (s *Store) CreateUpload(ctx context.Context, actor, workspaceID string, nu parley.NewUpload, q parley.FileQuota) (*parley.Upload, error) {
	if err := parley.ValidateFileName(nu.Name); err != nil {
		return nil, err
	}
	if nu.Size <= 0 {
		return nil, parley.Errorf(parley.EINVALID, "size must be positive")
	}
	var out *parley.Upload
	err := s.write(ctx, "create upload", func(ctx context.Context, tx *Tx) error {
		if _, err := checkUpload(ctx, tx, actor, workspaceID, nu.Size, q); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO file_uploads (`+uploadColumns+`, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10, $11)`,
			nu.ID, workspaceID, actor, nu.FileID, nu.Name, nu.Size, nu.ChunkSize, nu.StorageKey, nu.BackendID,
			micros(nu.ExpiresAt), micros(tx.now)); err != nil {
			return fmt.Errorf("insert upload: %w", err)
		}
		out = &parley.Upload{ID: nu.ID, WorkspaceID: workspaceID, Name: nu.Name, Size: nu.Size, ChunkSize: nu.ChunkSize,
			ExpiresAt: txTime(nu.ExpiresAt), UserID: actor, FileID: nu.FileID, StorageKey: nu.StorageKey, BackendID: nu.BackendID}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetUpload returns actor's live upload.
func (s *Store) GetUpload(ctx context.Context, actor, uploadID string) (*parley.Upload, error) {
	u, err := scanUpload(s.reads().QueryRowContext(ctx, `SELECT `+uploadColumns+` FROM file_uploads
		WHERE id = $1 AND user_id = $2 AND expires_at > $3`, uploadID, actor, micros(s.now())))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "upload not found")
	}
	if err != nil {
		return nil, fmt.Errorf("get upload: %w", err)
	}
	return u, nil
}

// AdvanceUpload moves the offset from `from` to `to`, if it is still `from`.
func (s *Store) AdvanceUpload(ctx context.Context, actor, uploadID string, from, to int64) (*parley.Upload, error) {
	var out *parley.Upload
	err := s.write(ctx, "advance upload", func(ctx context.Context, tx *Tx) error {
		out = nil // the function may run again (a retry)
		u, err := scanUpload(tx.QueryRowContext(ctx, `UPDATE file_uploads SET received = $1
			WHERE id = $2 AND user_id = $3 AND received = $4 AND expires_at > $5 RETURNING `+uploadColumns,
			to, uploadID, actor, from, micros(tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			return nil // why not: asked below, outside the transaction
		}
		if err != nil {
			return fmt.Errorf("advance upload: %w", err)
		}
		out = u
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		// Not under the write's connection: a read on a second one while
		// holding the first can wait forever on a small pool
		// (--shard-pool-size) full of writers doing the same.
		if _, err := s.GetUpload(ctx, actor, uploadID); err != nil {
			return nil, err
		}
		return nil, parley.Errorf(parley.ECONFLICT, "the upload's offset is no longer %d", from)
	}
	return out, nil
}

// DeleteUpload forgets actor's upload.
func (s *Store) DeleteUpload(ctx context.Context, actor, uploadID string) error {
	return s.write(ctx, "delete upload", func(ctx context.Context, tx *Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM file_uploads WHERE id = $1 AND user_id = $2`, uploadID, actor)
		if err != nil {
			return fmt.Errorf("delete upload: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return parley.Errorf(parley.ENOTFOUND, "upload not found")
		}
		return nil
	})
}

// ExpiredUploads returns uploads past their expiry, oldest first.
func (s *Store) ExpiredUploads(ctx context.Context, now time.Time, limit int) ([]parley.Upload, error) {
	rows, err := s.reads().QueryContext(ctx, `SELECT `+uploadColumns+` FROM file_uploads
		WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("expired uploads: %w", err)
	}
	defer rows.Close()
	var out []parley.Upload
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, fmt.Errorf("expired uploads: %w", err)
		}
		out = append(out, *u)
	}
	return out, rows.Err()
}
