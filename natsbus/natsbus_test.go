package natsbus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
)

// externalURL is the machine's NATS server used by the external-mode test.
const externalURL = "nats://127.0.0.1:4222"

func mustStart(tb testing.TB, cfg Config) *Bus {
	tb.Helper()
	b, err := Start(cfg)
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// collector gathers events from subscriptions; safe for the bus's goroutines.
type collector struct {
	mu     sync.Mutex
	events []parley.Event
}

func (c *collector) add(ev parley.Event) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
}

func (c *collector) snapshot() []parley.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustSubscribe(tb testing.TB, b *Bus, topic string, c *collector) func() error {
	tb.Helper()
	unsub, err := b.Subscribe(topic, c.add)
	if err != nil {
		tb.Fatalf("subscribe %s: %v", topic, err)
	}
	// The subscription reaches the server before anything is published
	// after this point.
	if err := b.Flush(); err != nil {
		tb.Fatalf("flush: %v", err)
	}
	return unsub
}

func event(ch string, seq int64, topics ...string) parley.Event {
	return parley.Event{
		WorkspaceID: "W1",
		ChannelID:   ch,
		Seq:         seq,
		Type:        parley.EventMessageCreated,
		Data:        json.RawMessage(fmt.Sprintf(`{"channel_id":%q,"seq":%d}`, ch, seq)),
		CreatedAt:   time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		Topics:      topics,
	}
}

func testRoundTrip(t *testing.T, b *Bus) {
	var chA, chB, user, ws collector
	mustSubscribe(t, b, "ch.CA", &chA)
	mustSubscribe(t, b, "ch.CB", &chB)
	mustSubscribe(t, b, "user.U1", &user)
	mustSubscribe(t, b, "ws.W1", &ws)

	e1 := event("CA", 1, "ch.CA", "user.U1")
	e2 := event("CB", 7, "ch.CB")
	e3 := parley.Event{WorkspaceID: "W1", Type: parley.EventUserUpdated,
		Data: json.RawMessage(`{"user":{"id":"U1"}}`), CreatedAt: e1.CreatedAt, Topics: []string{"ws.W1"}}
	b.Publish([]parley.Event{e1, e2, e3})
	b.Publish([]parley.Event{event("CA", 99)}) // no topics: goes nowhere

	waitFor(t, "four deliveries", func() bool {
		return len(chA.snapshot()) == 1 && len(chB.snapshot()) == 1 &&
			len(user.snapshot()) == 1 && len(ws.snapshot()) == 1
	})
	check := func(name string, got parley.Event, want parley.Event, topic string) {
		t.Helper()
		if got.WorkspaceID != want.WorkspaceID || got.ChannelID != want.ChannelID || got.Seq != want.Seq ||
			got.Type != want.Type || string(got.Data) != string(want.Data) || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
		if !slices.Equal(got.Topics, []string{topic}) {
			t.Errorf("%s: topics %v, want [%s]", name, got.Topics, topic)
		}
	}
	check("ch.CA", chA.snapshot()[0], e1, "ch.CA")
	check("user.U1", user.snapshot()[0], e1, "user.U1")
	check("ch.CB", chB.snapshot()[0], e2, "ch.CB")
	check("ws.W1", ws.snapshot()[0], e3, "ws.W1")
	if e1.Topics == nil || len(e1.Topics) != 2 {
		t.Errorf("Publish changed the caller's event: topics %v", e1.Topics)
	}
}

func TestEmbeddedRoundTrip(t *testing.T) {
	testRoundTrip(t, mustStart(t, Config{}))
}

