package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"parley"
)

// sequencer turns the bus's copies of a channel's durable events (any
// order, duplicates possible, some lost) into the channel's log order: it
// calls its deliver function once per seq, in seq order, per channel, and
// fills gaps from the store. Ephemeral events (seq 0) pass straight
// through. Package gateway/order implements it.
type sequencer interface {
	// Track starts following a channel whose log stood at lastSeq.
	Track(channelID string, lastSeq int64)
	// Untrack stops following it.
	Untrack(channelID string)
	// Push hands over an event from the bus.
	Push(ev parley.Event)
	// CatchUp fetches whatever the log has past the current position now.
	CatchUp(channelID string)
}

type fetchFunc func(ctx context.Context, channelID string, afterSeq int64, limit int) ([]parley.Event, error)

// fillLimit is how many events one store read asks for.
const fillLimit = 500

// fetchTimeout bounds one store read of a gap fill.
const fetchTimeout = 10 * time.Second

// plainSequencer is a minimal sequencer: it fills a gap from the store as
// soon as it sees one, without holding back. It serves until the order
// package is wired in, and in tests of this package.
type plainSequencer struct {
	fetch   fetchFunc
	deliver func(parley.Event)
	log     *slog.Logger

	mu    sync.Mutex
	chans map[string]*plainChannel // guarded by mu
}

type plainChannel struct {
	mu   sync.Mutex // serialises delivery of the channel
	last int64      // guarded by mu
	gone bool       // untracked; guarded by mu
}

func newPlainSequencer(fetch fetchFunc, deliver func(parley.Event), log *slog.Logger) *plainSequencer {
	return &plainSequencer{fetch: fetch, deliver: deliver, log: log, chans: map[string]*plainChannel{}}
}

func (q *plainSequencer) channel(id string) *plainChannel {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.chans[id]
}

func (q *plainSequencer) Track(channelID string, lastSeq int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.chans[channelID]; !ok {
		q.chans[channelID] = &plainChannel{last: lastSeq}
	}
}

func (q *plainSequencer) Untrack(channelID string) {
	q.mu.Lock()
	c := q.chans[channelID]
	delete(q.chans, channelID)
	q.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		c.gone = true
		c.mu.Unlock()
	}
}

func (q *plainSequencer) Push(ev parley.Event) {
	if ev.Seq <= 0 {
		q.deliver(ev)
		return
	}
	c := q.channel(ev.ChannelID)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone || ev.Seq <= c.last {
		return
	}
	if ev.Seq > c.last+1 {
		q.fill(ev.ChannelID, c, ev.Seq-1)
	}
	if ev.Seq == c.last+1 {
		c.last = ev.Seq
		q.deliver(ev)
	}
}

func (q *plainSequencer) CatchUp(channelID string) {
	c := q.channel(channelID)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.gone {
		q.fill(channelID, c, -1)
	}
}

// fill delivers the log's events after c.last, up to upto (-1: all).
// c.mu is held.
func (q *plainSequencer) fill(channelID string, c *plainChannel, upto int64) {
	for upto < 0 || c.last < upto {
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		evs, err := q.fetch(ctx, channelID, c.last, fillLimit)
		cancel()
		if err != nil {
			q.log.Warn("gateway gap fill failed", "channel_id", channelID, "after", c.last, "err", err)
			return
		}
		before := c.last
		for _, ev := range evs {
			if ev.Seq != c.last+1 || (upto >= 0 && ev.Seq > upto) {
				break
			}
			c.last = ev.Seq
			q.deliver(ev)
		}
		if len(evs) < fillLimit || c.last == before {
			return
		}
	}
}
