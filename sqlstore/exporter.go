package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"parley"
)

// Exporting a workspace (parley.Exporter, docs/import.md): read in one
// read-only transaction, so that the export is one consistent snapshot
// (SQLite's WAL reader, PostgreSQL's REPEATABLE READ), and streamed to the
// sink a page of messages at a time, so that memory stays bounded however
// long the history is.

var _ parley.Exporter = (*Store)(nil)

// exportPage is how many messages one read takes.
const exportPage = 1000

// ExportWorkspace streams the workspace to sink. Only its owner may.
func (s *Store) ExportWorkspace(ctx context.Context, actor, workspaceID string, opts parley.ExportOptions, sink parley.ExportSink) error {
	ws, err := loadWorkspace(ctx, s.rdb, actor, workspaceID)
	if err != nil {
		return err
	}
	if ws.Role != parley.RoleOwner {
		return parley.Errorf(parley.EFORBIDDEN, "only the workspace owner may export it")
	}
	txo := &sql.TxOptions{ReadOnly: true}
	if s.dialect == Postgres {
		txo.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.rdb.BeginTx(ctx, txo)
	if err != nil {
		return fmt.Errorf("export: begin: %w", err)
	}
	defer tx.Rollback()
	if err := sink.Workspace(ws); err != nil {
		return err
	}
	users, err := exportUsers(ctx, tx, workspaceID)
	if err != nil {
		return err
	}
	if err := sink.Users(users); err != nil {
		return err
	}
	kinds := `('public')`
	if opts.Private {
		kinds = `('public', 'private')`
	}
	chans, err := exportChannels(ctx, tx, workspaceID, kinds)
	if err != nil {
		return err
	}
	for i := range chans {
		if err := sink.Channel(&chans[i]); err != nil {
			return err
		}
		if err := exportMessages(ctx, tx, workspaceID, chans[i].ID, sink); err != nil {
			return err
		}
	}
	return nil
}

func exportUsers(ctx context.Context, q querier, workspaceID string) ([]parley.ExportUser, error) {
	rows, err := q.QueryContext(ctx, `SELECT u.id, u.email, u.handle, u.name, u.title, wm.role, u.deactivated_at
		FROM workspace_members wm JOIN users u ON u.id = wm.user_id
		WHERE wm.workspace_id = $1 ORDER BY wm.joined_at, u.id`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("export users: %w", err)
	}
	defer rows.Close()
	out := []parley.ExportUser{}
	for rows.Next() {
		var u parley.ExportUser
		var role string
		var deactivated sql.NullInt64
		if err := rows.Scan(&u.ID, &u.Email, &u.Handle, &u.Name, &u.Title, &role, &deactivated); err != nil {
			return nil, fmt.Errorf("export users: %w", err)
		}
		u.Role, u.Deactivated = parley.Role(role), deactivated.Valid
		out = append(out, u)
	}
	return out, rows.Err()
}

func exportChannels(ctx context.Context, q querier, workspaceID, kinds string) ([]parley.ExportChannel, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, name, kind, topic, purpose, created_by, created_at, archived_at
		FROM channels WHERE workspace_id = $1 AND kind IN `+kinds+` ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("export channels: %w", err)
	}
	var out []parley.ExportChannel
	for rows.Next() {
		var c parley.ExportChannel
		var kind string
		var created int64
		var archived sql.NullInt64
		if err := rows.Scan(&c.ID, &c.Name, &kind, &c.Topic, &c.Purpose, &c.CreatedBy, &created, &archived); err != nil {
			rows.Close()
			return nil, fmt.Errorf("export channels: %w", err)
		}
		c.Kind, c.CreatedAt, c.ArchivedAt = parley.ChannelKind(kind), fromMicros(created), timePtr(archived)
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("export channels: %w", err)
	}
	for i := range out {
		ids, err := queryIDs(ctx, q, `SELECT user_id FROM channel_members
			WHERE workspace_id = $1 AND channel_id = $2 ORDER BY joined_at, user_id`, workspaceID, out[i].ID)
		if err != nil {
			return nil, fmt.Errorf("export channel members: %w", err)
		}
		out[i].Members = ids
		if out[i].Members == nil {
			out[i].Members = []string{}
		}
	}
	return out, nil
}

