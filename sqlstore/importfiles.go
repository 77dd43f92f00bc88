package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"parley"
)

// The files of imported messages (import_files): the bytes are fetched by
// package transfer (from the export's zip or the source's URL) and stored
// by package files; here they are recorded and attached, once.

var _ parley.ImportFileStore = (*Store)(nil)

// PendingImportFiles pages the workspace's import_files rows not attached.
func (s *Store) PendingImportFiles(ctx context.Context, workspaceID, afterMessage string, afterPosition, limit int) ([]parley.PendingImportFile, error) {
	if limit <= 0 || limit > 1000 {
		limit = 500
	}
	rows, err := s.rdb.QueryContext(ctx, fmt.Sprintf(`SELECT message_id, ext_id, position, name, title, mimetype, size, url
		FROM import_files
		WHERE workspace_id = $1 AND attached_at IS NULL AND (message_id > $2 OR (message_id = $2 AND position > $3))
		ORDER BY message_id, position LIMIT %d`, limit), workspaceID, afterMessage, afterPosition)
	if err != nil {
		return nil, fmt.Errorf("pending import files: %w", err)
	}
	defer rows.Close()
	var out []parley.PendingImportFile
	for rows.Next() {
		var p parley.PendingImportFile
		if err := rows.Scan(&p.MessageID, &p.ExtID, &p.Position, &p.Name, &p.Title, &p.MimeType, &p.Size, &p.URL); err != nil {
			return nil, fmt.Errorf("pending import files: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// AttachImportedFile records and attaches one fetched file. The message
// row is locked first (an UPDATE), so that two files of one message
// attached at once both end up in its files list.
func (s *Store) AttachImportedFile(ctx context.Context, workspaceID string, p parley.PendingImportFile, f parley.File, q parley.FileQuota) (*parley.File, error) {
	if err := parley.ValidateFileName(f.Name); err != nil {
		return nil, err
	}
	var out *parley.File
	err := s.write(ctx, "attach imported file", func(ctx context.Context, tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE import_files SET attached_at = $1
			WHERE workspace_id = $2 AND message_id = $3 AND ext_id = $4 AND attached_at IS NULL`,
			micros(tx.now), workspaceID, p.MessageID, p.ExtID)
		if err != nil {
			return fmt.Errorf("mark import file: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return parley.Errorf(parley.ECONFLICT, "file %s of message %s is attached already", p.ExtID, p.MessageID)
		}
		var channelID, author string
		var files sql.NullString
		err = tx.QueryRowContext(ctx, `UPDATE messages SET files = files
			WHERE workspace_id = $1 AND id = $2 AND deleted_at IS NULL RETURNING channel_id, user_id, files`,
			workspaceID, p.MessageID).Scan(&channelID, &author, &files)
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "message %s is gone", p.MessageID)
		}
		if err != nil {
			return fmt.Errorf("lock imported message: %w", err)
		}
		// The quota, checked and counted in this transaction as CreateFile does.
		if _, err := tx.ExecContext(ctx, `INSERT INTO workspace_file_usage (workspace_id, bytes) VALUES ($1, 0)
			ON CONFLICT (workspace_id) DO UPDATE SET bytes = workspace_file_usage.bytes`, workspaceID); err != nil {
			return fmt.Errorf("lock file usage: %w", err)
		}
		if q.MaxFileBytes > 0 && f.Size > q.MaxFileBytes {
			return parley.Errorf(parley.ETOOLARGE, "the file is larger than the limit of %d bytes", q.MaxFileBytes)
		}
		var used int64
		if err := tx.QueryRowContext(ctx, `SELECT bytes FROM workspace_file_usage WHERE workspace_id = $1`, workspaceID).Scan(&used); err != nil {
			return fmt.Errorf("file usage: %w", err)
		}
		if q.WorkspaceMaxBytes > 0 && used+f.Size > q.WorkspaceMaxBytes {
			return parley.Errorf(parley.ETOOLARGE, "the workspace's file storage is full: %d of %d bytes used, this file needs %d",
				used, q.WorkspaceMaxBytes, f.Size)
		}
		g := f
		g.WorkspaceID, g.UserID, g.CreatedAt, g.ChannelID, g.MessageID = workspaceID, author, tx.now, channelID, p.MessageID
		g.Thumbnail = g.ThumbnailKey != ""
		if _, err := tx.ExecContext(ctx, `INSERT INTO files (id, workspace_id, user_id, name, size, content_type,
				width, height, storage_key, thumbnail_key, channel_id, message_id, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			g.ID, workspaceID, author, g.Name, g.Size, g.ContentType, g.Width, g.Height, g.StorageKey,
			nullString(g.ThumbnailKey), channelID, p.MessageID, micros(tx.now)); err != nil {
			return fmt.Errorf("insert imported file: %w", err)
		}
		if err := tx.useBytes(ctx, workspaceID, g.Size); err != nil {
			return err
		}
		var list []parley.File
		if files.Valid && files.String != "" {
			if err := json.Unmarshal([]byte(files.String), &list); err != nil {
				return fmt.Errorf("decode message files: %w", err)
			}
		}
		list = append(list, publicFile(&g))
		js, err := filesJSON(list)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET files = $1 WHERE workspace_id = $2 AND id = $3`,
			js, workspaceID, p.MessageID); err != nil {
			return fmt.Errorf("attach imported file: %w", err)
		}
		out = &g
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
