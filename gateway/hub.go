package gateway

import (
	"errors"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"parley"
)

// hub holds the node's bus subscriptions: one per topic while any local
// session needs it, counted by reference. Channel topics feed the sequencer,
// whose ordered output, like the events of the other topics, is encoded once
// and handed to every partition.
type hub struct {
	g   *Gateway
	seq sequencer

	muxes []parley.TopicMux // nil (a bus without muxes): one Bus.Subscribe per topic

	mu     sync.Mutex
	topics map[string]*topicSub // guarded by mu
	closed bool                 // guarded by mu: no more subscriptions

	// Subscription changes asked for by partitions, applied in order by
	// the hub's worker so that a partition never waits on the bus.
	opsMu   sync.Mutex
	ops     []subOp // guarded by opsMu
	opsWake chan struct{}
}

// topicSub is one live bus subscription.
type topicSub struct {
	refs  int
	unsub func() error
	// start is where the node's stream of a channel began: the sequencer
	// delivers only events after it.
	start int64
}

// subOp is a deferred acquire (after ≥ 0) or release.
type subOp struct {
	topic   string
	after   int64
	release bool
}

func newHub(g *Gateway) *hub {
	h := &hub{g: g, topics: map[string]*topicSub{}, opsWake: make(chan struct{}, 1)}
	if mb, ok := g.cfg.Bus.(parley.MuxBus); ok {
		h.muxes = make([]parley.TopicMux, g.cfg.Partitions)
		for i := range h.muxes {
			h.muxes[i] = mb.NewMux(0, h.guardEvents(firstTopic, h.onEvent))
		}
	}
	return h
}

// onEvent takes an event from a mux; its topic is the one it came on.
func (h *hub) onEvent(ev parley.Event) {
	if len(ev.Topics) == 0 {
		return
	}
	topic := ev.Topics[0]
	if strings.HasPrefix(topic, parley.TopicPrefixChannel) {
		h.onChannelEvent(ev)
		return
	}
	h.dispatch(topic, ev)
}

// subscribe starts the node's subscription to topic.
func (h *hub) subscribe(topic string, isChannel bool) (func() error, error) {
	if h.muxes != nil {
		m := h.muxes[maphash.String(h.g.seed, topic)%uint64(len(h.muxes))]
		if err := m.Subscribe(topic); err != nil {
			return nil, err
		}
		return func() error { return m.Unsubscribe(topic) }, nil
	}
	of := func(parley.Event) string { return topic }
	if isChannel {
		return h.g.bus.Subscribe(topic, h.guardEvents(of, h.onChannelEvent))
	}
	return h.g.bus.Subscribe(topic, h.guardEvents(of, func(ev parley.Event) { h.dispatch(topic, ev) }))
}

// acquire takes a reference on topic, subscribing the node on the first.
// For a channel topic, after is the log position the caller knows (the
// sequencer starts there if this is the first reference); it returns where
// the node's stream of the channel started.
func (h *hub) acquire(topic string, after int64) (int64, error) {
	start, first, err := h.acquireLocked(topic, after)
	if err != nil {
		return 0, err
	}
	if channelID, isChannel := strings.CutPrefix(topic, parley.TopicPrefixChannel); isChannel && first {
		// Whatever was committed between the caller's read of the log
		// position and the subscription is fetched now.
		h.seq.CatchUp(channelID)
	}
	return start, nil
}

// acquireLocked is acquire's part under mu; first reports a new
// subscription. The unlock is deferred so that a panic in the bus's
// Subscribe, recovered further up, does not leave mu held.
func (h *hub) acquireLocked(topic string, after int64) (start int64, first bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, false, errors.New("gateway stopped")
	}
	if ts := h.topics[topic]; ts != nil {
		ts.refs++
		return ts.start, false, nil
	}
	channelID, isChannel := strings.CutPrefix(topic, parley.TopicPrefixChannel)
	if isChannel {
		h.seq.Track(channelID, after)
	}
	unsub, err := h.subscribe(topic, isChannel)
	if err != nil {
		if isChannel {
			h.seq.Untrack(channelID)
		}
		return 0, false, err
	}
	h.topics[topic] = &topicSub{refs: 1, unsub: unsub, start: after}
	h.g.metrics.subscriptions.Inc()
	return after, true, nil
}

// release drops a reference on topic, unsubscribing on the last.
func (h *hub) release(topic string) {
	ts := h.releaseLocked(topic)
	if ts == nil {
		return
	}
	if hook := h.g.releaseHook.Load(); hook != nil {
		(*hook)(topic)
	}
	channelID, isChannel := strings.CutPrefix(topic, parley.TopicPrefixChannel)
	if isChannel {
		for _, p := range h.g.parts {
			p.postAsync(func() {
				delete(p.chanPos, channelID)
				delete(p.members, channelID)
				delete(p.typingAt, channelID)
			})
		}
	}
}

