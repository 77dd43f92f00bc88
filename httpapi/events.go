package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"parley"
)

// logEntry is a durable event as clients see it: {seq, t, d, created_at}
// plus its channel_id. The bus topics are server-internal and never shown.
type logEntry struct {
	ChannelID string          `json:"channel_id"`
	Seq       int64           `json:"seq"`
	Type      string          `json:"t"`
	Data      json.RawMessage `json:"d"`
	CreatedAt time.Time       `json:"created_at"`
}

func logEntries(events []parley.Event) []logEntry {
	out := make([]logEntry, len(events))
	for i, e := range events {
		out[i] = logEntry{ChannelID: e.ChannelID, Seq: e.Seq, Type: e.Type, Data: e.Data, CreatedAt: e.CreatedAt.UTC()}
	}
	return out
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, c *caller) error {
	after, err := queryAfter(r)
	if err != nil {
		return err
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	page, err := s.store.ListEvents(r.Context(), c.UserID, r.PathValue("id"), after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Events     []logEntry `json:"events"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}{logEntries(page.Events), page.NextCursor})
	return nil
}

// syncEntry is one channel's /sync answer, in exactly one of the three
// shapes of the contract.
type syncEntry struct {
	Events  *[]logEntry `json:"events,omitempty"`
	TooFar  bool        `json:"too_far,omitempty"`
	LastSeq *int64      `json:"last_seq,omitempty"`
	Error   string      `json:"error,omitempty"`
}

func renderSync(r parley.SyncResult) syncEntry {
	switch {
	case r.Error != "":
		return syncEntry{Error: r.Error}
	case r.TooFar:
		last := r.LastSeq
		return syncEntry{TooFar: true, LastSeq: &last}
	}
	ev := logEntries(r.Events)
	return syncEntry{Events: &ev}
}

func (s *Server) sync(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		Channels map[string]int64 `json:"channels"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if len(in.Channels) > parley.MaxSyncChannels {
		return parley.Errorf(parley.EINVALID, "at most %d channels per sync", parley.MaxSyncChannels)
	}
	for id, seq := range in.Channels {
		if seq < 0 {
			return parley.Errorf(parley.EINVALID, "last seq of %s must not be negative", id)
		}
	}
	res, err := s.store.Sync(r.Context(), c.UserID, in.Channels)
	if err != nil {
		return err
	}
	out := make(map[string]syncEntry, len(res))
	for id, sr := range res {
		out[id] = renderSync(sr)
	}
	writeJSON(w, http.StatusOK, struct {
		Channels map[string]syncEntry `json:"channels"`
	}{out})
	return nil
}
