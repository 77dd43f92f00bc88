package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"parley"
)

// discardSink is a socket that takes everything at once.
type discardSink struct {
	frames, bytes int // owned by the session's partition
}

func (d *discardSink) pending() int          { return 0 }
func (d *discardSink) cork([]byte)           {}
func (d *discardSink) uncork() []byte        { return nil }
func (d *discardSink) armWritable() bool     { return false }
func (d *discardSink) closeWith(int, string) {}
func (d *discardSink) closed() bool          { return false }
func (d *discardSink) text(b []byte) bool    { d.frames++; d.bytes += len(b); return true }
func (d *discardSink) dup() *discardSink     { return &discardSink{} }

// nopBus and nopStore stand in for the bus and the store where the
// benchmark never reaches them.
type nopBus struct{}

func (nopBus) Subscribe(string, func(parley.Event)) (func() error, error) {
	return func() error { return nil }, nil
}
func (nopBus) Publish([]parley.Event) {}

type nopStore struct{ parley.Store }

func (nopStore) ChannelLog(context.Context, string, int64, int) ([]parley.Event, error) {
	return nil, nil
}

// barrier waits until every partition has handled and flushed what was
// sent before.
func barrier(g *Gateway) {
	var wg sync.WaitGroup
	wg.Add(len(g.parts))
	for _, p := range g.parts {
		p.post(func() {
			p.flushDirty()
			wg.Done()
		})
	}
	wg.Wait()
}

// BenchmarkFanout: one channel event to N sessions, over the real hub,
// inboxes, partitions, session rings and flushes, into discarding sockets.
// ns/delivery and allocs/delivery are per session reached; allocs/op is per
// event (its one encoding, shared by every session).
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			g, err := newGateway(Config{Store: nopStore{}, Bus: nopBus{}, ReplayMax: 64, SendQueue: 64})
			if err != nil {
				b.Fatal(err)
			}
			defer g.stopWorkers()
			const channelID = "Cbench"
			topic := parley.TopicPrefixChannel + channelID
			sinks := make([]*discardSink, n)
			for i := range n {
				s := g.newSession(fmt.Sprintf("n1.s%d", i), fmt.Sprintf("U%d", i), "W1", "h")
				sinks[i] = &discardSink{}
				p := s.p
				p.post(func() {
					p.sessions[s] = struct{}{}
					p.follow(s, channelID, 0, 0)
					s.c = sinks[i]
				})
			}
			barrier(g)
			data, _ := json.Marshal(parley.MessageEventData{ChannelID: channelID, Message: &parley.Message{
				ID: "M1", ChannelID: channelID, UserID: "U0", Text: string(make([]byte, 200)), CreatedAt: time.Now()}})
			ev := parley.Event{WorkspaceID: "W1", ChannelID: channelID, Type: parley.EventMessageCreated, Data: data}
			// Warm up: rings and buffers reach their steady size.
			for i := range 100 {
				ev.Seq = int64(i + 1)
				g.hub.dispatch(topic, ev)
			}
			barrier(g)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := range b.N {
				ev.Seq = int64(101 + i)
				g.hub.dispatch(topic, ev)
				barrier(g)
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			deliveries := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/deliveries, "ns/delivery")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/deliveries, "allocs/delivery")
			total := 0
			for _, s := range sinks {
				total += s.frames
			}
			if total != (b.N+100)*n {
				b.Fatalf("%d frames written, want %d", total, (b.N+100)*n)
			}
		})
	}
}
