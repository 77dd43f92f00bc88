package client

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"parley"
)

// Delivery: events wait in the Conn's queue and are handed to the handler by
// one delivery goroutine at a time, which keeps each channel's position and
// so guarantees, per channel, durable events in seq order with no gaps and
// no duplicates: a duplicate is dropped, a gap is filled from the channel's
// event log first, and a new session starts with a /sync catch-up.

type itemKind uint8

const (
	itemEvent   itemKind = iota
	itemCatchUp          // catch every tracked channel up (after a new session)
	itemTrack            // start tracking ch after seq, then catch it up
	itemUntrack          // stop tracking ch
)

type item struct {
	kind itemKind
	ev   Event
	ch   string
	seq  int64
}

// chanState is one tracked channel's position.
type chanState struct {
	last int64 // the last seq handed to the application
}

// Fill and catch-up give up on a channel after this many failed fetches in a
// row (the log not serving what the gateway already delivered, say).
const fetchAttempts = 8

// enqueueLocked queues an item and starts the delivery goroutine if none
// runs.
func (c *Conn) enqueueLocked(it item) {
	c.queue = append(c.queue, it)
	c.pending++
	if !c.draining {
		c.draining = true
		c.running++
		go c.drain()
	}
}

// drain hands queued items over until the queue is empty.
func (c *Conn) drain() {
	var batch []item
	for {
		c.mu.Lock()
		c.pending -= len(batch)
		if c.pending <= c.opts.MaxQueue/2 {
			c.overflowed = false
			if c.lowWater != nil {
				close(c.lowWater)
				c.lowWater = nil
			}
		}
		if batch != nil {
			clear(batch)
			c.spare = batch[:0]
		}
		if len(c.queue) == 0 || c.closed {
			c.draining = false
			c.mu.Unlock()
			c.exited()
			return
		}
		batch, c.queue, c.spare = c.queue, c.spare, nil
		c.mu.Unlock()
		for i := range batch {
			if c.ctx.Err() != nil {
				break
			}
			c.process(&batch[i])
		}
	}
}

// waitQueueLow blocks a reconnect while the handler is far behind.
func (c *Conn) waitQueueLow(ctx context.Context) error {
	c.mu.Lock()
	if c.pending <= c.opts.MaxQueue/2 || c.closed {
		c.mu.Unlock()
		return nil
	}
	if c.lowWater == nil {
		c.lowWater = make(chan struct{})
	}
	ch := c.lowWater
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Conn) process(it *item) {
	switch it.kind {
	case itemEvent:
		c.accept(it.ev)
	case itemCatchUp:
		c.catchUp(nil)
	case itemTrack:
		if c.state(it.ch) == nil {
			c.setState(it.ch, &chanState{last: it.seq})
			c.catchUp([]string{it.ch})
		}
	case itemUntrack:
		c.setState(it.ch, nil)
	}
}

// TrackChannel declares that the application has channel id's events up
// to lastSeq: the Conn catches the channel up from there and keeps it in
// order from then on. It has no effect on a channel already tracked.
func (c *Conn) TrackChannel(id string, lastSeq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.enqueueLocked(item{kind: itemTrack, ch: id, seq: max(lastSeq, 0)})
	}
}

// UntrackChannel stops ordering a channel (its events then pass through as
// they come, or start it afresh when tracking is automatic).
func (c *Conn) UntrackChannel(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.enqueueLocked(item{kind: itemUntrack, ch: id})
	}
}

// Positions returns the last seq handed to the application for each tracked
// channel.
func (c *Conn) Positions() map[string]int64 {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	out := make(map[string]int64, len(c.chans))
	for id, st := range c.chans {
		out[id] = st.last
	}
	return out
}

func (c *Conn) state(id string) *chanState {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	return c.chans[id]
}

func (c *Conn) setState(id string, st *chanState) {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	if st == nil {
		delete(c.chans, id)
	} else {
		c.chans[id] = st
	}
}

