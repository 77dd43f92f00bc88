package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"parley"
)

// benchDirectory knows every user id and handle it is asked about.
type benchDirectory struct{}

func (benchDirectory) Users(_ context.Context, _ string, ids []string) ([]parley.User, error) {
	out := make([]parley.User, len(ids))
	for i, id := range ids {
		out[i] = parley.User{ID: id, Name: "User " + id, Handle: "h" + id, Title: "Engineer", AvatarHash: "abc123"}
	}
	return out, nil
}

func (benchDirectory) UsersByHandle(_ context.Context, _ string, handles []string) ([]parley.User, error) {
	out := make([]parley.User, len(handles))
	for i, h := range handles {
		out[i] = parley.User{ID: "U" + h, Name: "User " + h, Handle: h}
	}
	return out, nil
}

// BenchmarkFanoutJIT is BenchmarkFanout with just-in-time users on.
//
//   - known: every session has already been sent the author (the common
//     case): the shared frame goes out as is, no allocation per delivery.
//   - missing: every event is by an author no session has seen, so every
//     session gets a frame with the user (one variant per partition, shared
//     by its sessions) and adds the author to its set.
func BenchmarkFanoutJIT(b *testing.B) {
	for _, mode := range []string{"known", "missing"} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/sessions=%d", mode, n), func(b *testing.B) {
				benchFanoutJIT(b, n, mode == "missing")
			})
		}
	}
}

func benchFanoutJIT(b *testing.B, n int, newAuthors bool) {
	g, err := newGateway(Config{Store: nopStore{}, Bus: nopBus{}, ReplayMax: 64, SendQueue: 64, Users: benchDirectory{}})
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
	text := string(make([]byte, 200))
	event := func(seq int64, author string) parley.Event {
		data, _ := json.Marshal(parley.MessageEventData{ChannelID: channelID, Seq: seq, Message: &parley.Message{
			ID: "M1", ChannelID: channelID, UserID: author, Text: text, CreatedAt: time.Now()}})
		return parley.Event{WorkspaceID: "W1", ChannelID: channelID, Seq: seq, Type: parley.EventMessageCreated, Data: data}
	}
	// Warm up: rings and buffers reach their steady size, and every
	// session is sent U0.
	for i := range 100 {
		g.hub.dispatch(topic, event(int64(i+1), "U0"))
	}
	barrier(g)
	evs := make([]parley.Event, b.N)
	for i := range evs {
		author := "U0"
		if newAuthors {
			author = fmt.Sprintf("Unew%d", i)
		}
		evs[i] = event(int64(101+i), author)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		g.hub.dispatch(topic, evs[i])
		barrier(g)
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	deliveries := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/deliveries, "ns/delivery")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/deliveries, "allocs/delivery")
	frames, bytes := 0, 0
	for _, s := range sinks {
		frames += s.frames
		bytes += s.bytes
	}
	if frames != (b.N+100)*n {
		b.Fatalf("%d frames written, want %d", frames, (b.N+100)*n)
	}
}
