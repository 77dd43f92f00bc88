package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"parley"
)

// Unread and mention counters (migration 00002), kept by the writes that
// change them so that reads never count messages:
//
//   - A message that counts in its channel (countsInChannel) gets the
//     channel's next ordinal: channels.msg_count + 1, stored in
//     messages.ord. Replies posted with collapsed threads on get none (they
//     count in their thread, threads.go); with it off they are numbered
//     like any other message. A message keeps what it was given when the
//     setting changes later.
//   - A membership keeps read_ord, the ordinal count at its read marker,
//     set when the marker moves: on join (msg_count), on MarkRead (the ord
//     of the last counted message at or before the marker, one index seek)
//     and on posting (the poster's marker moves to their own post, as Slack
//     does, so one's own posts are never unread).
//   - unread = msg_count - read_ord - counted messages deleted after the
//     marker. A deleted message stays numbered; the partial index
//     messages_deleted_counted holds only deleted ones, so that last term
//     costs a seek over the deletions after the marker, usually none.
//   - mentions has a row per (member, counted message mentioning them):
//     O(handles) rows for @handle, O(members) for @channel and @everyone,
//     O(active members) for @here. mention_count is the member's rows after the marker; moving
//     the marker deletes the rows it passes, leaving, deleting or editing
//     the message drops them, so the table holds about the unread mentions.
//
// @here counts only the members active when the message is written
// (here.go). With collapsed threads on, mentions in replies count in the
// thread memberships instead (threads.go).

// countsInChannel reports whether a new message counts in its channel's
// unread and mention counts: top-level messages do; with collapsed threads
// on (the live configuration, read once per write) replies count in their
// thread instead, and with it off they count in the channel like any other
// message. This is the one place that decides.
func countsInChannel(m *parley.Message, collapsed bool) bool {
	return m.ThreadRootID == "" || !collapsed
}

// checkBroadcast refuses @channel, @here and @everyone from a non-admin in
// a channel with more members than the live configuration's cap (0: no
// cap), as large teams expect.
func checkBroadcast(a *channelAccess, text string, cfg parley.LiveConfig) error {
	limit := cfg.ChannelMentionMaxMembers
	if limit <= 0 || a.ch.MemberCount <= int64(limit) || a.role.IsAdmin() {
		return nil
	}
	if !scopeOf(text).broadcast() {
		return nil
	}
	return parley.Errorf(parley.EFORBIDDEN,
		"@channel, @here and @everyone need a workspace admin in channels of more than %d members", limit)
}

// maxMentionHandles bounds the @handles of one message that are looked up.
const maxMentionHandles = 256

// numberMessage gives a counted message its ordinal: one more than the
// channel's count so far. Called after appendEvent, which already holds the
// channel row's lock.
func (tx *Tx) numberMessage(ctx context.Context, workspaceID, channelID string) (int64, error) {
	var ord int64
	if err := tx.QueryRowContext(ctx,
		`UPDATE channels SET msg_count = msg_count + 1 WHERE workspace_id = $1 AND id = $2 RETURNING msg_count`,
		workspaceID, channelID).Scan(&ord); err != nil {
		return 0, fmt.Errorf("number message: %w", err)
	}
	return ord, nil
}

// countPost does a new counted message's bookkeeping: the poster has read
// the channel up to their own post, and its mentions are recorded. It
// returns the ids of the members the message mentions.
func (tx *Tx) countPost(ctx context.Context, m *parley.Message, ord int64, here hereFilter) ([]string, error) {
	if _, err := tx.ExecContext(ctx,
		`UPDATE channel_members SET last_read_seq = $1, read_ord = $2
		 WHERE workspace_id = $3 AND channel_id = $4 AND user_id = $5 AND last_read_seq < $1`,
		m.Seq, ord, m.WorkspaceID, m.ChannelID, m.UserID); err != nil {
		return nil, fmt.Errorf("mark own post read: %w", err)
	}
	return tx.recordMentions(ctx, m, here)
}

