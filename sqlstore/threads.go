package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"parley"
)

// Collapsed reply threads (migration 00003, ARCHITECTURE §2), after
// Mattermost's CRT and the lesson it paid for: read state must cost
// O(what changed).
//
//   - A reply (collapsed threads on) upserts its threads row (reply count,
//     last reply, participants), makes the poster a follower who has read
//     it, makes the root's author and the @mentioned members followers, and
//     then counts one unread reply (and a mention where due) for every other
//     follower in ONE statement, whose RETURNING feeds the thread.updated
//     events: O(followers), the least a per-user count can cost.
//   - Marking a channel read clears only the memberships of that user in
//     that channel that have something unread; a partial index holds
//     exactly those, so the read is as small as the write (Mattermost first
//     rewrote every membership of the channel: one write became thousands).
//   - With collapsed threads off (live configuration, read once per
//     write) nothing here is written at all: replies count in the channel
//     (unread.go) and show inline in its history.
//
// Followers who can no longer see the channel (they left a private one, or
// are guests outside it) are neither counted nor told: the visibility
// clause below is applied to every follower query.

// followerVisible is true for a thread_memberships row tm whose user may
// still read the thread's channel c: a member, or for a public channel any
// member of the workspace who is not a guest.
const followerVisible = `(EXISTS (SELECT 1 FROM channel_members cm
		WHERE cm.workspace_id = tm.workspace_id AND cm.channel_id = tm.channel_id AND cm.user_id = tm.user_id)
	OR (c.kind = 'public' AND EXISTS (SELECT 1 FROM workspace_members wm
		WHERE wm.workspace_id = tm.workspace_id AND wm.user_id = tm.user_id AND wm.role <> 'guest')))`

// errThreadsOff answers thread operations while collapsed threads are off.
func errThreadsOff() error {
	return parley.Errorf(parley.ECONFLICT, "collapsed reply threads are turned off on this server")
}

