package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"parley"
)

// Messages: posting (idempotent by client_msg_id, threads), history,
// replies, single reads, edits and soft deletes. Reactions and pins are in
// reactions.go and pins.go; decorate fills both in on every read.
//
// Lock order on PostgreSQL, so that concurrent writers wait rather than
// deadlock: message rows first (a reply before its root), then reactions and
// pins, then the channel row (taken by appendEvent, always last but for the
// new message's own INSERT).

// PostMessage stores a message (or a reply when m.ThreadRootID is set) and
// appends its message.created event, whose seq becomes the message's seq.
//
// With a client_msg_id already used by actor in the channel it returns the
// first message, created false, whatever the text; if that message has since
// been deleted the answer is ECONFLICT (a retry must not resurrect it, and a
// deleted message has nothing to show). The common case, a new id, costs no
// lookup: the unique index on (channel, sender, client_msg_id) finds
// repeats. A repeat's write is then undone (errDuplicate) and the first
// message read once the write has returned, by which time it is committed
// on both databases (SQLite: earlier in the same batch or before; PostgreSQL:
// the index waits for the first writer to commit). A repeat that would fail
// validation looks the first message up inside the write instead.
func (s *Store) PostMessage(ctx context.Context, actor, channelID string, nm parley.NewMessage) (*parley.Message, bool, error) {
	if err := parley.ValidateClientMsgID(nm.ClientMsgID); err != nil {
		return nil, false, err
	}
	if err := parley.CheckText("thread_root_id", nm.ThreadRootID); err != nil {
		return nil, false, err
	}
	profile, err := parley.ValidateBotProfile(nm.BotProfile)
	if err != nil {
		return nil, false, err
	}
	profileJSON, err := botProfileJSON(profile)
	if err != nil {
		return nil, false, err
	}
	var (
		msg     *parley.Message
		created bool
	)
	cfg := s.live()  // once per write: a change applies from the next write
	here := s.here() // who @here reaches (here.go)
	err = s.writeChannel(ctx, "post message", channelID, func(ctx context.Context, tx *Tx) error {
		msg, created = nil, false // fn runs again when PostgreSQL retries
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		if err := a.requireMember(); err != nil {
			return err
		}
		if err := a.requireActive(); err != nil {
			return err
		}
		if profile != nil {
			if err := requireBot(ctx, tx, actor); err != nil {
				return err
			}
		}
		// Refusals that a repeat must not see: nothing is written yet, so
		// the first message can be returned from inside this write.
		refuse := func(cause error) error {
			if nm.ClientMsgID == "" {
				return cause
			}
			m, err := postedBefore(ctx, tx, actor, a.ch.ID, nm.ClientMsgID)
			if err != nil || m == nil {
				return cmp.Or(err, cause)
			}
			msg = m
			return nil
		}
		if err := validatePostText(nm); err != nil {
			return refuse(err)
		}
		if err := checkBroadcast(a, nm.Text, cfg); err != nil {
			return refuse(err)
		}
		now := tx.now // whole microseconds: what a later read returns
		m := &parley.Message{
			ID:           parley.NewID(parley.PrefixMessage),
			WorkspaceID:  a.ch.WorkspaceID,
			ChannelID:    a.ch.ID,
			UserID:       actor,
			Text:         nm.Text,
			ClientMsgID:  nm.ClientMsgID,
			CreatedAt:    now,
			ThreadRootID: nm.ThreadRootID,
			Reactions:    []parley.Reaction{},
			BotProfile:   profile,
		}
		var root *threadRoot
		if m.ThreadRootID != "" {
			if root, err = tx.countReply(ctx, actor, a.ch, m.ThreadRootID); err != nil {
				if parley.ErrorCode(err) != parley.EINTERNAL {
					return refuse(err)
				}
				return err
			}
		}
		// Slow mode and the channel's post cap (slowmode.go): after the
		// thread root's lock, before the channel row's. A retry of a post
		// that went through gets its message, not a 429, and what the
		// check wrote is undone (errDuplicate).
		if err := s.checkPostLimits(ctx, tx, a, actor, cfg); err != nil {
			if parley.ErrorCode(err) == parley.ERATELIMITED && nm.ClientMsgID != "" {
				if first, ferr := postedBefore(ctx, tx, actor, a.ch.ID, nm.ClientMsgID); ferr != nil {
					return ferr
				} else if first != nil {
					return errDuplicate
				}
			}
			return err
		}
		// Files before the channel row (the lock order above).
		if err := tx.attachFiles(ctx, actor, m, nm.FileIDs); err != nil {
			if parley.ErrorCode(err) != parley.EINTERNAL {
				return refuse(err)
			}
			return err
		}
		files, err := filesJSON(m.Files)
		if err != nil {
			return err
		}
		if _, err := tx.appendEvent(ctx, m.WorkspaceID, m.ChannelID, parley.EventMessageCreated, func(seq int64) any {
			m.Seq = seq
			return parley.MessageEventData{ChannelID: m.ChannelID, Seq: seq, Message: m}
		}); err != nil {
			return err
		}
		var ord sql.NullInt64 // its number among the channel's counted messages (unread.go)
		if countsInChannel(m, cfg.CollapsedThreads) {
			if ord.Int64, err = tx.numberMessage(ctx, m.WorkspaceID, m.ChannelID); err != nil {
				return err
			}
			ord.Valid = true
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO messages (workspace_id, id, channel_id, seq, user_id, text, client_msg_id, thread_root_id, created_at, ord, files, bot_profile)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			m.WorkspaceID, m.ID, m.ChannelID, m.Seq, actor, m.Text,
			nullString(m.ClientMsgID), nullString(m.ThreadRootID), micros(now), ord, files, profileJSON); err != nil {
			if isUniqueViolation(err) && nm.ClientMsgID != "" {
				return errDuplicate // undoes the seq, the number and the event
			}
			return fmt.Errorf("insert message: %w", err)
		}
		var mentioned []string
		if ord.Valid {
			if mentioned, err = tx.countPost(ctx, m, ord.Int64, here); err != nil {
				return err
			}
		}
		if root != nil && cfg.CollapsedThreads {
			if mentioned, err = tx.threadReply(ctx, a.ch, root, m, here); err != nil {
				return err
			}
		}
		if err := tx.emitMentions(m, mentioned); err != nil {
			return err
		}
		msg, created = m, true
		return nil
	})
	if errors.Is(err, errDuplicate) {
		m, err := postedBefore(ctx, s.reads(), actor, channelID, nm.ClientMsgID)
		if err == nil && m == nil {
			err = fmt.Errorf("post message: client_msg_id %q is taken but its message is not found", nm.ClientMsgID)
		}
		return m, false, err
	}
	if err != nil {
		return nil, false, err
	}
	return msg, created, nil
}