// exportMessages streams a channel's messages in seq order: live ones, and
// deleted roots that still have replies (as deleted, without text).
func exportMessages(ctx context.Context, q querier, workspaceID, channelID string, sink parley.ExportSink) error {
	pins := map[string]*parley.ExportMessage{}
	var after int64
	for {
		rows, err := q.QueryContext(ctx, `SELECT id, seq, user_id, text, created_at, edited_at, deleted_at,
			thread_root_id, reply_count, last_reply_at, bot_profile FROM messages
			WHERE channel_id = $1 AND seq > $2 AND (deleted_at IS NULL OR (thread_root_id IS NULL AND reply_count > 0))
			ORDER BY seq LIMIT $3`, channelID, after, exportPage)
		if err != nil {
			return fmt.Errorf("export messages: %w", err)
		}
		var page []parley.ExportMessage
		for rows.Next() {
			var m parley.ExportMessage
			var created int64
			var edited, deleted, last sql.NullInt64
			var root, profile sql.NullString
			if err := rows.Scan(&m.ID, &m.Seq, &m.UserID, &m.Text, &created, &edited, &deleted, &root,
				&m.ReplyCount, &last, &profile); err != nil {
				rows.Close()
				return fmt.Errorf("export messages: %w", err)
			}
			if profile.Valid && profile.String != "" {
				if err := json.Unmarshal([]byte(profile.String), &m.BotProfile); err != nil {
					rows.Close()
					return fmt.Errorf("export messages: %s: bot_profile: %w", m.ID, err)
				}
			}
			m.CreatedAt, m.EditedAt, m.Deleted = fromMicros(created), timePtr(edited), deleted.Valid
			m.ThreadRootID, m.LastReplyAt = root.String, timePtr(last)
			page = append(page, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("export messages: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		if err := exportMarks(ctx, q, workspaceID, page, pins); err != nil {
			return err
		}
		for i := range page {
			if err := sink.Message(&page[i]); err != nil {
				return err
			}
		}
		after = page[len(page)-1].Seq
		clear(pins)
	}
}

// exportMarks fills in the reactions, pins and imported files of a page.
func exportMarks(ctx context.Context, q querier, workspaceID string, page []parley.ExportMessage, byID map[string]*parley.ExportMessage) error {
	args := []any{workspaceID}
	for i := range page {
		byID[page[i].ID] = &page[i]
		args = append(args, page[i].ID)
	}
	in := inClause(2, len(page))
	rows, err := q.QueryContext(ctx, `SELECT message_id, emoji, user_id FROM reactions
		WHERE workspace_id = $1 AND message_id IN (`+in+`) ORDER BY message_id, created_at, emoji, user_id`, args...)
	if err != nil {
		return fmt.Errorf("export reactions: %w", err)
	}
	for rows.Next() {
		var id, emoji, user string
		if err := rows.Scan(&id, &emoji, &user); err != nil {
			rows.Close()
			return fmt.Errorf("export reactions: %w", err)
		}
		m := byID[id]
		i := slices.IndexFunc(m.Reactions, func(r parley.ExportReaction) bool { return r.Emoji == emoji })
		if i < 0 {
			m.Reactions = append(m.Reactions, parley.ExportReaction{Emoji: emoji})
			i = len(m.Reactions) - 1
		}
		m.Reactions[i].UserIDs = append(m.Reactions[i].UserIDs, user)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export reactions: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT message_id, pinned_by, pinned_at FROM pins
		WHERE workspace_id = $1 AND message_id IN (`+in+`)`, args...)
	if err != nil {
		return fmt.Errorf("export pins: %w", err)
	}
	for rows.Next() {
		var id, by string
		var at int64
		if err := rows.Scan(&id, &by, &at); err != nil {
			rows.Close()
			return fmt.Errorf("export pins: %w", err)
		}
		t := fromMicros(at)
		byID[id].PinnedBy, byID[id].PinnedAt = by, &t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("export pins: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT message_id, ext_id, name, title, mimetype, size, url FROM import_files
		WHERE workspace_id = $1 AND message_id IN (`+in+`) ORDER BY message_id, position`, args...)
	if err != nil {
		return fmt.Errorf("export files: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var f parley.ImportFile
		if err := rows.Scan(&id, &f.ExtID, &f.Name, &f.Title, &f.MimeType, &f.Size, &f.URL); err != nil {
			return fmt.Errorf("export files: %w", err)
		}
		byID[id].Files = append(byID[id].Files, f)
	}
	return rows.Err()
}
