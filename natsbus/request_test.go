package natsbus

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"parley"
)

func mustHandle(t *testing.T, b *Bus, subject string, fn func([]byte) ([]byte, error)) func() error {
	t.Helper()
	stop, err := b.Handle(subject, fn)
	if err != nil {
		t.Fatalf("handle %s: %v", subject, err)
	}
	t.Cleanup(func() { stop() })
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	return stop
}

func TestRequestReply(t *testing.T) {
	b := mustStart(t, Config{})
	mustHandle(t, b, parley.NodeTopic("N1", "echo"), func(data []byte) ([]byte, error) {
		return append([]byte("echo "), data...), nil
	})
	reply, err := b.Request(context.Background(), "node.N1.echo", []byte("hello"))
	if err != nil || string(reply) != "echo hello" {
		t.Fatalf("reply %q, err %v", reply, err)
	}
}

func TestRequestNoResponders(t *testing.T) {
	b := mustStart(t, Config{})
	start := time.Now()
	_, err := b.Request(context.Background(), parley.NodeTopic("GONE", "handover"), nil)
	if !errors.Is(err, ErrNoResponders) {
		t.Fatalf("err %v, want ErrNoResponders", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("no-responders took %v: it should not wait for the timeout", d)
	}

	stop := mustHandle(t, b, parley.NodeTopic("N1", "x"), func([]byte) ([]byte, error) { return nil, nil })
	if _, err := b.Request(context.Background(), parley.NodeTopic("N1", "x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil { // twice is harmless
		t.Fatal(err)
	}
	if _, err := b.Request(context.Background(), parley.NodeTopic("N1", "x"), nil); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("after stop: err %v", err)
	}
}

func TestRequestHandlerErrors(t *testing.T) {
	b := mustStart(t, Config{})
	mustHandle(t, b, "node.N1.coded", func([]byte) ([]byte, error) {
		return []byte("ignored"), parley.Errorf(parley.ENOTFOUND, "no session %s", "S1")
	})
	mustHandle(t, b, "node.N1.plain", func([]byte) ([]byte, error) {
		return nil, errors.New("disk on fire")
	})
	_, err := b.Request(context.Background(), "node.N1.coded", nil)
	if parley.ErrorCode(err) != parley.ENOTFOUND || parley.ErrorMessage(err) != "no session S1" {
		t.Fatalf("coded: err %v", err)
	}
	_, err = b.Request(context.Background(), "node.N1.plain", nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Message != "disk on fire" || parley.ErrorCode(err) != parley.EINTERNAL {
		t.Fatalf("plain: err %v", err)
	}
}

func TestRequestTimeoutAndStopWaits(t *testing.T) {
	b := mustStart(t, Config{})
	release, entered := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	stop := mustHandle(t, b, "node.N1.slow", func([]byte) ([]byte, error) {
		close(entered)
		<-release
		finished.Store(true)
		return []byte("late"), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.Request(ctx, "node.N1.slow", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
	// On a loaded machine the request may reach the handler only after
	// the requester gave up: stop is checked against a running handler.
	<-entered
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stop returned while the handler still ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-stopped
	if !finished.Load() {
		t.Fatal("stop returned before the handler finished")
	}
}

func TestHandleRunsConcurrently(t *testing.T) {
	const n = 10
	b := mustStart(t, Config{})
	var entered sync.WaitGroup
	entered.Add(n)
	mustHandle(t, b, "node.N1.barrier", func(data []byte) ([]byte, error) {
		entered.Done()
		entered.Wait() // only returns when n calls run at once
		return data, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Request(context.Background(), "node.N1.barrier", []byte("x")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestRawPublishSubscribe(t *testing.T) {
	b := mustStart(t, Config{})
	var mu sync.Mutex
	var got []string
	unsub, err := b.SubscribeRaw(parley.NodesTopic, func(data []byte) {
		mu.Lock()
		got = append(got, string(data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"one", "two", "three"} {
		if err := b.PublishRaw(parley.NodesTopic, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3
	})
	if got[0] != "one" || got[2] != "three" {
		t.Fatalf("got %v", got)
	}
}

func TestBadRawTopics(t *testing.T) {
	b := mustStart(t, Config{})
	if err := b.PublishRaw("node.*.x", nil); err == nil {
		t.Fatal("published to a wildcard")
	}
	if _, err := b.Request(context.Background(), "node..x", nil); err == nil {
		t.Fatal("requested an empty token")
	}
	if _, err := b.Handle("node. x", func([]byte) ([]byte, error) { return nil, nil }); err == nil {
		t.Fatal("handled a topic with whitespace")
	}
	stop, err := b.Handle("node.N1.>", func([]byte) ([]byte, error) { return []byte("any"), nil })
	if err != nil {
		t.Fatalf("wildcard handle: %v", err)
	}
	defer stop()
	b.Flush()
	if reply, err := b.Request(context.Background(), "node.N1.a.b", nil); err != nil || string(reply) != "any" {
		t.Fatalf("wildcard handler: %q %v", reply, err)
	}
}

// TestSubjectPrefix: every kind of message goes out under the configured
// prefix and comes back as the bare topic, so that buses with different
// prefixes share a server without hearing each other.
func TestSubjectPrefix(t *testing.T) {
	if _, err := Start(Config{SubjectPrefix: "a..b"}); err == nil {
		t.Fatal("started with a prefix that has an empty token")
	}
	b := mustStart(t, Config{SubjectPrefix: "t1"})
	var mu sync.Mutex
	var subjects []string // guarded by mu
	all, err := b.nc.Subscribe(">", func(m *nats.Msg) {
		if strings.HasPrefix(m.Subject, "_INBOX.") {
			return
		}
		mu.Lock()
		subjects = append(subjects, m.Subject)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Unsubscribe()
	var evs collector
	mustSubscribe(t, b, "ch.C1", &evs)
	mustHandle(t, b, parley.NodeTopic("N1", "echo"), func(data []byte) ([]byte, error) { return data, nil })

	b.Publish([]parley.Event{event("C1", 1, "ch.C1")})
	if err := b.PublishRaw(parley.NodesTopic, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Request(context.Background(), parley.NodeTopic("N1", "echo"), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(subjects) == 3
	})
	mu.Lock()
	got := strings.Join(subjects, " ")
	mu.Unlock()
	if want := "t1.ch.C1 t1.nodes t1.node.N1.echo"; got != want {
		t.Fatalf("subjects %q, want %q", got, want)
	}
	waitFor(t, "the event", func() bool { return len(evs.snapshot()) == 1 })
	if tp := evs.snapshot()[0].Topics; len(tp) != 1 || tp[0] != "ch.C1" {
		t.Fatalf("event arrived with topics %v, want the bare topic", tp)
	}
}