// recordMentions writes a mentions row for every member of the message's
// channel that it mentions, its author excepted: everyone for @channel and
// @everyone, the active members (here) and the named ones for @here, else
// the members whose handles it names. It returns the ids of those members.
func (tx *Tx) recordMentions(ctx context.Context, m *parley.Message, here hereFilter) ([]string, error) {
	ms := scopeOf(m.Text)
	names := ms.handles
	if ms.here {
		return tx.recordHere(ctx, m, names, here)
	}
	if ms.all {
		ids, err := queryIDs(ctx, tx,
			`INSERT INTO mentions (workspace_id, user_id, channel_id, seq)
			 SELECT workspace_id, user_id, channel_id, $4 FROM channel_members
			 WHERE workspace_id = $1 AND channel_id = $2 AND user_id <> $3
			 RETURNING user_id`,
			m.WorkspaceID, m.ChannelID, m.UserID, m.Seq)
		if err != nil {
			return nil, fmt.Errorf("record channel mention: %w", err)
		}
		return ids, nil
	}
	if len(names) == 0 {
		return nil, nil
	}
	n := padded(len(names))
	args := make([]any, 0, n+4)
	args = append(args, m.WorkspaceID, m.ChannelID, m.UserID, m.Seq)
	for i := range n { // repeats are harmless in IN (…)
		args = append(args, names[min(i, len(names)-1)])
	}
	ids, err := queryIDs(ctx, tx,
		`INSERT INTO mentions (workspace_id, user_id, channel_id, seq)
		 SELECT cm.workspace_id, cm.user_id, cm.channel_id, $4
		 FROM users u JOIN channel_members cm ON cm.user_id = u.id
		 WHERE cm.workspace_id = $1 AND cm.channel_id = $2 AND cm.user_id <> $3
		   AND u.handle IN (`+inClause(5, n)+`)
		 RETURNING user_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("record mentions: %w", err)
	}
	return ids, nil
}

// queryIDs runs a query (or a statement with RETURNING) whose rows are one
// id each.
func queryIDs(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// forgetMentions drops the mentions of one message (deleted, or edited and
// about to be recorded again).
func (tx *Tx) forgetMentions(ctx context.Context, m *parley.Message) error {
	if _, err := tx.ExecContext(ctx,
		`DELETE FROM mentions WHERE workspace_id = $1 AND channel_id = $2 AND seq = $3`,
		m.WorkspaceID, m.ChannelID, m.Seq); err != nil {
		return fmt.Errorf("forget mentions: %w", err)
	}
	return nil
}

// clearMentions drops a member's mentions in a channel up to seq (their
// read marker moved there), or all of them when seq is negative (they
// left).
func (tx *Tx) clearMentions(ctx context.Context, workspaceID, channelID, userID string, seq int64) error {
	q := `DELETE FROM mentions WHERE workspace_id = $1 AND user_id = $2 AND channel_id = $3 AND seq <= $4`
	args := []any{workspaceID, userID, channelID, seq}
	if seq < 0 {
		q, args = `DELETE FROM mentions WHERE workspace_id = $1 AND user_id = $2 AND channel_id = $3`, args[:3]
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("clear mentions: %w", err)
	}
	return nil
}

// Reads of the counts. m is the membership, c the channel (aliases of the
// queries that use them).
const (
	// unreadExpr is a member's unread count.
	unreadExpr = `c.msg_count - m.read_ord - (SELECT COUNT(*) FROM messages d
		WHERE d.channel_id = m.channel_id AND d.ord IS NOT NULL AND d.deleted_at IS NOT NULL
		  AND d.seq > m.last_read_seq)`
	// mentionExpr is a member's mention count.
	mentionExpr = `(SELECT COUNT(*) FROM mentions mn
		WHERE mn.workspace_id = m.workspace_id AND mn.user_id = m.user_id
		  AND mn.channel_id = m.channel_id AND mn.seq > m.last_read_seq)`
)

// fillCounts sets ch's UnreadCount and MentionCount for userID, a member
// (non-members have none). One query.
func fillCounts(ctx context.Context, q querier, userID string, ch *parley.Channel) error {
	if !ch.IsMember {
		return nil
	}
	err := q.QueryRowContext(ctx, `SELECT `+unreadExpr+`, `+mentionExpr+`
		FROM channel_members m JOIN channels c ON c.workspace_id = m.workspace_id AND c.id = m.channel_id
		WHERE m.workspace_id = $1 AND m.channel_id = $2 AND m.user_id = $3`,
		ch.WorkspaceID, ch.ID, userID).Scan(&ch.UnreadCount, &ch.MentionCount)
	if errors.Is(err, sql.ErrNoRows) { // left since ch was read
		return nil
	}
	if err != nil {
		return fmt.Errorf("channel counts: %w", err)
	}
	ch.UnreadCount = max(ch.UnreadCount, 0)
	return nil
}
