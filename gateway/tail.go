package gateway

import (
	"sync"
	"time"
)

// streamTail keeps the newest durable events of each channel the node
// follows, as its sequencer delivered them (in seq order, each once, gaps
// filled), so that a session catch-up that starts within them is answered
// from memory instead of the store (fillPool.request). The sessions that
// need one are those whose position is a little behind the node's stream:
// a session handed over from another node (the events that reached this
// node while the handover was on its way), one identified from a position
// read just before the node's stream moved on, a channel focused again
// after a few summarized events.
//
// A channel's tail holds (lo, hi], contiguous: an event that does not
// follow hi (the stream started again elsewhere after the node let the
// channel go and took it again) starts it afresh. It is bounded by
// Config.StreamTail events per channel and by tailAge: the entries older than that are
// dropped as events come and by the gateway's sweep, and a channel's tail
// goes when the node lets go of the channel. The *event values are the
// ones the partitions were handed, shared and immutable.
type streamTail struct {
	max int           // events per channel; 0: off
	age time.Duration // the oldest entry kept

	mu    sync.Mutex
	chans map[string]*chanTail // guarded by mu
}

// chanTail is one channel's tail: evs[i] has seq lo+1+i.
type chanTail struct {
	lo  int64
	evs []*event
}

func (c *chanTail) hi() int64 { return c.lo + int64(len(c.evs)) }

// Bounds of a channel's tail: enough for what a session can be behind the
// node's stream in a handover or a focus replay (view_replay_max is 200 by
// default), and young enough that a quiet channel does not keep its last
// events for long.
const (
	DefaultStreamTail = 256
	tailAge           = time.Minute
	tailSweep         = 10 * time.Second // how often the hub's worker sweeps
)

func newStreamTail(maxEvents int, age time.Duration) *streamTail {
	return &streamTail{max: maxEvents, age: age, chans: map[string]*chanTail{}}
}

// add appends an event of the channel's ordered stream.
func (t *streamTail) add(e *event) {
	if t == nil || t.max <= 0 || !e.durable() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.chans[e.channelID]
	switch {
	case c == nil:
		c = &chanTail{}
		t.chans[e.channelID] = c
		fallthrough
	case e.seq != c.hi()+1:
		clear(c.evs)
		c.lo, c.evs = e.seq-1, c.evs[:0]
	}
	c.evs = append(c.evs, e)
	c.trim(t.max, e.recv.Add(-t.age))
}

// trim drops the entries beyond max and those received before oldest.
func (c *chanTail) trim(max int, oldest time.Time) {
	n := 0
	if len(c.evs) > max {
		n = len(c.evs) - max
	}
	for n < len(c.evs) && c.evs[n].recv.Before(oldest) {
		n++
	}
	if n == 0 {
		return
	}
	clear(c.evs[:n])
	c.lo += int64(n)
	c.evs = c.evs[n:]
	if cap(c.evs) > 2*max { // appends keep moving it; let the front go
		c.evs = append(make([]*event, 0, max), c.evs...)
	}
}

// window returns the channel's events (after, after+limit], ok only when
// the tail holds after+1 onwards: the answer is then exactly what a read of
// the log would begin with, up to where the node's stream is.
func (t *streamTail) window(channelID string, after int64, limit int) ([]*event, bool) {
	if t == nil || limit <= 0 {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.chans[channelID]
	if c == nil || after < c.lo || after >= c.hi() {
		return nil, false
	}
	i := int(after - c.lo)
	j := min(len(c.evs), i+limit)
	return append([]*event(nil), c.evs[i:j]...), true
}

// drop forgets the channel (the node let it go).
func (t *streamTail) drop(channelID string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.chans, channelID)
}

// sweep drops the entries received before now-age, and the channels left
// empty.
func (t *streamTail) sweep(now time.Time) {
	if t == nil {
		return
	}
	oldest := now.Add(-t.age)
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, c := range t.chans {
		c.trim(t.max, oldest)
		if len(c.evs) == 0 {
			delete(t.chans, id)
		}
	}
}

// size is how many events the tails hold (tests).
func (t *streamTail) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.chans {
		n += len(c.evs)
	}
	return n
}