// accept hands an event from the gateway to the application, in order.
func (c *Conn) accept(ev Event) {
	if ev.Type == parley.EventChannelSummary {
		c.summarized(ev)
		c.deliver(ev)
		return
	}
	if !ev.Durable() {
		c.deliver(ev)
		return
	}
	st := c.state(ev.ChannelID)
	if st == nil {
		if !c.startsTracking(ev) {
			c.deliver(ev)
			return
		}
		st = &chanState{last: ev.Seq - 1}
		c.setState(ev.ChannelID, st)
	}
	if ev.Seq <= st.last {
		c.stats.duplicates.Add(1)
		return
	}
	if ev.Seq > st.last+1 {
		if !c.fill(ev.ChannelID, st, ev.Seq-1) {
			return // the channel was dropped while filling
		}
		if ev.Seq <= st.last {
			c.stats.duplicates.Add(1)
			return
		}
	}
	c.deliverDurable(ev.ChannelID, st, ev)
}

// deliverDurable hands over the next event of a tracked channel. It
// reports whether the channel is still tracked: the user's own member.left
// ends the tracking (the gateway stops sending the channel).
func (c *Conn) deliverDurable(id string, st *chanState, ev Event) bool {
	c.cmu.Lock()
	st.last = ev.Seq
	c.cmu.Unlock()
	ev.Ordered = true
	c.deliver(ev)
	if ev.Type == parley.EventMemberLeft && c.isSelf(ev) {
		c.setState(id, nil)
		return false
	}
	return true
}

func (c *Conn) deliver(ev Event) {
	if c.ctx.Err() != nil {
		return
	}
	c.stats.delivered.Add(1)
	c.handler(ev)
}

// isSelf reports whether a membership event is about the session's user.
func (c *Conn) isSelf(ev Event) bool {
	var d struct {
		UserID string `json:"user_id"`
	}
	if json.Unmarshal(ev.Data, &d) != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return d.UserID != "" && d.UserID == c.userID
}

// startsTracking decides whether a durable event of an untracked channel
// starts tracking it. The gateway sends a session the whole ordered stream
// of the channels its user is in, but also single directory copies of other
// public channels' lifecycle events (channel.created, channel.updated,
// channel.archived, member.joined, member.left): those are not a stream, so
// they must not start a gap-checked position. Events that only ever come on
// a channel's own stream (messages, reactions, pins), the user's own
// member.joined, and the channel.created of a channel the user is in do.
func (c *Conn) startsTracking(ev Event) bool {
	switch ev.Type {
	case parley.EventMemberJoined:
		return c.isSelf(ev) // the gateway starts the stream with it
	case parley.EventChannelCreated:
		return c.createdWithMe(ev)
	case parley.EventMessageCreated, parley.EventMessageUpdated, parley.EventMessageDeleted,
		parley.EventReactionAdded, parley.EventReactionRemoved, parley.EventPinAdded, parley.EventPinRemoved:
		return !c.opts.DeclaredOnly
	}
	return false
}

