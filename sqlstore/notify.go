package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"parley"
)

// Email notification state (migration 00011, package notify,
// docs/email.md). The notifier finds what to email from the unread state
// itself: the mentions table (unread.go) holds about the unread mentions,
// and a DM membership is unread while its channel's msg_count is past its
// read_ord. notify_sent remembers, per (user, channel), the last seq an
// email covered, so each item goes out at most once.

var _ parley.NotifyStore = (*Store)(nil)

// NotifyPrefs returns the user's email preference (the default when they
// never chose).
func (s *Store) NotifyPrefs(ctx context.Context, userID string) (parley.NotifyPrefs, error) {
	p := parley.DefaultNotifyPrefs()
	err := s.rdb.QueryRowContext(ctx,
		`SELECT mode, interval_seconds FROM notify_prefs WHERE user_id = $1`, userID).Scan(&p.Mode, &p.IntervalSeconds)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("notify prefs: %w", err)
	}
	return p, nil
}

// SetNotifyPrefs stores the user's email preference.
func (s *Store) SetNotifyPrefs(ctx context.Context, userID string, p parley.NotifyPrefs) (parley.NotifyPrefs, error) {
	if err := p.Validate(); err != nil {
		return p, err
	}
	err := s.write(ctx, "set_notify_prefs", func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO notify_prefs (user_id, mode, interval_seconds, updated_at) VALUES ($1, $2, $3, $4)
			 ON CONFLICT (user_id) DO UPDATE SET mode = excluded.mode,
			   interval_seconds = excluded.interval_seconds, updated_at = excluded.updated_at`,
			userID, p.Mode, p.IntervalSeconds, micros(tx.now))
		if err != nil {
			return fmt.Errorf("set notify prefs: %w", err)
		}
		return nil
	})
	return p, err
}

// pendingUsers selects the ids of users with an unread mention or an
// unread DM channel beyond what was emailed to them.
const pendingUsers = `
	SELECT mn.user_id FROM mentions mn
	JOIN channel_members cm ON cm.workspace_id = mn.workspace_id AND cm.channel_id = mn.channel_id AND cm.user_id = mn.user_id
	LEFT JOIN notify_sent ns ON ns.user_id = mn.user_id AND ns.channel_id = mn.channel_id
	WHERE mn.seq > cm.last_read_seq AND mn.seq > COALESCE(ns.seq, 0)
	UNION
	SELECT cm.user_id FROM channel_members cm
	JOIN channels c ON c.id = cm.channel_id
	LEFT JOIN notify_sent ns ON ns.user_id = cm.user_id AND ns.channel_id = cm.channel_id
	WHERE c.kind IN ('dm', 'group_dm') AND c.msg_count > cm.read_ord AND c.last_seq > COALESCE(ns.seq, 0)`

// recipientColumns are a NotifyRecipient's columns: u the user, p their
// preference and st their notifier state.
const recipientColumns = `u.id, u.email, u.name, COALESCE(p.mode, 'on'), COALESCE(p.interval_seconds, $1), COALESCE(st.last_sent_at, 0)`

// recipientFrom joins a user to their preference and state, keeping the
// active people with email on.
const recipientFrom = ` FROM users u
	LEFT JOIN notify_prefs p ON p.user_id = u.id
	LEFT JOIN notify_state st ON st.user_id = u.id
	WHERE u.deactivated_at IS NULL AND NOT u.is_bot AND COALESCE(p.mode, 'on') = 'on'`

// NotifyRecipients returns up to limit active people with email on and
// something unread that was never emailed, those emailed longest ago first.
func (s *Store) NotifyRecipients(ctx context.Context, limit int) ([]parley.NotifyRecipient, error) {
	rows, err := s.rdb.QueryContext(ctx,
		`SELECT `+recipientColumns+recipientFrom+`
		   AND u.id IN (`+pendingUsers+`)
		 ORDER BY COALESCE(st.last_sent_at, 0), u.id
		 LIMIT $2`, parley.NotifyDefaultInterval, limit)
	if err != nil {
		return nil, fmt.Errorf("notify recipients: %w", err)
	}
	out, err := scanRecipients(rows, nil)
	if err != nil {
		return nil, fmt.Errorf("notify recipients: %w", err)
	}
	return out, nil
}

func scanRecipients(rows *sql.Rows, out []parley.NotifyRecipient) ([]parley.NotifyRecipient, error) {
	defer rows.Close()
	for rows.Next() {
		var r parley.NotifyRecipient
		var last int64
		if err := rows.Scan(&r.UserID, &r.Email, &r.Name, &r.Prefs.Mode, &r.Prefs.IntervalSeconds, &last); err != nil {
			return nil, err
		}
		if last > 0 {
			r.LastSentAt = fromMicros(last)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// NotifyPending returns the ids of the users with an unread mention or DM
// on this database beyond what was emailed to them, in id order after
// after, at most limit. It reads neither preferences nor notifier state:
// it is a shard's part of the store router's NotifyRecipients, which reads
// those from the control database (NotifyRecipientsOf).
func (s *Store) NotifyPending(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx,
		`SELECT pu.user_id FROM (`+pendingUsers+`) pu WHERE pu.user_id > $1 ORDER BY pu.user_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("notify pending: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("notify pending: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("notify pending: %w", err)
	}
	return out, nil
}

// recipientsChunk is how many ids one NotifyRecipientsOf query names.
const recipientsChunk = 500

// NotifyRecipientsOf returns those of userIDs who are active people with
// email on, with their preference and state, those emailed longest ago
// first, at most limit: NotifyRecipients for users whose pending items
// other databases found (the store router's, on the control database).
func (s *Store) NotifyRecipientsOf(ctx context.Context, userIDs []string, limit int) ([]parley.NotifyRecipient, error) {
	var out []parley.NotifyRecipient
	for ids := range slices.Chunk(userIDs, recipientsChunk) {
		args := make([]any, 0, len(ids)+1)
		args = append(args, parley.NotifyDefaultInterval)
		for _, id := range ids {
			args = append(args, id)
		}
		rows, err := s.rdb.QueryContext(ctx,
			`SELECT `+recipientColumns+recipientFrom+` AND u.id IN (`+inClause(2, len(ids))+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("notify recipients of: %w", err)
		}
		if out, err = scanRecipients(rows, out); err != nil {
			return nil, fmt.Errorf("notify recipients of: %w", err)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastSentAt.Equal(out[j].LastSentAt) {
			return out[i].LastSentAt.Before(out[j].LastSentAt)
		}
		return out[i].UserID < out[j].UserID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// missedColumns are a MissedItem's columns; m is the message, c its
// channel, w the workspace and a the author.
const missedColumns = `w.id, w.name, c.id, c.name, c.kind, m.seq, m.id, a.name, a.handle, m.text, m.created_at`

// MissedItems returns the user's unread mentions and DM messages beyond
// what was emailed, oldest first, at most limit. A DM message that also
// mentions the user is one item, a mention.
func (s *Store) MissedItems(ctx context.Context, userID string, limit int) ([]parley.MissedItem, error) {
	rows, err := s.rdb.QueryContext(ctx,
		`SELECT `+missedColumns+`, 1 FROM mentions mn
		 JOIN channel_members cm ON cm.workspace_id = mn.workspace_id AND cm.channel_id = mn.channel_id AND cm.user_id = mn.user_id
		 JOIN messages m ON m.channel_id = mn.channel_id AND m.seq = mn.seq
		 JOIN channels c ON c.id = mn.channel_id
		 JOIN workspaces w ON w.id = mn.workspace_id
		 JOIN users a ON a.id = m.user_id
		 LEFT JOIN notify_sent ns ON ns.user_id = mn.user_id AND ns.channel_id = mn.channel_id
		 WHERE mn.user_id = $1 AND mn.seq > cm.last_read_seq AND mn.seq > COALESCE(ns.seq, 0) AND m.deleted_at IS NULL
		   AND w.deleted_at IS NULL
		 UNION ALL
		 SELECT `+missedColumns+`, 0 FROM channel_members cm
		 JOIN channels c ON c.id = cm.channel_id
		 JOIN messages m ON m.channel_id = cm.channel_id AND m.seq > cm.last_read_seq
		 JOIN workspaces w ON w.id = cm.workspace_id
		 JOIN users a ON a.id = m.user_id
		 LEFT JOIN notify_sent ns ON ns.user_id = cm.user_id AND ns.channel_id = cm.channel_id
		 WHERE cm.user_id = $1 AND c.kind IN ('dm', 'group_dm') AND c.msg_count > cm.read_ord AND w.deleted_at IS NULL
		   AND m.ord IS NOT NULL AND m.deleted_at IS NULL AND m.user_id <> $1 AND m.seq > COALESCE(ns.seq, 0)`,
		userID)
	if err != nil {
		return nil, fmt.Errorf("missed items: %w", err)
	}
	defer rows.Close()
	type key struct {
		ch  string
		seq int64
	}
	seen := map[key]int{}
	var out []parley.MissedItem
	for rows.Next() {
		var it parley.MissedItem
		var kind string
		var created int64
		var mention int
		if err := rows.Scan(&it.WorkspaceID, &it.WorkspaceName, &it.ChannelID, &it.ChannelName, &kind, &it.Seq,
			&it.MessageID, &it.AuthorName, &it.AuthorHandle, &it.Text, &created, &mention); err != nil {
			return nil, fmt.Errorf("missed items: %w", err)
		}
		it.ChannelKind, it.CreatedAt, it.Mention = parley.ChannelKind(kind), fromMicros(created), mention == 1
		k := key{it.ChannelID, it.Seq}
		if i, ok := seen[k]; ok {
			out[i].Mention = out[i].Mention || it.Mention
			continue
		}
		seen[k] = len(out)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("missed items: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ClaimNotify takes the user's send claim for node until until, unless
// another node holds one that has not expired at now. The conditional
// upsert is one statement: on PostgreSQL two nodes' statements on the same
// row serialize on its lock, and the second sees the first's claim; on
// SQLite there is one writer.
func (s *Store) ClaimNotify(ctx context.Context, userID, node string, now, until time.Time) (bool, time.Time, error) {
	var ok bool
	var last int64
	err := s.write(ctx, "claim_notify", func(ctx context.Context, tx *Tx) error {
		ok, last = false, 0
		err := tx.QueryRowContext(ctx,
			`INSERT INTO notify_state (user_id, last_sent_at, claimed_by, claimed_until) VALUES ($1, 0, $2, $3)
			 ON CONFLICT (user_id) DO UPDATE SET claimed_by = excluded.claimed_by, claimed_until = excluded.claimed_until
			 WHERE notify_state.claimed_until < $4 OR notify_state.claimed_by = excluded.claimed_by
			 RETURNING last_sent_at`,
			userID, node, micros(until), micros(now)).Scan(&last)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("claim notify: %w", err)
		}
		ok = true
		return nil
	})
	if err != nil || !ok {
		return false, time.Time{}, err
	}
	if last == 0 {
		return true, time.Time{}, nil
	}
	return true, fromMicros(last), nil
}

// NotifySent records that an email covering items went out at sentAt and
// releases node's claim.
func (s *Store) NotifySent(ctx context.Context, userID, node string, items []parley.MissedItem, sentAt time.Time) error {
	return s.write(ctx, "notify_sent", func(ctx context.Context, tx *Tx) error {
		if err := tx.markNotified(ctx, userID, items); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE notify_state SET last_sent_at = $1, claimed_by = '', claimed_until = 0
			 WHERE user_id = $2 AND claimed_by = $3`, micros(sentAt), userID, node); err != nil {
			return fmt.Errorf("notify sent: %w", err)
		}
		return nil
	})
}

// MarkNotified records that an email covered items (notify_sent) without
// touching the user's notifier state: a shard's part of the store
// router's NotifySent, whose state is the control database's.
func (s *Store) MarkNotified(ctx context.Context, userID string, items []parley.MissedItem) error {
	return s.write(ctx, "mark_notified", func(ctx context.Context, tx *Tx) error {
		return tx.markNotified(ctx, userID, items)
	})
}

// markNotified raises the user's notify_sent seq of each item's channel
// to the item's.
func (tx *Tx) markNotified(ctx context.Context, userID string, items []parley.MissedItem) error {
	last := map[string]int64{}
	for _, it := range items {
		last[it.ChannelID] = max(last[it.ChannelID], it.Seq)
	}
	for ch, seq := range last {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO notify_sent (user_id, channel_id, seq) VALUES ($1, $2, $3)
			 ON CONFLICT (user_id, channel_id) DO UPDATE SET seq = excluded.seq WHERE notify_sent.seq < excluded.seq`,
			userID, ch, seq); err != nil {
			return fmt.Errorf("notify sent: %w", err)
		}
	}
	return nil
}

// ReleaseNotify gives up node's claim on the user without recording an email.
func (s *Store) ReleaseNotify(ctx context.Context, userID, node string) error {
	return s.write(ctx, "release_notify", func(ctx context.Context, tx *Tx) error {
		if _, err := tx.ExecContext(ctx,
			`UPDATE notify_state SET claimed_by = '', claimed_until = 0 WHERE user_id = $1 AND claimed_by = $2`,
			userID, node); err != nil {
			return fmt.Errorf("release notify: %w", err)
		}
		return nil
	})
}