// releaseLocked is release's part under mu: it returns the subscription
// when this was its last reference, unsubscribed.
//
// The unsubscribe happens under mu, like the subscribe of acquireLocked: a
// mux holds one subscription per topic (subscribing a topic it holds is a
// no-op), so an acquire of the topic between this release's forgetting it
// and its unsubscribing would keep the old subscription as its own and
// then lose it to this unsubscribe. The node would go on believing itself
// subscribed while the bus sent it nothing of the topic: for a channel,
// its sessions given nothing more, not even a gap to notice.
func (h *hub) releaseLocked(topic string) *topicSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := h.topics[topic]
	if ts == nil {
		return nil
	}
	ts.refs--
	if ts.refs > 0 {
		return nil
	}
	delete(h.topics, topic)
	h.g.metrics.subscriptions.Dec()
	if channelID, isChannel := strings.CutPrefix(topic, parley.TopicPrefixChannel); isChannel {
		h.seq.Untrack(channelID)
		h.g.tail.drop(channelID)
	}
	if err := ts.unsub(); err != nil {
		h.g.log.Warn("gateway unsubscribe failed", "topic", topic, "err", err)
	}
	return ts
}

// refs returns the reference count of topic (tests).
func (h *hub) refs(topic string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ts := h.topics[topic]; ts != nil {
		return ts.refs
	}
	return 0
}

// later queues an acquire or release for the worker.
func (h *hub) later(op subOp) {
	h.opsMu.Lock()
	h.ops = append(h.ops, op)
	h.opsMu.Unlock()
	select {
	case h.opsWake <- struct{}{}:
	default:
	}
}

// work applies queued subscription changes until stop is closed, and
// sweeps the stream tails of their old events.
func (h *hub) work(stop <-chan struct{}) {
	sweep := time.NewTicker(tailSweep)
	defer sweep.Stop()
	for {
		select {
		case <-stop:
			return
		case <-sweep.C:
			h.g.tail.sweep(h.g.now())
			continue
		case <-h.opsWake:
		}
		for {
			h.opsMu.Lock()
			ops := h.ops
			h.ops = nil
			h.opsMu.Unlock()
			if len(ops) == 0 {
				break
			}
			for _, op := range ops {
				h.apply(op)
			}
		}
	}
}

// apply makes one subscription change. A panic (in the bus's Subscribe or
// Unsubscribe) is contained like a failure: logged, counted, and the worker
// goes on with the next change.
func (h *hub) apply(op subOp) {
	defer func() {
		if v := recover(); v != nil {
			h.g.logPanic(panicBus, v, "topic", op.topic, "release", op.release)
		}
	}()
	if op.release {
		h.release(op.topic)
	} else if _, err := h.acquire(op.topic, op.after); err != nil {
		h.g.log.Error("gateway subscribe failed", "topic", op.topic, "err", err)
	}
}

// onChannelEvent takes an event from a channel subscription. Ephemeral
// events go straight out; durable ones through the sequencer.
func (h *hub) onChannelEvent(ev parley.Event) {
	if ev.Seq <= 0 {
		h.dispatch(parley.TopicChannel(ev.ChannelID), ev)
		return
	}
	h.seq.Push(ev)
}

// deliverOrdered is the sequencer's output: a channel's durable events in
// order, each once.
// The event goes into the channel's stream tail (tail.go) before any
// partition sees it, so that a partition's position in a channel is never
// past the tail's newest event.
func (h *hub) deliverOrdered(ev parley.Event) {
	if hot := h.g.cfg.Hot; hot != nil {
		hot.Observe(ev.ChannelID, ev.Seq)
	}
	topic := parley.TopicChannel(ev.ChannelID)
	e := h.encode(topic, ev)
	h.g.tail.add(e)
	h.fanOut(topic, e)
}

// dispatch encodes ev once and hands it to every partition.
func (h *hub) dispatch(topic string, ev parley.Event) {
	h.fanOut(topic, h.encode(topic, ev))
}

// encode prepares ev for the partitions, once.
func (h *hub) encode(topic string, ev parley.Event) *event {
	if hook := h.g.dispatchHook.Load(); hook != nil {
		(*hook)(topic, ev)
	}
	e := newEvent(ev, h.g.now())
	if h.g.jit.dir != nil && carriesUsers(ev.Type) {
		h.g.jit.annotate([]*event{e}, []parley.Event{ev})
	}
	return e
}

// fanOut hands e to every partition.
func (h *hub) fanOut(topic string, e *event) {
	for _, p := range h.g.parts {
		p.send(item{ev: e, topic: topic})
	}
}

// unsubscribeAll drops every subscription (shutdown).
func (h *hub) unsubscribeAll() {
	h.mu.Lock()
	topics := h.topics
	h.topics = map[string]*topicSub{}
	h.closed = true
	h.mu.Unlock()
	for topic, ts := range topics {
		if channelID, ok := strings.CutPrefix(topic, parley.TopicPrefixChannel); ok {
			h.seq.Untrack(channelID)
			h.g.tail.drop(channelID)
		}
		ts.unsub()
		h.g.metrics.subscriptions.Dec()
	}
	for _, m := range h.muxes {
		m.Close()
	}
}
