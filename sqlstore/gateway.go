package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"parley"
)

// Reads for the gateway's own bookkeeping. They act for the server, not for a
// user: the gateway has already authenticated the session and uses these to
// decide what to deliver to it.

// SessionChannels returns the channels of the workspace that userID is a
// member of (DMs included), with each log's last seq. ENOTFOUND when the user
// is not in the workspace.
func (s *Store) SessionChannels(ctx context.Context, userID, workspaceID string) ([]parley.ChannelRef, error) {
	if _, err := workspaceRole(ctx, s.rdb, workspaceID, userID); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT c.id, c.kind, c.last_seq, COALESCE(st.member_count, 0) FROM channel_members m
		JOIN channels c ON c.workspace_id = m.workspace_id AND c.id = m.channel_id
		LEFT JOIN channel_stats st ON st.workspace_id = c.workspace_id AND st.channel_id = c.id
		WHERE m.user_id = $1 AND m.workspace_id = $2 ORDER BY c.id`, userID, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("session channels: %w", err)
	}
	defer rows.Close()
	out := []parley.ChannelRef{}
	for rows.Next() {
		var r parley.ChannelRef
		var kind string
		if err := rows.Scan(&r.ID, &kind, &r.LastSeq, &r.MemberCount); err != nil {
			return nil, fmt.Errorf("session channels: %w", err)
		}
		r.Kind = parley.ChannelKind(kind)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("session channels: %w", err)
	}
	return out, nil
}

// ChannelLog returns up to limit events of the channel with seq > afterSeq,
// ascending (the gateway's gap fill and cross-node replay).
func (s *Store) ChannelLog(ctx context.Context, channelID string, afterSeq int64, limit int) ([]parley.Event, error) {
	var ws string
	err := s.rdb.QueryRowContext(ctx, `SELECT workspace_id FROM channels WHERE id = $1`, channelID).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "channel not found")
	}
	if err != nil {
		return nil, fmt.Errorf("channel log: %w", err)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT channel_id, seq, type, data, created_at FROM events
		WHERE workspace_id = $1 AND channel_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`,
		ws, channelID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("channel log: %w", err)
	}
	byChannel, err := scanEvents(rows, map[string]string{channelID: ws})
	if err != nil {
		return nil, fmt.Errorf("channel log: %w", err)
	}
	return byChannel[channelID], nil
}

// ChannelMember reports whether userID is a member of the channel now.
func (s *Store) ChannelMember(ctx context.Context, userID, channelID string) (bool, error) {
	var one int
	err := s.rdb.QueryRowContext(ctx, `SELECT 1 FROM channel_members m JOIN channels c
		ON c.workspace_id = m.workspace_id AND c.id = m.channel_id
		WHERE c.id = $1 AND m.user_id = $2`, channelID, userID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("channel member: %w", err)
	}
	return true, nil
}
