package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"parley"
)

// Channel memberships and read markers. The member count and the durable
// member.joined / member.left events are kept by tx.addMember and
// tx.removeMember (membership.go).

// JoinChannel makes actor a member of a public channel they can see.
// Joining again is a no-op that returns the channel.
func (s *Store) JoinChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	var out *parley.Channel
	err := s.writeChannel(ctx, "join channel", channelID, func(ctx context.Context, tx *Tx) error {
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		ch := a.ch
		if err := a.requireActive(); err != nil {
			return err
		}
		if ch.IsMember {
			out = ch
			return nil
		}
		if ch.Kind != parley.KindPublic {
			// loadChannel hides private channels and DMs from non-members;
			// this keeps that true should the rules there change.
			return parley.Errorf(parley.ENOTFOUND, "channel not found")
		}
		if _, err := tx.addMember(ctx, ch, actor, actor); err != nil {
			return err
		}
		ch.UpdatedAt = tx.now
		out = ch
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LeaveChannel ends actor's membership. Leaving a channel one is not in is a
// no-op; a one-to-one DM cannot be left. Archived channels may be left.
func (s *Store) LeaveChannel(ctx context.Context, actor, channelID string) error {
	return s.writeChannel(ctx, "leave channel", channelID, func(ctx context.Context, tx *Tx) error {
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		if a.ch.Kind == parley.KindDM {
			return parley.Errorf(parley.EINVALID, "cannot leave a direct message")
		}
		if !a.ch.IsMember {
			return nil
		}
		_, err = tx.removeMember(ctx, a.ch, actor, actor)
		return err
	})
}

// AddMembers adds workspace members to a public or private channel that
// actor belongs to. Either every listed user is valid and all are added, or
// nothing changes; users already in the channel are skipped.
func (s *Store) AddMembers(ctx context.Context, actor, channelID string, userIDs []string) (*parley.Channel, error) {
	var out *parley.Channel
	err := s.writeChannel(ctx, "add members", channelID, func(ctx context.Context, tx *Tx) error {
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		if err := a.requireMember(); err != nil {
			return err
		}
		if a.role == parley.RoleGuest {
			return parley.Errorf(parley.EFORBIDDEN, "guests cannot add members")
		}
		if err := a.requireActive(); err != nil {
			return err
		}
		ch := a.ch
		if ch.Kind.IsDM() {
			return parley.Errorf(parley.EINVALID, "members cannot be added to a direct message; open a new one instead")
		}
		ids := dedupe(userIDs, "")
		switch {
		case len(ids) == 0:
			return parley.Errorf(parley.EINVALID, "user_ids must name at least one user")
		case len(ids) > parley.MaxAddMembers:
			return parley.Errorf(parley.EINVALID, "at most %d users can be added at once", parley.MaxAddMembers)
		}
		if err := checkWorkspaceUsers(ctx, tx, ch.WorkspaceID, ids); err != nil {
			return err
		}
		grew := false
		for _, u := range ids {
			added, err := tx.addMember(ctx, ch, u, actor)
			if err != nil {
				return err
			}
			if added {
				ch.UpdatedAt, grew = tx.now, true
			}
		}
		if grew {
			if err := s.checkMemberCap(ch); err != nil {
				return err
			}
		}
		out = ch
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveMember removes userID from the channel (workspace admins and the
// channel's creator only). Removing oneself is leaving.
func (s *Store) RemoveMember(ctx context.Context, actor, channelID, userID string) error {
	if userID == actor {
		return s.LeaveChannel(ctx, actor, channelID)
	}
	return s.writeChannel(ctx, "remove member", channelID, func(ctx context.Context, tx *Tx) error {
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		if !a.canManage(actor) {
			return parley.Errorf(parley.EFORBIDDEN, "only workspace admins and the channel's creator may remove members")
		}
		if a.ch.Kind.IsDM() {
			return parley.Errorf(parley.EINVALID, "members cannot be removed from a direct message")
		}
		removed, err := tx.removeMember(ctx, a.ch, userID, actor)
		if err != nil {
			return err
		}
		if !removed {
			return parley.Errorf(parley.ENOTFOUND, "user %s is not a member of this channel", userID)
		}
		return nil
	})
}

// ListMembers pages a channel's members by user id. The cursor is opaque to
// clients: the last user id of the previous page.
func (s *Store) ListMembers(ctx context.Context, actor, channelID, cursor string, limit int) (*parley.MemberPage, error) {
	a, err := loadChannel(ctx, s.rdb, actor, channelID)
	if err != nil {
		return nil, err
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	limit = parley.ClampLimit(limit)
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+userColumns+`, m.joined_at
		FROM channel_members m JOIN users u ON u.id = m.user_id
		WHERE m.workspace_id = $1 AND m.channel_id = $2 AND m.user_id > $3
		ORDER BY m.user_id LIMIT $4`,
		a.ch.WorkspaceID, a.ch.ID, after, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	defer rows.Close()
	now := s.now()
	page := &parley.MemberPage{Members: make([]parley.Member, 0, min(limit, 64))}
	for rows.Next() {
		var joined int64
		u, err := scanUser(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &joined)...)
		}), now)
		if err != nil {
			return nil, fmt.Errorf("scan member: %w", err)
		}
		page.Members = append(page.Members, parley.Member{UserID: u.ID, JoinedAt: fromMicros(joined), User: u})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	if len(page.Members) > limit {
		page.Members = page.Members[:limit]
		page.NextCursor = encodeCursor(page.Members[limit-1].UserID)
	}
	return page, nil
}

// MarkRead moves actor's read marker forward to seq, clamped to the
// channel's last seq; it never moves back. When it moves, actor's other
// sessions hear of it on their user topic. With collapsed threads on it
// also clears actor's unread threads in the channel, writing only the
// thread memberships that have something unread (threads.go).
func (s *Store) MarkRead(ctx context.Context, actor, channelID string, seq int64) (*parley.ReadState, error) {
	var rs *readState
	collapsed := s.live().CollapsedThreads
	err := s.write(ctx, "mark read", func(ctx context.Context, tx *Tx) error {
		rs = nil
		if err := s.markRead(ctx, tx, actor, channelID, seq, &rs); err != nil {
			return err
		}
		if collapsed {
			if _, err := tx.readChannelThreads(ctx, rs.workspaceID, channelID, actor); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rs.ReadState, nil
}

// readState is MarkRead's answer with the channel's workspace.
type readState struct {
	parley.ReadState
	workspaceID string
}

// markRead moves the channel read marker (see MarkRead) and sets *out.
func (s *Store) markRead(ctx context.Context, tx *Tx, actor, channelID string, seq int64, out **readState) error {
	{
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		if err := a.requireMember(); err != nil {
			return err
		}
		if seq < 0 {
			return parley.Errorf(parley.EINVALID, "seq must not be negative")
		}
		ch := a.ch
		to := min(seq, ch.LastSeq)
		// read_ord is the number of the last counted message at or before
		// the marker (unread.go); every seq up to the channel's last is
		// committed, so the lookup sees them all.
		res, err := tx.ExecContext(ctx,
			`UPDATE channel_members SET last_read_seq = $1, read_ord = COALESCE((SELECT msg.ord FROM messages msg
			   WHERE msg.channel_id = $3 AND msg.seq <= $1 AND msg.ord IS NOT NULL ORDER BY msg.seq DESC LIMIT 1), 0)
			 WHERE workspace_id = $2 AND channel_id = $3 AND user_id = $4 AND last_read_seq < $1`,
			to, ch.WorkspaceID, ch.ID, actor)
		if err != nil {
			return fmt.Errorf("move read marker: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("move read marker: %w", err)
		} else if n > 0 {
			if err := tx.clearMentions(ctx, ch.WorkspaceID, ch.ID, actor, to); err != nil {
				return err
			}
			*out = &readState{parley.ReadState{ChannelID: ch.ID, LastReadSeq: to}, ch.WorkspaceID}
			return tx.emit(ch.WorkspaceID, parley.EventChannelRead,
				parley.ReadEventData{ChannelID: ch.ID, LastReadSeq: to}, parley.TopicUser(actor))
		}
		// Not moved: answer with the marker as it is now (it may have moved
		// past the one loadChannel saw).
		rs := &readState{parley.ReadState{ChannelID: ch.ID}, ch.WorkspaceID}
		err = tx.QueryRowContext(ctx,
			`SELECT last_read_seq FROM channel_members WHERE workspace_id = $1 AND channel_id = $2 AND user_id = $3`,
			ch.WorkspaceID, ch.ID, actor).Scan(&rs.LastReadSeq)
		if err != nil {
			return fmt.Errorf("read marker: %w", err)
		}
		*out = rs
		return nil
	}
}

// checkWorkspaceUsers returns EINVALID naming the first of ids that is not
// a member of the workspace or is deactivated.
func checkWorkspaceUsers(ctx context.Context, q querier, workspaceID string, ids []string) error {
	args := make([]any, 0, len(ids)+1)
	args = append(args, workspaceID)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := q.QueryContext(ctx, `SELECT u.id, u.deactivated_at
		FROM workspace_members wm JOIN users u ON u.id = wm.user_id
		WHERE wm.workspace_id = $1 AND wm.user_id IN (`+inClause(2, len(ids))+`)`, args...)
	if err != nil {
		return fmt.Errorf("check workspace users: %w", err)
	}
	defer rows.Close()
	active := make(map[string]bool, len(ids))
	for rows.Next() {
		var id string
		var deactivated sql.NullInt64
		if err := rows.Scan(&id, &deactivated); err != nil {
			return fmt.Errorf("check workspace users: %w", err)
		}
		active[id] = !deactivated.Valid
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check workspace users: %w", err)
	}
	for _, id := range ids {
		ok, member := active[id]
		switch {
		case !member:
			return parley.Errorf(parley.EINVALID, "user %s is not a member of this workspace", id)
		case !ok:
			return parley.Errorf(parley.EINVALID, "user %s is deactivated", id)
		}
	}
	return nil
}