// createdWithMe reports whether a channel.created names a channel the user
// is in from the start: one they created, or a private channel or DM (whose
// channel.created reaches only its members).
func (c *Conn) createdWithMe(ev Event) bool {
	var d struct {
		UserID  string `json:"user_id"`
		Channel *struct {
			Kind parley.ChannelKind `json:"kind"`
		} `json:"channel"`
	}
	if json.Unmarshal(ev.Data, &d) != nil {
		return false
	}
	if d.Channel != nil && d.Channel.Kind != parley.KindPublic {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return d.UserID != "" && d.UserID == c.userID
}

// fill fetches and hands over the events of channel id after st.last up to
// and including target. It reports whether the channel is still tracked.
func (c *Conn) fill(id string, st *chanState, target int64) bool {
	c.stats.gapsFilled.Add(1)
	return c.pageLog(id, st, target, SourceFill)
}

// pageLog hands over a channel's logged events after st.last, up to target
// (0: to the end of the log), page by page. A channel the user can no longer
// see is dropped; other failures are retried with backoff a few times and
// then counted as an unfillable gap.
func (c *Conn) pageLog(id string, st *chanState, target int64, src Source) bool {
	for fails := 0; target == 0 || st.last < target; {
		limit := parley.MaxLimit
		if target > 0 {
			limit = int(min(int64(limit), target-st.last))
		}
		page, err := c.client.ListEvents(c.ctx, id, st.last, limit)
		if err == nil && len(page.Events) == 0 && target > 0 {
			err = errors.New("the event log does not have the missing events yet")
		}
		if err != nil {
			if c.ctx.Err() != nil {
				return false
			}
			if gone(err) {
				c.stats.gapsUnfillable.Add(1)
				c.setState(id, nil)
				return false
			}
			if fails++; fails >= fetchAttempts {
				c.stats.gapsUnfillable.Add(1)
				c.logger().Warn("gateway: could not fill a seq gap", "channel", id, "after", st.last, "err", err)
				return true
			}
			if !c.pause(fails) {
				return false
			}
			continue
		}
		fails = 0
		for _, e := range page.Events {
			if e.Seq <= st.last {
				continue
			}
			if target > 0 && e.Seq > target {
				break
			}
			ev := Event{Type: internType([]byte(e.Type)), ChannelID: id, Seq: e.Seq, Data: e.Data, Source: src}
			if !c.deliverDurable(id, st, ev) {
				return false
			}
		}
		if target == 0 && page.NextCursor == "" {
			return true
		}
	}
	return true
}

// catchUp brings tracked channels (ids, or all when nil) up to date with
// /sync, paging /events for those too far behind.
func (c *Conn) catchUp(ids []string) {
	c.cmu.Lock()
	want := make(map[string]int64, len(c.chans))
	if ids == nil {
		for id, st := range c.chans {
			want[id] = st.last
		}
	} else {
		for _, id := range ids {
			if st := c.chans[id]; st != nil {
				want[id] = st.last
			}
		}
	}
	c.cmu.Unlock()
	if len(want) == 0 {
		return
	}
	c.stats.catchUps.Add(1)
	keys := slices.Sorted(maps.Keys(want))
	for chunk := range slices.Chunk(keys, parley.MaxSyncChannels) {
		req := make(map[string]int64, len(chunk))
		for _, id := range chunk {
			req[id] = want[id]
		}
		res, ok := c.sync(req)
		if !ok {
			return
		}
		for _, id := range chunk {
			r, ok := res[id]
			st := c.state(id)
			if !ok || st == nil {
				continue
			}
			switch {
			case r.Error != "":
				c.setState(id, nil) // no longer visible
			case r.TooFar:
				c.pageLog(id, st, 0, SourceCatchUp)
			default:
				for _, e := range r.Events {
					if e.Seq <= st.last {
						continue
					}
					if e.Seq > st.last+1 && !c.fill(id, st, e.Seq-1) {
						break
					}
					ev := Event{Type: internType([]byte(e.Type)), ChannelID: id, Seq: e.Seq, Data: e.Data, Source: SourceCatchUp}
					if e.Seq <= st.last || !c.deliverDurable(id, st, ev) {
						break
					}
				}
			}
		}
	}
}

// sync calls /sync, retrying failures in transit and throttling with
// backoff until the Conn closes; other errors give up the round.
func (c *Conn) sync(req map[string]int64) (map[string]parley.SyncResult, bool) {
	for fails := 0; ; {
		res, err := c.client.Sync(c.ctx, req)
		if err == nil {
			return res, true
		}
		if c.ctx.Err() != nil {
			return nil, false
		}
		var ae *APIError
		if errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
			c.logger().Warn("gateway: catch-up failed", "err", err)
			return nil, false
		}
		fails++
		if !c.pause(fails) {
			return nil, false
		}
	}
}

// pause waits before retry n of a fetch: 100 ms doubling up to 5 s, with
// jitter. It reports false when the Conn closed meanwhile.
func (c *Conn) pause(n int) bool {
	d := min(100*time.Millisecond<<min(n-1, 6), 5*time.Second)
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// gone reports whether a fetch failed because the channel is not (or no
// longer) visible to the user.
func gone(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusForbidden)
}

// summarized moves a tracked channel's position to a channel.summary's
// last_seq: the events it covers were summarized, not lost, and the
// channel's next event follows it (docs/protocol.md, View-aware delivery).
func (c *Conn) summarized(ev Event) {
	var d struct {
		ChannelID string `json:"channel_id"`
		LastSeq   int64  `json:"last_seq"`
	}
	if json.Unmarshal(ev.Data, &d) != nil || d.ChannelID == "" {
		return
	}
	c.stats.summaries.Add(1)
	c.cmu.Lock()
	defer c.cmu.Unlock()
	st := c.chans[d.ChannelID]
	switch {
	case st == nil && !c.opts.DeclaredOnly:
		// Summaries come only on a channel's own stream, like messages:
		// the channel is tracked from here.
		c.chans[d.ChannelID] = &chanState{last: d.LastSeq}
	case st != nil && d.LastSeq > st.last:
		st.last = d.LastSeq
	}
}
