package natsbus

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"parley"
)

// Mux funnels many topic subscriptions into one handler run by one
// goroutine. nats.go gives every callback subscription (Subscribe) a
// goroutine of its own, about 4 KB each; a gateway or presence node holds a
// subscription per channel or watched user, tens of thousands of them, so
// those use a Mux instead: its subscriptions are channel subscriptions that
// the connection's reader fills directly, and one dispatcher drains them.
//
// Messages of one topic reach the handler in bus order. When the buffer is
// full the bus drops messages for that subscription (a slow consumer, counted
// in parley_bus_slow_consumer_total on the connection's error handler);
// durable events are then recovered from the store's log by the gateway's
// gap fill, as for any loss on the bus.
type Mux struct {
	b    *Bus
	fn   func(parley.Event)
	msgs chan *nats.Msg

	mu   sync.Mutex
	subs map[string]*nats.Subscription // guarded by mu; topic → subscription

	quit chan struct{}
	done chan struct{} // closed when the dispatcher returns
}

// DefaultMuxBuffer is the message buffer of a Mux made with buffer 0.
const DefaultMuxBuffer = 65536

// NewMux starts a Mux (a parley.TopicMux) that calls fn for every event of
// its topics. fn runs on the Mux's single goroutine: it must not block for
// long.
func (b *Bus) NewMux(buffer int, fn func(parley.Event)) parley.TopicMux {
	return b.newMux(buffer, fn)
}

func (b *Bus) newMux(buffer int, fn func(parley.Event)) *Mux {
	if buffer <= 0 {
		buffer = DefaultMuxBuffer
	}
	m := &Mux{
		b:    b,
		fn:   fn,
		msgs: make(chan *nats.Msg, buffer),
		subs: map[string]*nats.Subscription{},
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go m.run()
	return m
}

// Subscribe adds topic (a no-op when it is already subscribed).
func (m *Mux) Subscribe(topic string) error {
	if err := checkTopic(topic, true); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.subs[topic]; ok {
		return nil
	}
	sub, err := m.b.nc.ChanSubscribe(m.b.subject(topic), m.msgs)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", topic, err)
	}
	// The channel is the buffer; nats.go's own pending limits do not apply
	// to channel subscriptions.
	m.subs[topic] = sub
	return nil
}

// Unsubscribe removes topic (a no-op when it is not subscribed). Messages
// of the topic already buffered may still reach the handler.
func (m *Mux) Unsubscribe(topic string) error {
	m.mu.Lock()
	sub, ok := m.subs[topic]
	delete(m.subs, topic)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	if err := sub.Unsubscribe(); err != nil && err != nats.ErrConnectionClosed {
		return fmt.Errorf("unsubscribe %s: %w", topic, err)
	}
	return nil
}

// Topics returns how many topics are subscribed.
func (m *Mux) Topics() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs)
}

// Close ends every subscription and stops the dispatcher.
func (m *Mux) Close() {
	m.mu.Lock()
	for t, sub := range m.subs {
		sub.Unsubscribe()
		delete(m.subs, t)
	}
	m.mu.Unlock()
	select {
	case <-m.quit:
	default:
		close(m.quit)
	}
	<-m.done
}

func (m *Mux) run() {
	defer close(m.done)
	for {
		select {
		case <-m.quit:
			return
		case msg := <-m.msgs:
			var ev parley.Event
			if err := json.Unmarshal(msg.Data, &ev); err != nil {
				m.b.metrics.decodeErrors.Inc()
				m.b.log.Error("bus decode failed", "subject", msg.Subject, "err", err)
				continue
			}
			ev.Topics = []string{m.b.topic(msg.Subject)}
			m.b.metrics.receive(&ev, time.Now())
			m.fn(ev)
		}
	}
}