func TestWireFormatLeavesTopicsOut(t *testing.T) {
	b := mustStart(t, Config{})
	got := make(chan []byte, 1)
	sub, err := b.nc.Subscribe(DefaultSubjectPrefix+"ch.CW", func(m *nats.Msg) { got <- m.Data })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	b.Publish([]parley.Event{event("CW", 3, "ch.CW")})
	select {
	case data := <-got:
		if strings.Contains(string(data), "topics") {
			t.Fatalf("payload carries topics: %s", data)
		}
		if !strings.Contains(string(data), `"t":"message.created"`) || !strings.Contains(string(data), `"seq":3`) {
			t.Fatalf("payload is not the event: %s", data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
}

func testOrder(t *testing.T, b *Bus) {
	var c collector
	mustSubscribe(t, b, "ch.CORDER", &c)
	const n = 2000
	for i := int64(1); i <= n; i++ {
		b.Publish([]parley.Event{event("CORDER", i, "ch.CORDER")})
	}
	waitFor(t, fmt.Sprintf("%d events", n), func() bool { return len(c.snapshot()) >= n })
	for i, ev := range c.snapshot() {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: order not kept", i, ev.Seq)
		}
	}
}

func TestEmbeddedOrder(t *testing.T) { testOrder(t, mustStart(t, Config{})) }

func TestUnsubscribe(t *testing.T) {
	b := mustStart(t, Config{})
	var before, after collector
	unsub := mustSubscribe(t, b, "ch.CU", &before)
	mustSubscribe(t, b, "ch.CU", &after)
	b.Publish([]parley.Event{event("CU", 1, "ch.CU")})
	waitFor(t, "first event", func() bool { return len(before.snapshot()) == 1 && len(after.snapshot()) == 1 })
	if err := unsub(); err != nil {
		t.Fatal(err)
	}
	b.Publish([]parley.Event{event("CU", 2, "ch.CU")})
	waitFor(t, "second event", func() bool { return len(after.snapshot()) == 2 })
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(before.snapshot()); n != 1 {
		t.Fatalf("unsubscribed handler got %d events", n)
	}
}

func TestWildcardSubscribe(t *testing.T) {
	b := mustStart(t, Config{})
	var c collector
	mustSubscribe(t, b, "ch.*", &c)
	b.Publish([]parley.Event{event("C1", 1, "ch.C1"), event("C2", 1, "ch.C2", "user.U9")})
	waitFor(t, "two channel events", func() bool { return len(c.snapshot()) == 2 })
}

func TestBadTopics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := mustStart(t, Config{Registerer: reg})
	b.Publish([]parley.Event{event("C1", 1, "", "ch.*", "ch..x", "has space")})
	if got := testutil.ToFloat64(b.metrics.publishErrors); got != 4 {
		t.Fatalf("publish errors = %v, want 4", got)
	}
	if _, err := b.Subscribe("", func(parley.Event) {}); err == nil {
		t.Fatal("subscribing to an empty topic worked")
	}
	n, err := testutil.GatherAndCount(reg, "parley_bus_publish_errors_total")
	if err != nil || n != 1 {
		t.Fatalf("parley_bus_publish_errors_total not registered: n=%d err=%v", n, err)
	}
}

func TestPublishAfterCloseIsCountedNotFatal(t *testing.T) {
	b, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b.Publish([]parley.Event{event("C1", 1, "ch.C1")})
	if got := testutil.ToFloat64(b.metrics.publishErrors); got != 1 {
		t.Fatalf("publish errors = %v, want 1", got)
	}
}

func TestTwoBusesShareRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	b1 := mustStart(t, Config{Registerer: reg})
	b2 := mustStart(t, Config{Registerer: reg})
	b1.Publish([]parley.Event{event("C1", 1, "ch.C1")})
	b2.Publish([]parley.Event{event("C1", 1, "ch.C1")})
	if got := testutil.ToFloat64(b2.metrics.published); got != 2 {
		t.Fatalf("published = %v, want 2 (one counter for both buses)", got)
	}
}

// TestEmbeddedOpensNoListener checks that the embedded server is reachable
// only in process: it has no listener, and the process owns no listening
// TCP socket after it started.
func TestEmbeddedOpensNoListener(t *testing.T) {
	before, procOK := listeningSockets(t)
	b := mustStart(t, Config{})
	if b.srv == nil {
		t.Fatal("no embedded server")
	}
	if addr := b.srv.Addr(); addr != nil {
		t.Fatalf("embedded server listens on %v", addr)
	}
	if !procOK {
		t.Log("no /proc: skipped the socket table check")
		return
	}
	after, _ := listeningSockets(t)
	for inode, addr := range after {
		if _, ok := before[inode]; !ok {
			t.Errorf("the process started listening on %s", addr)
		}
	}
}

// listeningSockets returns the TCP sockets in LISTEN state that this process
// owns (by inode), read from /proc. ok is false where there is no /proc.
func listeningSockets(t *testing.T) (map[string]string, bool) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	own := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			own[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	out := map[string]string{}
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			if own[fields[9]] {
				out[fields[9]] = table + " " + fields[1]
			}
		}
		f.Close()
	}
	return out, true
}

// externalBus connects to the machine's NATS, skipping the test when there is
// none, except under CI=true.
func externalBus(t *testing.T) *Bus {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(externalURL, "nats://"), 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s is unreachable under CI: %v", externalURL, err)
		}
		t.Skipf("NATS at %s is unreachable: %v", externalURL, err)
	}
	conn.Close()
	b := mustStart(t, Config{URL: externalURL, Name: "parley-test"})
	if b.srv != nil {
		t.Fatal("external mode started an embedded server")
	}
	return b
}

func TestExternalRoundTrip(t *testing.T) {
	// Topics unique to this run: the external server is shared.
	b := externalBus(t)
	suffix := parley.NewID("T")
	var c collector
	mustSubscribe(t, b, "ch.CX"+suffix, &c)
	b.Publish([]parley.Event{event("CX"+suffix, 1, "ch.CX"+suffix)})
	waitFor(t, "event over external NATS", func() bool { return len(c.snapshot()) == 1 })
}

func TestExternalOrder(t *testing.T) {
	b := externalBus(t)
	var c collector
	topic := "ch.CORDER" + parley.NewID("T")
	mustSubscribe(t, b, topic, &c)
	const n = 1000
	for i := int64(1); i <= n; i++ {
		b.Publish([]parley.Event{event("CO", i, topic)})
	}
	waitFor(t, "all events", func() bool { return len(c.snapshot()) >= n })
	for i, ev := range c.snapshot() {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: order not kept", i, ev.Seq)
		}
	}
}

func TestExternalUnreachableFails(t *testing.T) {
	// Port 1 on loopback: nothing listens there.
	_, err := Start(Config{URL: "nats://user:secret@127.0.0.1:1", ConnectTimeout: time.Second})
	if err == nil {
		t.Fatal("connected to a NATS that is not there")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}