// threadReply does a new reply's thread bookkeeping (collapsed threads
// on) and returns the ids of the members it mentions.
func (tx *Tx) threadReply(ctx context.Context, ch *parley.Channel, root *threadRoot, m *parley.Message, here hereFilter) ([]string, error) {
	now := micros(tx.now)
	// The thread: one more reply, the poster among the participants. The
	// count is the root's (countReply, under the root's lock), which also
	// counts replies posted while collapsed threads were off.
	var (
		replies      int
		participants string
	)
	if err := tx.QueryRowContext(ctx,
		`INSERT INTO threads (workspace_id, root_id, channel_id, reply_count, last_reply_at, participants)
		 VALUES ($1, $2, $3, $7, $4, $5)
		 ON CONFLICT (workspace_id, root_id) DO UPDATE SET
		   reply_count = excluded.reply_count,
		   last_reply_at = excluded.last_reply_at,
		   participants = CASE
		     WHEN threads.participants = '' THEN excluded.participants
		     WHEN ',' || threads.participants || ',' LIKE $6 ESCAPE '\' THEN threads.participants
		     ELSE threads.participants || ',' || excluded.participants END
		 RETURNING reply_count, participants`,
		m.WorkspaceID, root.ID, ch.ID, now, m.UserID, "%,"+escapeLike(m.UserID)+",%", root.ReplyCount).
		Scan(&replies, &participants); err != nil {
		return nil, fmt.Errorf("count thread reply: %w", err)
	}
	// The poster follows and has read it all.
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO thread_memberships (workspace_id, user_id, root_id, channel_id, following,
		   last_viewed_at, unread_replies, unread_mentions, last_update_at)
		 VALUES ($1, $2, $3, $4, 1, $5, 0, 0, $5)
		 ON CONFLICT (workspace_id, root_id, user_id) DO UPDATE SET following = 1,
		   last_viewed_at = excluded.last_viewed_at, unread_replies = 0, unread_mentions = 0,
		   last_update_at = excluded.last_update_at`,
		m.WorkspaceID, m.UserID, root.ID, ch.ID, now); err != nil {
		return nil, fmt.Errorf("poster follows thread: %w", err)
	}
	// The root's author follows from the first reply on, unless they chose
	// otherwise since (an existing row is left alone).
	if root.UserID != m.UserID {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO thread_memberships (workspace_id, user_id, root_id, channel_id, following,
			   last_viewed_at, unread_replies, unread_mentions, last_update_at)
			 VALUES ($1, $2, $3, $4, 1, $5, 0, 0, $5)
			 ON CONFLICT (workspace_id, root_id, user_id) DO NOTHING`,
			m.WorkspaceID, root.UserID, root.ID, ch.ID, root.CreatedAt); err != nil {
			return nil, fmt.Errorf("root author follows thread: %w", err)
		}
	}
	// Members it @mentions follow it (again, if they had unfollowed).
	ms := scopeOf(m.Text)
	broadcast, handles := ms.all, ms.handles
	var mentioned []string
	if len(handles) > 0 {
		n := padded(len(handles))
		args := make([]any, 0, n+5)
		args = append(args, m.WorkspaceID, ch.ID, m.UserID, root.ID, root.CreatedAt)
		for i := range n {
			args = append(args, handles[min(i, len(handles)-1)])
		}
		var err error
		mentioned, err = queryIDs(ctx, tx,
			`INSERT INTO thread_memberships (workspace_id, user_id, root_id, channel_id, following,
			   last_viewed_at, unread_replies, unread_mentions, last_update_at)
			 SELECT cm.workspace_id, cm.user_id, $4, cm.channel_id, 1, $5, 0, 0, $5
			 FROM users u JOIN channel_members cm ON cm.user_id = u.id
			 WHERE cm.workspace_id = $1 AND cm.channel_id = $2 AND cm.user_id <> $3
			   AND u.handle IN (`+inClause(6, n)+`)
			 ON CONFLICT (workspace_id, root_id, user_id) DO UPDATE SET following = 1
			 RETURNING user_id`, args...)
		if err != nil {
			return nil, fmt.Errorf("mentioned members follow thread: %w", err)
		}
	}
	// @here: the followers active now, besides those named.
	if ms.here {
		active, err := tx.activeFollowers(ctx, m, root.ID, here)
		if err != nil {
			return nil, err
		}
		mentioned = dedupe(slices.Concat(mentioned, active), "")
	}
	// Every other follower who can still see it: one more unread reply,
	// and a mention for those it mentions (all of them for @channel and
	// @everyone).
	mentionExpr := "0"
	args := []any{m.WorkspaceID, root.ID, m.UserID, now}
	switch {
	case broadcast:
		mentionExpr = "1"
	case len(mentioned) > 0:
		mentionExpr = `CASE WHEN tm.user_id IN (` + inClause(len(args)+1, len(mentioned)) + `) THEN 1 ELSE 0 END`
		for _, id := range mentioned {
			args = append(args, id)
		}
	}
	rows, err := tx.QueryContext(ctx,
		`UPDATE thread_memberships AS tm SET unread_replies = tm.unread_replies + 1,
		   unread_mentions = tm.unread_mentions + `+mentionExpr+`, last_update_at = $4
		 FROM channels c
		 WHERE c.workspace_id = tm.workspace_id AND c.id = tm.channel_id
		   AND tm.workspace_id = $1 AND tm.root_id = $2 AND tm.following = 1 AND tm.user_id <> $3
		   AND `+followerVisible+`
		 RETURNING user_id, last_viewed_at, unread_replies, unread_mentions`, args...)
	if err != nil {
		return nil, fmt.Errorf("count unread reply for followers: %w", err)
	}
	defer rows.Close()
	th := parley.Thread{
		RootID: root.ID, WorkspaceID: m.WorkspaceID, ChannelID: ch.ID,
		ReplyCount: replies, LastReplyAt: tx.now, Participants: splitIDs(participants), Following: true,
	}
	type follower struct {
		id                string
		viewed            int64
		replies, mentions int
	}
	followers := []follower{{id: m.UserID, viewed: now}} // the poster's other devices hear of it too
	for rows.Next() {
		var f follower
		if err := rows.Scan(&f.id, &f.viewed, &f.replies, &f.mentions); err != nil {
			return nil, fmt.Errorf("count unread reply for followers: %w", err)
		}
		followers = append(followers, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count unread reply for followers: %w", err)
	}
	if broadcast { // @channel in a thread reaches its followers
		mentioned = mentioned[:0]
		for _, f := range followers[1:] {
			mentioned = append(mentioned, f.id)
		}
	}
	for _, f := range followers {
		t := th
		t.LastViewedAt, t.UnreadReplies, t.UnreadMentions = fromMicros(f.viewed), f.replies, f.mentions
		if err := tx.emit(m.WorkspaceID, parley.EventThreadUpdated,
			parley.ThreadEventData{Thread: &t, Message: m}, parley.TopicUser(f.id)); err != nil {
			return nil, err
		}
	}
	return mentioned, nil
}