// botProfileJSON is the messages.bot_profile value of a profile (NULL for
// none).
func botProfileJSON(p *parley.BotProfile) (sql.NullString, error) {
	if p == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("bot profile: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// requireBot refuses a bot profile to anyone but a bot user: a person's
// message never shows another name.
func requireBot(ctx context.Context, q querier, actor string) error {
	var bot bool
	if err := q.QueryRowContext(ctx, `SELECT is_bot FROM users WHERE id = $1`, actor).Scan(&bot); err != nil {
		return fmt.Errorf("post message: is the poster a bot: %w", err)
	}
	if !bot {
		return parley.Errorf(parley.EFORBIDDEN, "only a bot's message may carry a bot profile")
	}
	return nil
}

// validatePostText checks a post's text: required, unless files come with
// it.
func validatePostText(nm parley.NewMessage) error {
	if len(nm.FileIDs) > 0 && strings.TrimSpace(nm.Text) == "" {
		return parley.CheckText("text", nm.Text)
	}
	return parley.ValidateMessageText(nm.Text)
}

// errDuplicate undoes a post whose client_msg_id turned out to be taken.
var errDuplicate = errors.New("client_msg_id already used")

// postedBefore returns actor's message with that client_msg_id in the
// channel, decorated for actor, or nil when there is none.
func postedBefore(ctx context.Context, q querier, actor, channelID, clientMsgID string) (*parley.Message, error) {
	m, deleted, err := scanMessage(q.QueryRowContext(ctx,
		`SELECT `+messageColumns+` FROM messages msg
		 WHERE msg.channel_id = $1 AND msg.user_id = $2 AND msg.client_msg_id = $3`,
		channelID, actor, clientMsgID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find message by client_msg_id: %w", err)
	}
	if deleted {
		return nil, parley.Errorf(parley.ECONFLICT, "the message with this client_msg_id was deleted")
	}
	if err := decorateOne(ctx, q, actor, m); err != nil {
		return nil, err
	}
	return m, nil
}

// threadRoot is what a reply needs to know of its root.
type threadRoot struct {
	ID         string
	UserID     string // its author
	CreatedAt  int64  // micros
	ReplyCount int    // with this reply
}

// countReply checks that rootID is a live top-level message of ch and counts
// one more reply on it, in one statement that also locks the root.
func (tx *Tx) countReply(ctx context.Context, actor string, ch *parley.Channel, rootID string) (*threadRoot, error) {
	root := &threadRoot{ID: rootID}
	err := tx.QueryRowContext(ctx,
		`UPDATE messages SET reply_count = reply_count + 1, last_reply_at = $1
		 WHERE id = $2 AND channel_id = $3 AND thread_root_id IS NULL AND deleted_at IS NULL
		 RETURNING user_id, created_at, reply_count`,
		micros(tx.now), rootID, ch.ID).Scan(&root.UserID, &root.CreatedAt, &root.ReplyCount)
	if err == nil {
		return root, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("count reply: %w", err)
	}
	return nil, explainRoot(ctx, tx, actor, ch, rootID)
}

// explainRoot says why rootID cannot take a reply in ch from actor. A
// root in a channel actor cannot see is not found, like any object they
// cannot see.
func explainRoot(ctx context.Context, tx *Tx, actor string, ch *parley.Channel, rootID string) error {
	// Say why the root was refused.
	var chID string
	var parent sql.NullString
	var deleted sql.NullInt64
	err := tx.QueryRowContext(ctx,
		`SELECT channel_id, thread_root_id, deleted_at FROM messages WHERE id = $1`, rootID).
		Scan(&chID, &parent, &deleted)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return parley.Errorf(parley.ENOTFOUND, "thread root not found")
	case err != nil:
		return fmt.Errorf("check thread root: %w", err)
	case chID != ch.ID:
		if _, err := loadChannel(ctx, tx, actor, chID); err != nil {
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				return parley.Errorf(parley.ENOTFOUND, "thread root not found")
			}
			return err
		}
		return parley.Errorf(parley.EINVALID, "thread root is in another channel")
	case parent.Valid:
		return parley.Errorf(parley.EINVALID, "thread root is itself a reply")
	default:
		return parley.Errorf(parley.EINVALID, "thread root was deleted")
	}
}

// ListMessages returns one page of a channel's top-level history, ascending
// by seq: the latest messages, or those just before BeforeSeq or just after
// AfterSeq. NextCursor, set when the page is full, is the seq to pass on for
// the next page in the same direction (BeforeSeq when paging back, the
// default, AfterSeq when paging forward).
func (s *Store) ListMessages(ctx context.Context, actor, channelID string, hq parley.HistoryQuery) (*parley.MessagePage, error) {
	switch {
	case hq.BeforeSeq < 0 || hq.AfterSeq < 0:
		return nil, parley.Errorf(parley.EINVALID, "before_seq and after_seq must not be negative")
	case hq.BeforeSeq > 0 && hq.AfterSeq > 0:
		return nil, parley.Errorf(parley.EINVALID, "give before_seq or after_seq, not both")
	}
	if _, err := loadChannel(ctx, s.reads(), actor, channelID); err != nil {
		return nil, err
	}
	limit := parley.ClampLimit(hq.Limit)
	top := `SELECT ` + messageColumns + ` FROM messages msg
		WHERE msg.channel_id = $1 AND msg.thread_root_id IS NULL AND msg.deleted_at IS NULL`
	if !s.live().CollapsedThreads { // replies show inline
		top = `SELECT ` + messageColumns + ` FROM messages msg
		WHERE msg.channel_id = $1 AND msg.deleted_at IS NULL`
	}
	var (
		msgs []parley.Message
		err  error
	)
	forward := hq.AfterSeq > 0
	switch {
	case forward:
		msgs, err = queryMessages(ctx, s.reads(), top+` AND msg.seq > $2 ORDER BY msg.seq LIMIT $3`,
			channelID, hq.AfterSeq, limit)
	case hq.BeforeSeq > 0:
		msgs, err = queryMessages(ctx, s.reads(), top+` AND msg.seq < $2 ORDER BY msg.seq DESC LIMIT $3`,
			channelID, hq.BeforeSeq, limit)
	default:
		msgs, err = queryMessages(ctx, s.reads(), top+` ORDER BY msg.seq DESC LIMIT $2`, channelID, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	if !forward {
		for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
			msgs[i], msgs[j] = msgs[j], msgs[i]
		}
	}
	if err := decorate(ctx, s.reads(), actor, msgs); err != nil {
		return nil, err
	}
	page := &parley.MessagePage{Messages: msgs}
	if len(msgs) == limit {
		if forward {
			page.NextCursor = strconv.FormatInt(msgs[len(msgs)-1].Seq, 10)
		} else {
			page.NextCursor = strconv.FormatInt(msgs[0].Seq, 10)
		}
	}
	return page, nil
}

// ListReplies returns a thread's replies after afterSeq, ascending by seq.
// NextCursor, set when the page is full, is the afterSeq of the next page.
func (s *Store) ListReplies(ctx context.Context, actor, rootID string, afterSeq int64, limit int) (*parley.MessagePage, error) {
	if afterSeq < 0 {
		return nil, parley.Errorf(parley.EINVALID, "after_seq must not be negative")
	}
	if _, _, err := visibleMessage(ctx, s.reads(), actor, rootID, false); err != nil {
		return nil, err
	}
	limit = parley.ClampLimit(limit)
	msgs, err := queryMessages(ctx, s.reads(), `SELECT `+messageColumns+` FROM messages msg
		WHERE msg.thread_root_id = $1 AND msg.deleted_at IS NULL AND msg.seq > $2
		ORDER BY msg.seq LIMIT $3`, rootID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("list replies: %w", err)
	}
	if err := decorate(ctx, s.reads(), actor, msgs); err != nil {
		return nil, err
	}
	page := &parley.MessagePage{Messages: msgs}
	if len(msgs) == limit {
		page.NextCursor = strconv.FormatInt(msgs[len(msgs)-1].Seq, 10)
	}
	return page, nil
}

// GetMessage returns one live message the actor may see.
func (s *Store) GetMessage(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	m, _, err := visibleMessage(ctx, s.reads(), actor, messageID, false)
	if err != nil {
		return nil, err
	}
	if err := decorateOne(ctx, s.reads(), actor, m); err != nil {
		return nil, err
	}
	return m, nil
}

// EditMessage replaces a message's text (its author only, admins included)
// and appends message.updated with the whole message. Editing to the same
// text is recorded like any other edit.
func (s *Store) EditMessage(ctx context.Context, actor, messageID, text string) (*parley.Message, error) {
	var out *parley.Message
	cfg := s.live()
	err := s.writeMessage(ctx, "edit message", messageID, func(ctx context.Context, tx *Tx) error {
		out = nil
		m, a, err := visibleMessage(ctx, tx, actor, messageID, true)
		if err != nil {
			return err
		}
		if m.UserID != actor {
			return parley.Errorf(parley.EFORBIDDEN, "only the author may edit a message")
		}
		if err := a.requireActive(); err != nil {
			return err
		}
		if err := parley.ValidateMessageText(text); err != nil {
			return err
		}
		if err := checkBroadcast(a, text, cfg); err != nil {
			return err
		}
		edited := tx.now
		if _, err := tx.ExecContext(ctx,
			`UPDATE messages SET text = $1, edited_at = $2 WHERE workspace_id = $3 AND id = $4`,
			text, micros(edited), m.WorkspaceID, m.ID); err != nil {
			return fmt.Errorf("update message: %w", err)
		}
		m.Text, m.EditedAt = text, &edited
		counted, err := wasCounted(ctx, tx, m)
		if err != nil {
			return err
		}
		if counted { // the mentions follow the new text
			if err := tx.forgetMentions(ctx, m); err != nil {
				return err
			}
			if _, err := tx.recordMentions(ctx, m, s.here()); err != nil {
				return err
			}
		}
		if err := decorateOne(ctx, tx, actor, m); err != nil {
			return err
		}
		// The payload is the same for every reader: nobody's "me".
		shared := *m
		shared.Reactions = make([]parley.Reaction, len(m.Reactions))
		for i, r := range m.Reactions {
			r.Me = false
			shared.Reactions[i] = r
		}
		if _, err := tx.appendEvent(ctx, m.WorkspaceID, m.ChannelID, parley.EventMessageUpdated, func(seq int64) any {
			return parley.MessageEventData{ChannelID: m.ChannelID, Seq: seq, Message: &shared}
		}); err != nil {
			return err
		}
		out = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteMessage soft-deletes a message (its author or a workspace admin):
// the row stays with its seq, its text is cleared, its pin and reactions go,
// and message.deleted is appended. The user_id of the event is who deleted
// it. Replies of a deleted root stay where they are.
func (s *Store) DeleteMessage(ctx context.Context, actor, messageID string) error {
	cfg := s.live()
	return s.writeMessage(ctx, "delete message", messageID, func(ctx context.Context, tx *Tx) error {
		m, a, err := visibleMessage(ctx, tx, actor, messageID, true)
		if err != nil {
			return err
		}
		if m.UserID != actor && !a.role.IsAdmin() {
			return parley.Errorf(parley.EFORBIDDEN, "only the author or a workspace admin may delete a message")
		}
		if err := a.requireActive(); err != nil {
			return err
		}
		if m.ThreadRootID != "" {
			if _, err := tx.ExecContext(ctx,
				`UPDATE messages SET reply_count = reply_count - 1
				 WHERE workspace_id = $1 AND id = $2 AND reply_count > 0`,
				m.WorkspaceID, m.ThreadRootID); err != nil {
				return fmt.Errorf("uncount reply: %w", err)
			}
			if cfg.CollapsedThreads {
				if err := tx.uncountThreadReply(ctx, m); err != nil {
					return err
				}
			}
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE messages SET deleted_at = $1, text = '' WHERE workspace_id = $2 AND id = $3`,
			micros(tx.now), m.WorkspaceID, m.ID); err != nil {
			return fmt.Errorf("delete message: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM pins WHERE workspace_id = $1 AND message_id = $2`, m.WorkspaceID, m.ID); err != nil {
			return fmt.Errorf("unpin deleted message: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM reactions WHERE workspace_id = $1 AND message_id = $2`, m.WorkspaceID, m.ID); err != nil {
			return fmt.Errorf("drop reactions of deleted message: %w", err)
		}
		// Its files go (the sweeper removes their bytes: package files).
		if err := tx.dropMessageFiles(ctx, m); err != nil {
			return err
		}
		// Unread counts leave it out by themselves (unread.go); its mentions go.
		if err := tx.forgetMentions(ctx, m); err != nil {
			return err
		}
		_, err = tx.appendEvent(ctx, m.WorkspaceID, m.ChannelID, parley.EventMessageDeleted, func(seq int64) any {
			return parley.MessageDeletedData{ChannelID: m.ChannelID, Seq: seq, MessageID: m.ID,
				ThreadRootID: m.ThreadRootID, UserID: actor}
		})
		return err
	})
}

// wasCounted reports whether m counts in its channel (unread.go): every
// top-level message does; a reply only if it was posted with collapsed
// threads off, whatever the setting is now.
func wasCounted(ctx context.Context, tx *Tx, m *parley.Message) (bool, error) {
	if m.ThreadRootID == "" {
		return true, nil
	}
	var ord sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT ord FROM messages WHERE workspace_id = $1 AND id = $2`,
		m.WorkspaceID, m.ID).Scan(&ord); err != nil {
		return false, fmt.Errorf("was message counted: %w", err)
	}
	return ord.Valid, nil
}

// lockedMessageColumns are messageColumns without the table alias, for
// RETURNING.
var lockedMessageColumns = strings.ReplaceAll(messageColumns, "msg.", "")

// visibleMessage loads a live message and its channel as actor sees them.
// Unknown, deleted and invisible messages are all ENOTFOUND. With lock set
// (inside a write) it takes the message row's lock first, with a no-op
// UPDATE that both dialects understand, so that concurrent changes to one
// message queue up instead of acting on a stale read.
func visibleMessage(ctx context.Context, q querier, actor, messageID string, lock bool) (*parley.Message, *channelAccess, error) {
	query := `SELECT ` + messageColumns + ` FROM messages msg WHERE msg.id = $1`
	if lock {
		query = `UPDATE messages SET reply_count = reply_count WHERE id = $1 RETURNING ` + lockedMessageColumns
	}
	m, deleted, err := scanMessage(q.QueryRowContext(ctx, query, messageID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, parley.Errorf(parley.ENOTFOUND, "message not found")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load message: %w", err)
	}
	a, err := loadChannel(ctx, q, actor, m.ChannelID)
	if parley.ErrorCode(err) == parley.ENOTFOUND || (err == nil && deleted) {
		return nil, nil, parley.Errorf(parley.ENOTFOUND, "message not found")
	}
	if err != nil {
		return nil, nil, err
	}
	return m, a, nil
}

// queryMessages runs a query that selects messageColumns.
func queryMessages(ctx context.Context, q querier, query string, args ...any) ([]parley.Message, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	msgs := []parley.Message{}
	for rows.Next() {
		m, _, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, *m)
	}
	return msgs, rows.Err()
}
