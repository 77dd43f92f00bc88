package nodes

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/natsbus"
)

func mustBus(t *testing.T) *natsbus.Bus {
	t.Helper()
	b, err := natsbus.Start(natsbus.Config{})
	if err != nil {
		t.Fatalf("start bus: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func mustMembers(t *testing.T, cfg Config) *Members {
	t.Helper()
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Self.ID, err)
	}
	t.Cleanup(m.Close)
	return m
}

func node(id string) Node {
	return Node{ID: id, APIURL: "http://" + id + ".test/", WSURL: "ws://" + id + ".test/api/v1/gateway",
		Roles: []string{"api", "gateway"}}
}

func ids(ns []Node) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return strings.Join(out, ",")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// history records what a subscriber was told.
type history struct {
	mu    sync.Mutex
	lists []string
}

func (h *history) add(ns []Node) {
	h.mu.Lock()
	h.lists = append(h.lists, ids(ns))
	h.mu.Unlock()
}

func (h *history) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lists)
}

// announce publishes an announcement as another process would.
func announce(t *testing.T, bus *natsbus.Bus, op string, n Node) {
	t.Helper()
	data, err := json.Marshal(message{Op: op, Node: n})
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.PublishRaw(parley.NodesTopic, data); err != nil {
		t.Fatal(err)
	}
}

func TestMembersSeeEachOther(t *testing.T) {
	bus := mustBus(t)
	// An hour between heartbeats: only the announce at start and the
	// answer to a newcomer can make them meet.
	var ms []*Members
	for _, id := range []string{"n2", "n3", "n1"} {
		ms = append(ms, mustMembers(t, Config{Bus: bus, Self: node(id), Interval: time.Hour}))
	}
	for _, m := range ms {
		waitFor(t, m.Self().ID+" to see all three", func() bool { return ids(m.Live()) == "n1,n2,n3" })
	}
	got := ms[0].Live()
	if n1 := got[0]; n1.APIURL != "http://n1.test/" || n1.WSURL != "ws://n1.test/api/v1/gateway" ||
		!slices.Equal(n1.Roles, []string{"api", "gateway"}) || n1.StartedAt.IsZero() {
		t.Fatalf("n1 as seen by n2: %+v", n1)
	}
	if again := ms[0].Live(); &again[0] != &got[0] {
		t.Fatal("Live rebuilt the list without a change")
	}
}

func TestCloseIsSeenAtOnce(t *testing.T) {
	bus := mustBus(t)
	a := mustMembers(t, Config{Bus: bus, Self: node("a"), Interval: time.Hour})
	b := mustMembers(t, Config{Bus: bus, Self: node("b"), Interval: time.Hour})
	c := mustMembers(t, Config{Bus: bus, Self: node("c"), Interval: time.Hour})
	for _, m := range []*Members{a, b, c} {
		waitFor(t, "three members", func() bool { return len(m.Live()) == 3 })
	}
	var h history
	cancel := a.Subscribe(h.add)
	defer cancel()
	c.Close()
	c.Close() // twice is harmless
	for _, m := range []*Members{a, b} {
		waitFor(t, "c gone", func() bool { return ids(m.Live()) == "a,b" })
	}
	if got := h.get(); !slices.Equal(got, []string{"a,b,c", "a,b"}) {
		t.Fatalf("subscriber saw %v", got)
	}
}

func TestSilentNodeExpires(t *testing.T) {
	const interval = 100 * time.Millisecond
	bus := mustBus(t)
	a := mustMembers(t, Config{Bus: bus, Self: node("a"), Interval: interval})
	b := mustMembers(t, Config{Bus: bus, Self: node("b"), Interval: interval})
	waitFor(t, "a and b", func() bool { return len(a.Live()) == 2 && len(b.Live()) == 2 })
	// A node that heartbeats once and then falls silent (a kill -9).
	ghost := node("ghost")
	ghost.StartedAt = time.Now()
	sent := time.Now()
	announce(t, bus, opHeartbeat, ghost)
	waitFor(t, "the ghost to appear", func() bool { return ids(a.Live()) == "a,b,ghost" && ids(b.Live()) == "a,b,ghost" })
	waitFor(t, "the ghost to expire", func() bool { return ids(a.Live()) == "a,b" && ids(b.Live()) == "a,b" })
	if d := time.Since(sent); d < ExpiryIntervals*interval {
		t.Fatalf("expired after %v, before %d intervals", d, ExpiryIntervals)
	}
	// The live ones keep each other: their heartbeats keep coming.
	deadline := time.Now().Add(5 * interval)
	for time.Now().Before(deadline) {
		if len(a.Live()) != 2 || len(b.Live()) != 2 {
			t.Fatalf("a live node expired: %s / %s", ids(a.Live()), ids(b.Live()))
		}
		time.Sleep(interval / 2)
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestExpiryWithFakeClock(t *testing.T) {
	bus := mustBus(t)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// The ticker never fires within the test; sweep is called by hand.
	a := mustMembers(t, Config{Bus: bus, Self: node("a"), Interval: time.Hour, Now: clock.Now})
	var h history
	defer a.Subscribe(h.add)()
	announce(t, bus, opHeartbeat, node("z"))
	waitFor(t, "z", func() bool { return len(a.Live()) == 2 })

	clock.Advance(ExpiryIntervals*time.Hour - time.Second)
	a.sweep()
	if ids(a.Live()) != "a,z" {
		t.Fatalf("expired early: %s", ids(a.Live()))
	}
	announce(t, bus, opHeartbeat, node("z")) // a heartbeat restarts the count
	if err := bus.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the heartbeat to land", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.peers["z"].lastSeen.Equal(clock.Now())
	})
	clock.Advance(ExpiryIntervals*time.Hour - time.Second)
	a.sweep()
	if ids(a.Live()) != "a,z" {
		t.Fatalf("expired despite the heartbeat: %s", ids(a.Live()))
	}
	clock.Advance(2 * time.Second)
	a.sweep()
	if ids(a.Live()) != "a" {
		t.Fatalf("not expired: %s", ids(a.Live()))
	}
	if got := h.get(); !slices.Equal(got, []string{"a", "a,z", "a"}) {
		t.Fatalf("subscriber saw %v", got)
	}
}