// emitMentions tells each mentioned user, on their own topic.
func (tx *Tx) emitMentions(m *parley.Message, userIDs []string) error {
	for _, id := range userIDs {
		if err := tx.emit(m.WorkspaceID, parley.EventMention,
			parley.MentionEventData{ChannelID: m.ChannelID, ThreadRootID: m.ThreadRootID, Message: m},
			parley.TopicUser(id)); err != nil {
			return err
		}
	}
	return nil
}

// uncountThreadReply takes a deleted reply off its thread's count: the
// root's, which the caller has just lowered. The followers' unread counts
// are left as they are (they clear on read).
func (tx *Tx) uncountThreadReply(ctx context.Context, m *parley.Message) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE threads SET reply_count = (SELECT r.reply_count FROM messages r
		   WHERE r.workspace_id = threads.workspace_id AND r.id = threads.root_id)
		 WHERE workspace_id = $1 AND root_id = $2`,
		m.WorkspaceID, m.ThreadRootID); err != nil {
		return fmt.Errorf("uncount thread reply: %w", err)
	}
	return nil
}

// readChannelThreads clears userID's unread replies and mentions in the
// threads of a channel they marked read, touching only the memberships
// that have any (the Mattermost lesson), and tells the user's devices of
// each, with the whole thread (its reply count, last reply and
// participants: a client shows the event's thread as it is). It returns
// how many memberships it wrote.
func (tx *Tx) readChannelThreads(ctx context.Context, workspaceID, channelID, userID string) (int, error) {
	rows, err := tx.QueryContext(ctx,
		`UPDATE thread_memberships SET unread_replies = 0, unread_mentions = 0, last_viewed_at = $1
		 WHERE user_id = $2 AND channel_id = $3 AND (unread_replies > 0 OR unread_mentions > 0)
		   AND workspace_id = $4
		 RETURNING root_id`,
		micros(tx.now), userID, channelID, workspaceID)
	if err != nil {
		return 0, fmt.Errorf("read channel threads: %w", err)
	}
	var roots []string
	for rows.Next() {
		var root string
		if err := rows.Scan(&root); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read channel threads: %w", err)
		}
		roots = append(roots, root)
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("read channel threads: %w", err)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read channel threads: %w", err)
	}
	// The rows are closed: the transaction's connection is free for the
	// reads of each thread as the user now sees it.
	for _, root := range roots {
		t, err := loadThread(ctx, tx, userID, root)
		if err != nil {
			return 0, fmt.Errorf("read channel threads: %w", err)
		}
		if err := tx.emit(workspaceID, parley.EventThreadRead,
			parley.ThreadEventData{Thread: t}, parley.TopicUser(userID)); err != nil {
			return 0, err
		}
	}
	return len(roots), nil
}

// threadColumns read a thread for one user (see scanThread); use with
// threadFrom, where $1 is the user.
const threadColumns = `r.id, r.channel_id, r.workspace_id, r.reply_count, r.last_reply_at, r.created_at,
	t.reply_count, t.last_reply_at, t.participants,
	tm.following, tm.last_viewed_at, tm.unread_replies, tm.unread_mentions`

const threadFrom = ` FROM messages r
	LEFT JOIN threads t ON t.workspace_id = r.workspace_id AND t.root_id = r.id
	LEFT JOIN thread_memberships tm ON tm.workspace_id = r.workspace_id AND tm.root_id = r.id AND tm.user_id = $1`

// loadThread reads the thread of root as userID sees it: from its threads
// row and their membership when there are any, else from the root (a
// thread nobody has replied to or followed yet).
func loadThread(ctx context.Context, q querier, userID, rootID string) (*parley.Thread, error) {
	var (
		t                               parley.Thread
		msgReplies                      int
		msgLast                         sql.NullInt64
		created                         int64
		replies                         sql.NullInt64
		last                            sql.NullInt64
		participants                    sql.NullString
		following, viewed, unr, unrMent sql.NullInt64
	)
	err := q.QueryRowContext(ctx, `SELECT `+threadColumns+threadFrom+` WHERE r.id = $2`, userID, rootID).
		Scan(&t.RootID, &t.ChannelID, &t.WorkspaceID, &msgReplies, &msgLast, &created,
			&replies, &last, &participants, &following, &viewed, &unr, &unrMent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "thread not found")
	}
	if err != nil {
		return nil, fmt.Errorf("load thread: %w", err)
	}
	t.Participants = []string{}
	if replies.Valid {
		t.ReplyCount, t.LastReplyAt, t.Participants = int(replies.Int64), fromMicros(last.Int64), splitIDs(participants.String)
	} else {
		t.ReplyCount = msgReplies
		t.LastReplyAt = fromMicros(created)
		if msgLast.Valid {
			t.LastReplyAt = fromMicros(msgLast.Int64)
		}
	}
	t.Following = following.Int64 == 1
	if viewed.Valid {
		t.LastViewedAt = fromMicros(viewed.Int64)
	}
	t.UnreadReplies, t.UnreadMentions = int(unr.Int64), int(unrMent.Int64)
	return &t, nil
}

// threadRootFor loads a visible root message for a thread operation.
func threadRootFor(ctx context.Context, q querier, actor, rootID string) (*parley.Message, *channelAccess, error) {
	m, a, err := visibleMessage(ctx, q, actor, rootID, false)
	if err != nil {
		return nil, nil, err
	}
	if m.ThreadRootID != "" {
		return nil, nil, parley.Errorf(parley.EINVALID, "message is a reply, not a thread root")
	}
	return m, a, nil
}

// FollowThread makes actor follow the thread of rootID (any top-level
// message they can see) and tells their devices.
func (s *Store) FollowThread(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	return s.changeThread(ctx, "follow thread", actor, rootID, parley.EventThreadFollowed,
		func(ctx context.Context, tx *Tx, root *parley.Message) (bool, error) {
			last := root.CreatedAt
			if root.LastReplyAt != nil {
				last = *root.LastReplyAt
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO threads (workspace_id, root_id, channel_id, reply_count, last_reply_at, participants)
				 VALUES ($1, $2, $3, $4, $5, '')
				 ON CONFLICT (workspace_id, root_id) DO NOTHING`,
				root.WorkspaceID, root.ID, root.ChannelID, root.ReplyCount, micros(last)); err != nil {
				return false, fmt.Errorf("create thread: %w", err)
			}
			res, err := tx.ExecContext(ctx,
				`INSERT INTO thread_memberships (workspace_id, user_id, root_id, channel_id, following,
				   last_viewed_at, unread_replies, unread_mentions, last_update_at)
				 SELECT t.workspace_id, $2, t.root_id, t.channel_id, 1, $3, 0, 0, t.last_reply_at
				 FROM threads t WHERE t.workspace_id = $1 AND t.root_id = $4
				 ON CONFLICT (workspace_id, root_id, user_id) DO UPDATE SET following = 1
				 WHERE thread_memberships.following = 0`,
				root.WorkspaceID, actor, micros(tx.now), root.ID)
			if err != nil {
				return false, fmt.Errorf("follow thread: %w", err)
			}
			n, err := res.RowsAffected()
			return n > 0, err
		})
}

