package sqlstore

import (
	"context"
	"fmt"
	"time"

	"parley"
)

// Reactions, and decorate: the one place that fills in a message's
// reactions (as seen by the reader) and pin state, for every read.

// AddReaction adds actor's emoji to a message; adding it again changes
// nothing and writes no event. It returns the message as actor sees it.
func (s *Store) AddReaction(ctx context.Context, actor, messageID, emoji string) (*parley.Message, error) {
	return s.react(ctx, actor, messageID, emoji, true)
}

// RemoveReaction takes actor's emoji off a message; removing one that is not
// there changes nothing and writes no event.
func (s *Store) RemoveReaction(ctx context.Context, actor, messageID, emoji string) (*parley.Message, error) {
	return s.react(ctx, actor, messageID, emoji, false)
}

func (s *Store) react(ctx context.Context, actor, messageID, emoji string, add bool) (*parley.Message, error) {
	if err := parley.ValidateEmoji(emoji); err != nil {
		return nil, err
	}
	op, typ := "remove reaction", parley.EventReactionRemoved
	query := `DELETE FROM reactions WHERE workspace_id = $1 AND message_id = $2 AND emoji = $3 AND user_id = $4`
	if add {
		op, typ = "add reaction", parley.EventReactionAdded
		query = `INSERT INTO reactions (workspace_id, message_id, emoji, user_id, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`
	}
	var guard func(context.Context, *Tx, *parley.Message) error
	if add {
		guard = func(ctx context.Context, tx *Tx, m *parley.Message) error {
			return s.checkReactionCap(ctx, tx, m, emoji)
		}
	}
	return s.markMessage(ctx, actor, messageID, op, typ, guard, func(m *parley.Message, now time.Time) (string, []any) {
		args := []any{m.WorkspaceID, m.ID, emoji, actor}
		if add {
			args = append(args, micros(now))
		}
		return query, args
	}, func(m *parley.Message, seq int64) any {
		return parley.ReactionEventData{ChannelID: m.ChannelID, Seq: seq, MessageID: m.ID, Emoji: emoji, UserID: actor}
	})
}

// markMessage is the write shared by reactions and pins: a channel member
// sets or clears a mark on a live message of an active channel. The
// statement stmt builds is idempotent (an insert that ignores conflicts, or
// a delete); only when it changed a row is the event of type typ, built by
// data, appended. guard, if not nil, may refuse the change first (a cap),
// with the message row locked. It returns the message as actor sees it.
func (s *Store) markMessage(ctx context.Context, actor, messageID, op, typ string,
	guard func(context.Context, *Tx, *parley.Message) error,
	stmt func(m *parley.Message, now time.Time) (string, []any), data func(m *parley.Message, seq int64) any) (*parley.Message, error) {
	var out *parley.Message
	err := s.writeMessage(ctx, op, messageID, func(ctx context.Context, tx *Tx) error {
		out = nil
		m, a, err := visibleMessage(ctx, tx, actor, messageID, true)
		if err != nil {
			return err
		}
		if err := a.requireMember(); err != nil {
			return err
		}
		if err := a.requireActive(); err != nil {
			return err
		}
		if guard != nil {
			if err := guard(ctx, tx, m); err != nil {
				return err
			}
		}
		query, args := stmt(m, tx.now)
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		} else if n > 0 {
			if _, err := tx.appendEvent(ctx, m.WorkspaceID, m.ChannelID, typ, func(seq int64) any {
				return data(m, seq)
			}); err != nil {
				return err
			}
		}
		if err := decorateOne(ctx, tx, actor, m); err != nil {
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

// decorateChunk bounds the ids of one decoration query (placeholder limits).
const decorateChunk = 500

// decorate fills in Reactions (per emoji: count and whether actor reacted,
// in order of each emoji's first reaction) and Pinned on msgs, which must
// all belong to one workspace. It costs two queries per 500 messages.
func decorate(ctx context.Context, q querier, actor string, msgs []parley.Message) error {
	for len(msgs) > decorateChunk {
		if err := decorate(ctx, q, actor, msgs[:decorateChunk]); err != nil {
			return err
		}
		msgs = msgs[decorateChunk:]
	}
	if len(msgs) == 0 {
		return nil
	}
	byID := make(map[string]*parley.Message, len(msgs))
	n := padded(len(msgs))
	args := make([]any, 0, n+2)
	args = append(args, actor, msgs[0].WorkspaceID)
	for i := range msgs {
		m := &msgs[i]
		m.Reactions, m.Pinned = []parley.Reaction{}, false
		byID[m.ID] = m
		args = append(args, m.ID)
	}
	for len(args) < n+2 { // repeats are harmless in IN (…)
		args = append(args, msgs[len(msgs)-1].ID)
	}
	rows, err := q.QueryContext(ctx, `SELECT message_id, emoji, COUNT(*),
			MAX(CASE WHEN user_id = $1 THEN 1 ELSE 0 END), MIN(created_at)
		FROM reactions WHERE workspace_id = $2 AND message_id IN (`+inClause(3, n)+`)
		GROUP BY message_id, emoji ORDER BY MIN(created_at), emoji`, args...)
	if err != nil {
		return fmt.Errorf("load reactions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, emoji string
		var count, me, first int64
		if err := rows.Scan(&id, &emoji, &count, &me, &first); err != nil {
			return fmt.Errorf("load reactions: %w", err)
		}
		if m := byID[id]; m != nil {
			m.Reactions = append(m.Reactions, parley.Reaction{Emoji: emoji, Count: int(count), Me: me == 1})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load reactions: %w", err)
	}
	rows.Close()

	rows, err = q.QueryContext(ctx, `SELECT message_id FROM pins
		WHERE workspace_id = $1 AND message_id IN (`+inClause(2, n)+`)`, args[1:]...)
	if err != nil {
		return fmt.Errorf("load pins: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("load pins: %w", err)
		}
		if m := byID[id]; m != nil {
			m.Pinned = true
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load pins: %w", err)
	}
	return nil
}

// padded rounds a list length up to a power of two, so that queries with
// one placeholder per item come in a few shapes that prepared-statement
// caches can keep.
func padded(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// decorateOne decorates a single message in place.
func decorateOne(ctx context.Context, q querier, actor string, m *parley.Message) error {
	one := []parley.Message{*m}
	if err := decorate(ctx, q, actor, one); err != nil {
		return err
	}
	*m = one[0]
	return nil
}
