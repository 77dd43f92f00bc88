package gateway

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"parley"
)

// drainedSink is a socket whose kernel takes every write at once, so that
// its user-space buffer has always drained by the time a flush asks to be
// told: armWritable answers false and no writable call will ever come.
type drainedSink struct {
	frames atomic.Int64
}

func (d *drainedSink) pending() int          { return 0 }
func (d *drainedSink) cork([]byte)           {}
func (d *drainedSink) uncork() []byte        { return nil }
func (d *drainedSink) armWritable() bool     { return false }
func (d *drainedSink) closeWith(int, string) {}
func (d *drainedSink) closed() bool          { return false }
func (d *drainedSink) text([]byte) bool      { d.frames.Add(1); return true }

// TestFlushDrainedDuringFlush: a burst larger than one flush's budget, to a
// socket that drains while it is being flushed, is written in full without
// anything else waking the partition. (The session used to be dropped from
// the dirty list while still marked dirty, and its queue then never moved
// again.)
func TestFlushDrainedDuringFlush(t *testing.T) {
	g, err := newGateway(Config{Store: nopStore{}, Bus: nopBus{}, WriteHighWater: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer g.stopWorkers()
	const burst = 40
	sk := &drainedSink{}
	s := g.newSession("n1.flush", "U1", "W1", "h")
	p := s.p
	p.post(func() {
		p.sessions[s] = struct{}{}
		s.c = sk
		// One inbox item queues the whole burst: the flush after it
		// writes about two frames and leaves the rest.
		for i := range burst {
			data, _ := json.Marshal(parley.MessageEventData{ChannelID: "C1", Message: &parley.Message{
				ID: fmt.Sprintf("M%d", i), ChannelID: "C1", UserID: "U1", Text: string(make([]byte, 500))}})
			p.enqueue(s, &event{typ: parley.EventMessageCreated, seq: int64(i + 1), channelID: "C1",
				tail: encodeTail(parley.EventMessageCreated, data), recv: g.now()})
		}
	})
	// Nothing is posted to the partition from here on: polling through
	// its inbox would give it the rounds it must find on its own.
	waitUntil(t, "burst written", func() bool { return sk.frames.Load() == burst })
}