// UnfollowThread stops actor following the thread; its unread counts go.
func (s *Store) UnfollowThread(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	return s.changeThread(ctx, "unfollow thread", actor, rootID, parley.EventThreadUnfollowed,
		func(ctx context.Context, tx *Tx, root *parley.Message) (bool, error) {
			res, err := tx.ExecContext(ctx,
				`UPDATE thread_memberships SET following = 0, unread_replies = 0, unread_mentions = 0
				 WHERE workspace_id = $1 AND root_id = $2 AND user_id = $3 AND following = 1`,
				root.WorkspaceID, root.ID, actor)
			if err != nil {
				return false, fmt.Errorf("unfollow thread: %w", err)
			}
			n, err := res.RowsAffected()
			return n > 0, err
		})
}

// MarkThreadRead clears actor's unread replies and mentions in the thread
// and tells their other devices. A thread actor has no membership of has
// nothing to clear and writes nothing.
func (s *Store) MarkThreadRead(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	return s.changeThread(ctx, "mark thread read", actor, rootID, parley.EventThreadRead,
		func(ctx context.Context, tx *Tx, root *parley.Message) (bool, error) {
			res, err := tx.ExecContext(ctx,
				`UPDATE thread_memberships SET unread_replies = 0, unread_mentions = 0, last_viewed_at = $1
				 WHERE workspace_id = $2 AND root_id = $3 AND user_id = $4`,
				micros(tx.now), root.WorkspaceID, root.ID, actor)
			if err != nil {
				return false, fmt.Errorf("mark thread read: %w", err)
			}
			n, err := res.RowsAffected()
			return n > 0, err
		})
}

