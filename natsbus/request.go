package natsbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"parley"
)

// Node-to-node messages: request/reply (a session handover asks the node
// that owns the session) and raw publish/subscribe (node announce, config
// notices). They are addressed by topic like events (parley.NodeTopic,
// parley.NodesTopic, parley.ConfigChangedTopic) and sent under the bus's
// subject prefix.

// DefaultRequestTimeout bounds a Request whose context has no deadline.
const DefaultRequestTimeout = 5 * time.Second

// MaxConcurrentHandlers is how many requests one Handle runs at once; more
// wait in the subscription's queue.
const MaxConcurrentHandlers = 64

// ErrNoResponders is returned (wrapped) by Request when nothing handles the
// subject: the node that should answer is gone.
var ErrNoResponders = errors.New("no responders")

// Reply headers that carry a handler's error.
const (
	headerError = "Parley-Error"
	headerCode  = "Parley-Error-Code"
)

// RemoteError is an error a handler returned that has no parley error code.
type RemoteError struct {
	Topic   string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("request %s: remote error: %s", e.Topic, e.Message)
}

// Request sends data to whoever handles topic and waits for the reply. If
// ctx has no deadline, DefaultRequestTimeout applies. Errors: ErrNoResponders
// (wrapped) when nobody handles the topic; the context's error on timeout;
// the handler's error as a *parley.Error when it carried a code, else as a
// *RemoteError.
func (b *Bus) Request(ctx context.Context, topic string, data []byte) ([]byte, error) {
	if err := checkTopic(topic, false); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	msg, err := b.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: b.subject(topic), Data: data})
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("request %s: %w", topic, ErrNoResponders)
	case err != nil:
		return nil, fmt.Errorf("request %s: %w", topic, err)
	}
	if text := msg.Header.Get(headerError); text != "" {
		if code := msg.Header.Get(headerCode); code != "" && code != parley.EINTERNAL {
			return nil, &parley.Error{Code: code, Message: text}
		}
		return nil, &RemoteError{Topic: topic, Message: text}
	}
	return msg.Data, nil
}

// Handle answers requests on topic with fn: its result is the reply, or
// its error is sent back to the requester (see Request). Requests are
// handled concurrently, up to MaxConcurrentHandlers at once. stop ends the
// subscription and waits for the calls of fn under way.
func (b *Bus) Handle(topic string, fn func(data []byte) ([]byte, error)) (stop func() error, err error) {
	if err := checkTopic(topic, true); err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		stopped bool // guarded by mu
		running sync.WaitGroup
		slots   = make(chan struct{}, MaxConcurrentHandlers)
	)
	sub, err := b.nc.Subscribe(b.subject(topic), func(m *nats.Msg) {
		slots <- struct{}{} // full: hold the subscription's queue
		mu.Lock()
		if stopped {
			mu.Unlock()
			<-slots
			return
		}
		running.Add(1)
		mu.Unlock()
		go func() {
			defer running.Done()
			defer func() { <-slots }()
			b.answer(m, fn)
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("handle %s: %w", topic, err)
	}
	var once sync.Once
	stop = func() error {
		var err error
		once.Do(func() {
			mu.Lock()
			stopped = true
			mu.Unlock()
			err = sub.Unsubscribe()
			running.Wait()
		})
		return err
	}
	return stop, nil
}

func (b *Bus) answer(m *nats.Msg, fn func([]byte) ([]byte, error)) {
	out, err := fn(m.Data)
	if m.Reply == "" {
		return // a publish, not a request: nobody waits
	}
	reply := &nats.Msg{Subject: m.Reply, Data: out}
	if err != nil {
		reply.Data = nil
		reply.Header = nats.Header{}
		reply.Header.Set(headerCode, parley.ErrorCode(err))
		var perr *parley.Error
		if errors.As(err, &perr) {
			reply.Header.Set(headerError, perr.Message)
		} else {
			reply.Header.Set(headerError, err.Error())
		}
	}
	if rerr := b.nc.PublishMsg(reply); rerr != nil {
		b.log.Warn("bus reply failed", "subject", m.Subject, "err", rerr)
	}
}

// PublishRaw publishes data on topic as is (no event encoding).
func (b *Bus) PublishRaw(topic string, data []byte) error {
	if err := checkTopic(topic, false); err != nil {
		return err
	}
	if err := b.nc.Publish(b.subject(topic), data); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// SubscribeRaw calls fn with the payload of every message on topic, one at
// a time, in the order the bus delivered them. The returned function ends
// the subscription.
func (b *Bus) SubscribeRaw(topic string, fn func(data []byte)) (unsubscribe func() error, err error) {
	if err := checkTopic(topic, true); err != nil {
		return nil, err
	}
	sub, err := b.nc.Subscribe(b.subject(topic), func(m *nats.Msg) { fn(m.Data) })
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", topic, err)
	}
	return sub.Unsubscribe, nil
}
