package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"parley"
)

// appendEvent takes the channel's next seq, writes the event into the
// channel's log, and records it for publishing after the commit. data builds
// the payload once the seq is known; it must carry channel_id and seq. The
// event goes on the channel topic and on any extra topics given.
//
// The UPDATE … RETURNING takes the channel row's lock on PostgreSQL, so
// concurrent writers to one channel get consecutive seqs with no gaps; SQLite
// has only one writer.
func (tx *Tx) appendEvent(ctx context.Context, workspaceID, channelID, typ string,
	data func(seq int64) any, extraTopics ...string) (int64, error) {
	var seq int64
	err := tx.QueryRowContext(ctx,
		`UPDATE channels SET last_seq = last_seq + 1, updated_at = $1
		 WHERE workspace_id = $2 AND id = $3 RETURNING last_seq`,
		micros(tx.now), workspaceID, channelID).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("next seq of %s: %w", channelID, err)
	}
	raw, err := json.Marshal(data(seq))
	if err != nil {
		return 0, fmt.Errorf("encode %s event: %w", typ, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO events (workspace_id, channel_id, seq, type, data, created_at)
		 VALUES ($1, $2, $3, $4, $5, $6)`,
		workspaceID, channelID, seq, typ, string(raw), micros(tx.now)); err != nil {
		return 0, fmt.Errorf("append %s event: %w", typ, err)
	}
	tx.events = append(tx.events, parley.Event{
		WorkspaceID: workspaceID,
		ChannelID:   channelID,
		Seq:         seq,
		Type:        typ,
		Data:        raw,
		CreatedAt:   tx.now,
		Topics:      withDirectory(workspaceID, typ, append([]string{parley.TopicChannel(channelID)}, extraTopics...)),
	})
	return seq, nil
}

// emit records a bus-only event (no seq, not in any log) for publishing after
// the commit.
func (tx *Tx) emit(workspaceID, typ string, data any, topics ...string) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", typ, err)
	}
	tx.events = append(tx.events, parley.Event{
		WorkspaceID: workspaceID,
		Type:        typ,
		Data:        raw,
		CreatedAt:   tx.now,
		Topics:      withDirectory(workspaceID, typ, topics),
	})
	return nil
}

// withDirectory adds the workspace's directory topic to the topics of a
// directory event (see parley.IsDirectoryEvent).
func withDirectory(workspaceID, typ string, topics []string) []string {
	if workspaceID == "" || !parley.IsDirectoryEvent(typ) {
		return topics
	}
	return append(topics, parley.TopicDirectory(workspaceID))
}
