package sqlstore

import (
	"context"
	"fmt"
	"time"

	"parley"
)

// Pins: any channel member may pin or unpin a live message (a reply too).

// Pin pins a message; pinning it again changes nothing and writes no event.
// It returns the message as actor sees it.
func (s *Store) Pin(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	return s.pin(ctx, actor, messageID, true)
}

// Unpin unpins a message; unpinning one that is not pinned changes nothing.
func (s *Store) Unpin(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	return s.pin(ctx, actor, messageID, false)
}

func (s *Store) pin(ctx context.Context, actor, messageID string, pin bool) (*parley.Message, error) {
	op, typ := "unpin message", parley.EventPinRemoved
	query := `DELETE FROM pins WHERE workspace_id = $1 AND message_id = $2`
	if pin {
		op, typ = "pin message", parley.EventPinAdded
		query = `INSERT INTO pins (workspace_id, message_id, channel_id, pinned_by, pinned_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`
	}
	var guard func(context.Context, *Tx, *parley.Message) error
	if pin {
		guard = s.checkPinCap
	}
	return s.markMessage(ctx, actor, messageID, op, typ, guard, func(m *parley.Message, now time.Time) (string, []any) {
		args := []any{m.WorkspaceID, m.ID}
		if pin {
			args = append(args, m.ChannelID, actor, micros(now))
		}
		return query, args
	}, func(m *parley.Message, seq int64) any {
		return parley.PinEventData{ChannelID: m.ChannelID, Seq: seq, MessageID: m.ID, UserID: actor}
	})
}

// ListPins returns a channel's pinned live messages in the order they were
// pinned.
func (s *Store) ListPins(ctx context.Context, actor, channelID string) (*parley.MessagePage, error) {
	if _, err := loadChannel(ctx, s.reads(), actor, channelID); err != nil {
		return nil, err
	}
	msgs, err := queryMessages(ctx, s.reads(), `SELECT `+messageColumns+` FROM pins p
		JOIN messages msg ON msg.workspace_id = p.workspace_id AND msg.id = p.message_id
		WHERE p.channel_id = $1 AND msg.deleted_at IS NULL
		ORDER BY p.pinned_at, msg.seq`, channelID)
	if err != nil {
		return nil, fmt.Errorf("list pins: %w", err)
	}
	if err := decorate(ctx, s.reads(), actor, msgs); err != nil {
		return nil, err
	}
	return &parley.MessagePage{Messages: msgs}, nil
}