func TestGoodbyeOfAnEarlierProcess(t *testing.T) {
	bus := mustBus(t)
	a := mustMembers(t, Config{Bus: bus, Self: node("a"), Interval: time.Hour})
	old, restarted := node("r"), node("r")
	old.StartedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	restarted.StartedAt = old.StartedAt.Add(time.Minute)
	announce(t, bus, opHeartbeat, restarted)
	announce(t, bus, opGoodbye, old) // late goodbye of the previous process
	announce(t, bus, opHeartbeat, node("marker"))
	waitFor(t, "the marker", func() bool { return strings.Contains(ids(a.Live()), "marker") })
	if ids(a.Live()) != "a,marker,r" {
		t.Fatalf("an old goodbye removed the restarted node: %s", ids(a.Live()))
	}
	announce(t, bus, opGoodbye, restarted)
	waitFor(t, "r gone", func() bool { return ids(a.Live()) == "a,marker" })
}

func TestChangedAnnouncementUpdates(t *testing.T) {
	bus := mustBus(t)
	a := mustMembers(t, Config{Bus: bus, Self: node("a"), Interval: time.Hour})
	z := node("z")
	announce(t, bus, opHeartbeat, z)
	waitFor(t, "z", func() bool { return len(a.Live()) == 2 })
	z.WSURL = "ws://elsewhere/api/v1/gateway"
	announce(t, bus, opHeartbeat, z)
	waitFor(t, "z's new URL", func() bool { return a.Live()[1].WSURL == z.WSURL })
	// Garbage and unknown ops change nothing.
	bus.PublishRaw(parley.NodesTopic, []byte("{not json"))
	bus.PublishRaw(parley.NodesTopic, []byte(`{"op":"dance","node_id":"q"}`))
	bus.PublishRaw(parley.NodesTopic, []byte(`{"op":"heartbeat","node_id":"bad.id"}`))
	announce(t, bus, opHeartbeat, node("marker"))
	waitFor(t, "the marker", func() bool { return len(a.Live()) == 3 })
	if ids(a.Live()) != "a,marker,z" {
		t.Fatalf("live %s", ids(a.Live()))
	}
}

func TestStartChecks(t *testing.T) {
	bus := mustBus(t)
	if _, err := Start(Config{Self: node("a")}); err == nil {
		t.Fatal("started without a bus")
	}
	for _, id := range []string{"", "a.b", "a b", "*", strings.Repeat("x", 65)} {
		if _, err := Start(Config{Bus: bus, Self: Node{ID: id}}); err == nil {
			t.Errorf("started with id %q", id)
		}
	}
	for _, id := range []string{"a", "node-1", "host_2-ab12cd", strings.Repeat("x", 64)} {
		if err := ValidID(id); err != nil {
			t.Errorf("ValidID(%q): %v", id, err)
		}
	}
}

func TestCloseEndsGoroutines(t *testing.T) {
	bus := mustBus(t)
	base := runtime.NumGoroutine()
	m, err := Start(Config{Bus: bus, Self: node("a"), Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
}

// TestNoHeartbeatAfterGoodbye: an announcement that a closing node was still
// handling (a newcomer, answered at once) must not put it back on the other
// nodes after its goodbye.
func TestNoHeartbeatAfterGoodbye(t *testing.T) {
	bus := mustBus(t)
	a := mustMembers(t, Config{Bus: bus, Self: node("a"), Interval: time.Hour})
	c := mustMembers(t, Config{Bus: bus, Self: node("c"), Interval: time.Hour})
	waitFor(t, "a sees c", func() bool { return ids(a.Live()) == "a,c" })
	c.Close()
	waitFor(t, "c gone", func() bool { return ids(a.Live()) == "a" })
	data, err := json.Marshal(message{Op: opHeartbeat, Node: node("late")})
	if err != nil {
		t.Fatal(err)
	}
	c.receive(data) // the newcomer's heartbeat, handled after Close
	// Announcements of one connection arrive in order: once the marker is
	// seen, an answer from c would have been too.
	announce(t, bus, opHeartbeat, node("marker"))
	waitFor(t, "the marker", func() bool { return strings.Contains(ids(a.Live()), "marker") })
	if got := ids(a.Live()); got != "a,marker" {
		t.Fatalf("a sees %s after c's goodbye, want a,marker", got)
	}
}