// changeThread runs one of actor's thread operations on a visible root:
// change writes and reports whether anything changed; if so the thread as
// actor now sees it goes to their devices as an event of type typ.
func (s *Store) changeThread(ctx context.Context, op, actor, rootID, typ string,
	change func(ctx context.Context, tx *Tx, root *parley.Message) (bool, error)) (*parley.Thread, error) {
	if !s.live().CollapsedThreads {
		return nil, errThreadsOff()
	}
	var out *parley.Thread
	err := s.writeMessage(ctx, op, rootID, func(ctx context.Context, tx *Tx) error {
		out = nil
		root, _, err := threadRootFor(ctx, tx, actor, rootID)
		if err != nil {
			return err
		}
		changed, err := change(ctx, tx, root)
		if err != nil {
			return err
		}
		t, err := loadThread(ctx, tx, actor, rootID)
		if err != nil {
			return err
		}
		if err := decorateOne(ctx, tx, actor, root); err != nil {
			return err
		}
		t.Root = root
		if changed {
			ev := *t
			ev.Root = nil
			if err := tx.emit(root.WorkspaceID, typ, parley.ThreadEventData{Thread: &ev}, parley.TopicUser(actor)); err != nil {
				return err
			}
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListThreads pages actor's followed threads in a workspace, the latest
// reply first, with their counts and roots. The counts are read from the
// memberships, never from messages.
func (s *Store) ListThreads(ctx context.Context, actor, workspaceID string, q parley.ThreadQuery) (*parley.ThreadPage, error) {
	rq := s.reads()
	role, err := workspaceRole(ctx, rq, workspaceID, actor)
	if err != nil {
		return nil, err
	}
	limit := parley.ClampLimit(q.Limit)
	key, err := decodeCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	guest := 0
	if role == parley.RoleGuest {
		guest = 1
	}
	query := `SELECT tm.root_id, tm.channel_id, t.reply_count, t.last_reply_at, t.participants,
		  tm.last_viewed_at, tm.unread_replies, tm.unread_mentions, tm.last_update_at
		FROM thread_memberships tm
		JOIN threads t ON t.workspace_id = tm.workspace_id AND t.root_id = tm.root_id
		JOIN channels c ON c.workspace_id = tm.workspace_id AND c.id = tm.channel_id
		JOIN messages r ON r.workspace_id = tm.workspace_id AND r.id = tm.root_id AND r.deleted_at IS NULL
		WHERE tm.workspace_id = $1 AND tm.user_id = $2 AND tm.following = 1
		  AND (EXISTS (SELECT 1 FROM channel_members cm
		      WHERE cm.workspace_id = tm.workspace_id AND cm.channel_id = tm.channel_id AND cm.user_id = tm.user_id)
		    OR (c.kind = 'public' AND $3 = 0))`
	args := []any{workspaceID, actor, guest}
	if q.Unread {
		query += ` AND (tm.unread_replies > 0 OR tm.unread_mentions > 0)`
	}
	if key != "" {
		at, id, ok := strings.Cut(key, ":")
		us, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			return nil, parley.Errorf(parley.EINVALID, "invalid cursor")
		}
		query += ` AND (tm.last_update_at < $4 OR (tm.last_update_at = $4 AND tm.root_id < $5))`
		args = append(args, us, id)
	}
	query += ` ORDER BY tm.last_update_at DESC, tm.root_id DESC LIMIT ` + strconv.Itoa(limit+1)
	rows, err := rq.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	defer rows.Close()
	page := &parley.ThreadPage{Threads: []parley.Thread{}}
	var updates []int64
	for rows.Next() {
		t := parley.Thread{WorkspaceID: workspaceID, Following: true}
		var last, viewed, update int64
		var participants string
		if err := rows.Scan(&t.RootID, &t.ChannelID, &t.ReplyCount, &last, &participants,
			&viewed, &t.UnreadReplies, &t.UnreadMentions, &update); err != nil {
			return nil, fmt.Errorf("list threads: %w", err)
		}
		t.LastReplyAt, t.LastViewedAt, t.Participants = fromMicros(last), fromMicros(viewed), splitIDs(participants)
		page.Threads = append(page.Threads, t)
		updates = append(updates, update)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	if len(page.Threads) > limit {
		page.Threads = page.Threads[:limit]
		page.NextCursor = encodeCursor(strconv.FormatInt(updates[limit-1], 10) + ":" + page.Threads[limit-1].RootID)
	}
	if len(page.Threads) == 0 {
		return page, nil
	}
	ids := make([]any, len(page.Threads))
	for i, t := range page.Threads {
		ids[i] = t.RootID
	}
	roots, err := queryMessages(ctx, rq, `SELECT `+messageColumns+` FROM messages msg
		WHERE msg.id IN (`+inClause(1, len(ids))+`)`, ids...)
	if err != nil {
		return nil, fmt.Errorf("list threads: roots: %w", err)
	}
	if err := decorate(ctx, rq, actor, roots); err != nil {
		return nil, err
	}
	byID := make(map[string]*parley.Message, len(roots))
	for i := range roots {
		byID[roots[i].ID] = &roots[i]
	}
	for i := range page.Threads {
		page.Threads[i].Root = byID[page.Threads[i].RootID]
	}
	return page, nil
}

// threadsSummary counts, for boot, actor's followed threads with unread
// replies and their unread mentions: a read of the unread memberships only
// (the partial index), never counting messages; each one's root is looked
// up by key, since a thread whose root was deleted is not listed
// (ListThreads) and must not count either.
func threadsSummary(ctx context.Context, q querier, actor, workspaceID string) (*parley.ThreadsSummary, error) {
	var sum parley.ThreadsSummary
	if err := q.QueryRowContext(ctx,
		`SELECT COUNT(*), COALESCE(SUM(tm.unread_mentions), 0) FROM thread_memberships tm
		 JOIN channels c ON c.workspace_id = tm.workspace_id AND c.id = tm.channel_id
		 WHERE tm.user_id = $1 AND tm.workspace_id = $2 AND tm.following = 1
		   AND (tm.unread_replies > 0 OR tm.unread_mentions > 0) AND `+followerVisible+`
		   AND EXISTS (SELECT 1 FROM messages r
		     WHERE r.workspace_id = tm.workspace_id AND r.id = tm.root_id AND r.deleted_at IS NULL)`,
		actor, workspaceID).Scan(&sum.UnreadThreads, &sum.UnreadMentions); err != nil {
		return nil, fmt.Errorf("threads summary: %w", err)
	}
	return &sum, nil
}

// splitIDs splits a comma-separated id list ("" is none).
func splitIDs(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}
