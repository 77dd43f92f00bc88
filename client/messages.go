package client

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"strconv"

	"parley"
)

// Messages, reactions, pins, threads and the event log.

// NewClientMsgID returns a fresh random client_msg_id.
func NewClientMsgID() string { return rand.Text() }

// PostMessage posts a message. An empty m.ClientMsgID is replaced by a fresh
// one, so that the call is idempotent and may be retried: the server answers
// a repeated client_msg_id with the first message.
func (c *Client) PostMessage(ctx context.Context, channelID string, m parley.NewMessage) (*parley.Message, error) {
	if m.ClientMsgID == "" {
		m.ClientMsgID = NewClientMsgID()
	}
	return c.message(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/messages",
		body: m, idempotent: true})
}

// ListMessages returns a page of a channel's history, ascending by seq: the
// latest q.Limit messages, or those just before q.BeforeSeq or just after
// q.AfterSeq.
func (c *Client) ListMessages(ctx context.Context, channelID string, q parley.HistoryQuery) (*parley.MessagePage, error) {
	v := url.Values{}
	if q.BeforeSeq > 0 {
		v.Set("before_seq", strconv.FormatInt(q.BeforeSeq, 10))
	}
	if q.AfterSeq > 0 {
		v.Set("after_seq", strconv.FormatInt(q.AfterSeq, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return c.messages(ctx, call{method: http.MethodGet, path: "/channels/" + esc(channelID) + "/messages", query: v})
}

// ListReplies returns a page of a thread's replies after afterSeq.
func (c *Client) ListReplies(ctx context.Context, rootID string, afterSeq int64, limit int) (*parley.MessagePage, error) {
	return c.messages(ctx, call{method: http.MethodGet, path: "/messages/" + esc(rootID) + "/replies",
		query: seqQuery(afterSeq, limit)})
}

// ListPins returns a channel's pinned messages.
func (c *Client) ListPins(ctx context.Context, channelID string) (*parley.MessagePage, error) {
	return c.messages(ctx, call{method: http.MethodGet, path: "/channels/" + esc(channelID) + "/pins"})
}

// GetMessage returns one message.
func (c *Client) GetMessage(ctx context.Context, messageID string) (*parley.Message, error) {
	return c.message(ctx, call{method: http.MethodGet, path: "/messages/" + esc(messageID), idempotent: true})
}

// EditMessage replaces a message's text.
func (c *Client) EditMessage(ctx context.Context, messageID, text string) (*parley.Message, error) {
	return c.message(ctx, call{method: http.MethodPatch, path: "/messages/" + esc(messageID),
		body: map[string]string{"text": text}, idempotent: true})
}

// DeleteMessage deletes a message.
func (c *Client) DeleteMessage(ctx context.Context, messageID string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/messages/" + esc(messageID), idempotent: true}, nil)
}

// AddReaction adds the caller's reaction (an emoji shortcode such as
// "thumbsup") and returns the message.
func (c *Client) AddReaction(ctx context.Context, messageID, emoji string) (*parley.Message, error) {
	return c.message(ctx, call{method: http.MethodPut, idempotent: true,
		path: "/messages/" + esc(messageID) + "/reactions/" + esc(emoji)})
}

// RemoveReaction removes the caller's reaction and returns the message.
func (c *Client) RemoveReaction(ctx context.Context, messageID, emoji string) (*parley.Message, error) {
	return c.message(ctx, call{method: http.MethodDelete, idempotent: true,
		path: "/messages/" + esc(messageID) + "/reactions/" + esc(emoji)})
}

// Pin pins a message.
func (c *Client) Pin(ctx context.Context, messageID string) (*parley.Message, error) {
	return c.message(ctx, call{method: http.MethodPut, path: "/messages/" + esc(messageID) + "/pin", idempotent: true})
}

// Unpin unpins a message.
func (c *Client) Unpin(ctx context.Context, messageID string) (*parley.Message, error) {
	return c.message(ctx, call{method: http.MethodDelete, path: "/messages/" + esc(messageID) + "/pin", idempotent: true})
}

// ListEvents returns a page of a channel's durable event log: the events
// with seq > afterSeq, ascending. NextCursor is set when the page is full.
// The events carry ChannelID, Seq, Type, Data and CreatedAt.
func (c *Client) ListEvents(ctx context.Context, channelID string, afterSeq int64, limit int) (*parley.EventPage, error) {
	var page parley.EventPage
	err := c.do(ctx, call{method: http.MethodGet, path: "/channels/" + esc(channelID) + "/events",
		query: seqQuery(afterSeq, limit), idempotent: true}, &page)
	if err != nil {
		return nil, err
	}
	if page.Events == nil {
		page.Events = []parley.Event{}
	}
	return &page, nil
}

// Sync catches up many channels at once: for each channel id and the last
// seq the caller has, either the missed events (Events, possibly empty),
// TooFar with the channel's LastSeq (page ListEvents instead), or an Error
// code such as "not_found". At most parley.MaxSyncChannels channels a call.
func (c *Client) Sync(ctx context.Context, channels map[string]int64) (map[string]parley.SyncResult, error) {
	var out struct {
		Channels map[string]struct {
			Events  []parley.Event `json:"events"`
			TooFar  bool           `json:"too_far"`
			LastSeq int64          `json:"last_seq"`
			Error   string         `json:"error"`
		} `json:"channels"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: "/sync", idempotent: true,
		body: map[string]map[string]int64{"channels": channels}}, &out)
	if err != nil {
		return nil, err
	}
	res := make(map[string]parley.SyncResult, len(out.Channels))
	for id, e := range out.Channels {
		r := parley.SyncResult{Events: e.Events, TooFar: e.TooFar, LastSeq: e.LastSeq, Error: e.Error}
		if r.Events == nil && !r.TooFar && r.Error == "" {
			r.Events = []parley.Event{}
		}
		res[id] = r
	}
	return res, nil
}

func (c *Client) message(ctx context.Context, cl call) (*parley.Message, error) {
	var m parley.Message
	if err := c.do(ctx, cl, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// messages sends a read of a message page (always safe to repeat).
func (c *Client) messages(ctx context.Context, cl call) (*parley.MessagePage, error) {
	cl.idempotent = true
	var page parley.MessagePage
	if err := c.do(ctx, cl, &page); err != nil {
		return nil, err
	}
	if page.Messages == nil {
		page.Messages = []parley.Message{}
	}
	return &page, nil
}

// seqQuery builds the after_seq/limit query of the log and replies calls.
func seqQuery(afterSeq int64, limit int) url.Values {
	v := url.Values{}
	if afterSeq > 0 {
		v.Set("after_seq", strconv.FormatInt(afterSeq, 10))
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	return v
}
