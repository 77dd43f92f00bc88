package natsbus

import (
	"runtime"
	"sync"
	"testing"

	"parley"
)

// TestMux: many topics on one Mux deliver in order per topic, start no
// goroutine per subscription, and stop delivering a topic once unsubscribed.
func TestMux(t *testing.T) {
	b := mustStart(t, Config{})
	var mu sync.Mutex
	got := map[string][]int64{} // guarded by mu
	m := b.newMux(0, func(ev parley.Event) {
		mu.Lock()
		got[ev.ChannelID] = append(got[ev.ChannelID], ev.Seq)
		mu.Unlock()
	})
	defer m.Close()

	const topics = 500
	before := runtime.NumGoroutine()
	for i := range topics {
		if err := m.Subscribe(parley.TopicChannel(chanID(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Subscribe(parley.TopicChannel(chanID(0))); err != nil { // idempotent
		t.Fatal(err)
	}
	if n := runtime.NumGoroutine() - before; n > 5 {
		t.Fatalf("%d subscriptions started %d goroutines", topics, n)
	}
	if m.Topics() != topics {
		t.Fatalf("Topics() = %d, want %d", m.Topics(), topics)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	const perTopic = 20
	for seq := int64(1); seq <= perTopic; seq++ {
		var evs []parley.Event
		for i := range topics {
			id := chanID(i)
			evs = append(evs, parley.Event{ChannelID: id, Seq: seq, Type: "message.created", Data: []byte(`{}`), Topics: []string{parley.TopicChannel(id)}})
		}
		b.Publish(evs)
	}
	waitFor(t, "mux deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range got {
			n += len(s)
		}
		return n == topics*perTopic
	})
	mu.Lock()
	for id, seqs := range got {
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Fatalf("topic %s got %v: out of order", id, seqs)
			}
		}
	}
	mu.Unlock()

	if err := m.Unsubscribe(parley.TopicChannel(chanID(0))); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	b.Publish([]parley.Event{
		{ChannelID: chanID(0), Seq: 99, Type: "x", Data: []byte(`{}`), Topics: []string{parley.TopicChannel(chanID(0))}},
		{ChannelID: chanID(1), Seq: 99, Type: "x", Data: []byte(`{}`), Topics: []string{parley.TopicChannel(chanID(1))}},
	})
	waitFor(t, "mux deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got[chanID(1)]) == perTopic+1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got[chanID(0)]) != perTopic {
		t.Fatalf("unsubscribed topic still delivered: %v", got[chanID(0)])
	}
}

func chanID(i int) string { return "C" + string(rune('a'+i%26)) + itoa(i) }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
