package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"parley"
)

// Reading the durable per-channel event log (eventlog.go appends to it):
// paging one channel for /events and catching up many at once for /sync.

// PublishesInSeqOrder reports whether the publisher receives each channel's
// events in seq order. True on SQLite, whose single writer publishes every
// batch in commit order; on PostgreSQL concurrent transactions may publish
// out of order (the gateway repairs that from the log).
func (s *Store) PublishesInSeqOrder() bool { return s.gc != nil }

// ListEvents returns the channel's events with seq > afterSeq, ascending.
// NextCursor, set when the page is full, is the afterSeq of the next page.
func (s *Store) ListEvents(ctx context.Context, actor, channelID string, afterSeq int64, limit int) (*parley.EventPage, error) {
	if afterSeq < 0 {
		return nil, parley.Errorf(parley.EINVALID, "after_seq must not be negative")
	}
	a, err := loadChannel(ctx, s.reads(), actor, channelID)
	if err != nil {
		return nil, err
	}
	limit = parley.ClampLimit(limit)
	rows, err := s.reads().QueryContext(ctx, `SELECT channel_id, seq, type, data, created_at FROM events
		WHERE workspace_id = $1 AND channel_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`,
		a.ch.WorkspaceID, a.ch.ID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	byChannel, err := scanEvents(rows, map[string]string{a.ch.ID: a.ch.WorkspaceID})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	page := &parley.EventPage{Events: byChannel[a.ch.ID]}
	if page.Events == nil {
		page.Events = []parley.Event{}
	}
	if len(page.Events) == limit {
		page.NextCursor = strconv.FormatInt(page.Events[len(page.Events)-1].Seq, 10)
	}
	return page, nil
}

// syncChunk is how many channels one /sync event query covers.
const syncChunk = 64

// Sync answers /sync: for each channel the events after the given seq, or
// too_far with the channel's last seq when more than parley.MaxSyncEvents
// were missed, or ENOTFOUND for a channel the actor cannot see. It looks up
// each channel, then reads the missed events of up to 64 channels per query,
// each bounded by the last seq seen at lookup so that no answer grows past
// MaxSyncEvents.
func (s *Store) Sync(ctx context.Context, actor string, channels map[string]int64) (map[string]parley.SyncResult, error) {
	if err := parley.ValidateSync(channels); err != nil {
		return nil, err
	}
	out := make(map[string]parley.SyncResult, len(channels))
	type want struct {
		ch       *parley.Channel
		from, to int64 // seq in (from, to]
	}
	var wants []want
	for id, seq := range channels {
		a, err := loadChannel(ctx, s.reads(), actor, id)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			out[id] = parley.SyncResult{Error: parley.ENOTFOUND}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sync: %w", err)
		}
		switch last := a.ch.LastSeq; {
		case last-seq > parley.MaxSyncEvents:
			out[id] = parley.SyncResult{TooFar: true, LastSeq: last}
		case last <= seq:
			out[id] = parley.SyncResult{Events: []parley.Event{}}
		default:
			wants = append(wants, want{a.ch, seq, last})
		}
	}
	for len(wants) > 0 {
		chunk := wants[:min(len(wants), syncChunk)]
		wants = wants[len(chunk):]
		n := padded(len(chunk)) // repeating the last term changes nothing
		var where strings.Builder
		args := make([]any, 0, 4*n)
		workspaces := make(map[string]string, n)
		for i := range n {
			w := chunk[min(i, len(chunk)-1)]
			if i > 0 {
				where.WriteString(" OR ")
			}
			fmt.Fprintf(&where, "(workspace_id = $%d AND channel_id = $%d AND seq > $%d AND seq <= $%d)",
				4*i+1, 4*i+2, 4*i+3, 4*i+4)
			args = append(args, w.ch.WorkspaceID, w.ch.ID, w.from, w.to)
			workspaces[w.ch.ID] = w.ch.WorkspaceID
		}
		rows, err := s.reads().QueryContext(ctx, `SELECT channel_id, seq, type, data, created_at FROM events
			WHERE `+where.String()+` ORDER BY channel_id, seq`, args...)
		if err != nil {
			return nil, fmt.Errorf("sync events: %w", err)
		}
		byChannel, err := scanEvents(rows, workspaces)
		if err != nil {
			return nil, fmt.Errorf("sync events: %w", err)
		}
		for _, w := range chunk {
			ev := byChannel[w.ch.ID]
			if ev == nil {
				ev = []parley.Event{}
			}
			out[w.ch.ID] = parley.SyncResult{Events: ev}
		}
	}
	return out, nil
}

// scanEvents reads rows of (channel_id, seq, type, data, created_at) into
// events grouped by channel; workspaces maps each channel to its workspace.
// It closes rows.
func scanEvents(rows *sql.Rows, workspaces map[string]string) (map[string][]parley.Event, error) {
	defer rows.Close()
	out := make(map[string][]parley.Event, len(workspaces))
	for rows.Next() {
		var e parley.Event
		var data string
		var created int64
		if err := rows.Scan(&e.ChannelID, &e.Seq, &e.Type, &data, &created); err != nil {
			return nil, err
		}
		e.WorkspaceID = workspaces[e.ChannelID]
		e.Data = json.RawMessage(data)
		e.CreatedAt = fromMicros(created)
		out[e.ChannelID] = append(out[e.ChannelID], e)
	}
	return out, rows.Err()
}
