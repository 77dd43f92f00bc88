package natsbus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"parley"
)

// Node-to-node messages: request/reply (a session handover asks the node
// that owns the session) and raw publish/subscribe (node announce). Their
// subjects are whole NATS subjects, not topics; node-to-node subjects live
// under NodeSubject(nodeID, name), announcements on "parley.nodes".

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
	Subject string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("request %s: remote error: %s", e.Subject, e.Message)
}

// NodeSubject is the subject of a node-to-node request kind aimed at one
// node: "parley.node.<nodeID>.<name>".
func NodeSubject(nodeID, name string) string {
	return SubjectPrefix + "node." + nodeID + "." + name
}

// Request sends data to whoever handles subject and waits for the reply. If
// ctx has no deadline, DefaultRequestTimeout applies. Errors: ErrNoResponders
// (wrapped) when nobody handles the subject; the context's error on timeout;
// the handler's error as a *parley.Error when it carried a code, else as a
// *RemoteError.
func (b *Bus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	if err := checkSubject(subject, false); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	msg, err := b.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: data})
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("request %s: %w", subject, ErrNoResponders)
	case err != nil:
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	if text := msg.Header.Get(headerError); text != "" {
		if code := msg.Header.Get(headerCode); code != "" && code != parley.EINTERNAL {
			return nil, &parley.Error{Code: code, Message: text}
		}
		return nil, &RemoteError{Subject: subject, Message: text}
	}
	return msg.Data, nil
}

// Handle answers requests on subject with fn: its result is the reply, or
// its error is sent back to the requester (see Request). Requests are
// handled concurrently, up to MaxConcurrentHandlers at once. stop ends the
// subscription and waits for the calls of fn under way.
func (b *Bus) Handle(subject string, fn func(data []byte) ([]byte, error)) (stop func() error, err error) {
	if err := checkSubject(subject, true); err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		stopped bool // guarded by mu
		running sync.WaitGroup
		slots   = make(chan struct{}, MaxConcurrentHandlers)
	)
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) {
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
		return nil, fmt.Errorf("handle %s: %w", subject, err)
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

// PublishRaw publishes data on subject as is (no event encoding).
func (b *Bus) PublishRaw(subject string, data []byte) error {
	if err := checkSubject(subject, false); err != nil {
		return err
	}
	if err := b.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

// SubscribeRaw calls fn with the payload of every message on subject, one at
// a time, in the order the bus delivered them. The returned function ends
// the subscription.
func (b *Bus) SubscribeRaw(subject string, fn func(data []byte)) (unsubscribe func() error, err error) {
	if err := checkSubject(subject, true); err != nil {
		return nil, err
	}
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) { fn(m.Data) })
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	return sub.Unsubscribe, nil
}

// checkSubject is checkTopic for whole subjects, which must be Parley's.
func checkSubject(subject string, wildcards bool) error {
	if !strings.HasPrefix(subject, SubjectPrefix) {
		return fmt.Errorf("subject %q is not under %q", subject, SubjectPrefix)
	}
	return checkTopic(subject, wildcards)
}
