package affinity

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/natsbus"
	"parley/nodes"
)

func node(id string) nodes.Node {
	return nodes.Node{ID: id, WSURL: "ws://" + id + ".test/api/v1/gateway", Roles: []string{"api", GatewayRole}}
}

func nodeList(ids ...string) []nodes.Node {
	out := make([]nodes.Node, len(ids))
	for i, id := range ids {
		out[i] = node(id)
	}
	return out
}

// keys are workspace ids as the server makes them.
func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = parley.NewID(parley.PrefixWorkspace)
	}
	return out
}

func assign(t *testing.T, r *Ring, ks []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(ks))
	for _, k := range ks {
		n, ok := r.Lookup(k)
		if !ok {
			t.Fatalf("Lookup(%q) found nothing on a ring of %d", k, r.Len())
		}
		out[k] = n.ID
	}
	return out
}

// TestBalance: 100,000 workspace ids over 3 nodes, each node within ±10% of
// a third (and over 10 nodes, of a tenth).
func TestBalance(t *testing.T) {
	ks := keys(100_000)
	for _, n := range []int{3, 10} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("node-%d", i)
		}
		count := map[string]int{}
		for _, id := range assign(t, New(nodeList(ids...)), ks) {
			count[id]++
		}
		want := float64(len(ks)) / float64(n)
		for _, id := range ids {
			dev := (float64(count[id]) - want) / want
			t.Logf("%d nodes: %s has %d keys (%+.2f%%)", n, id, count[id], 100*dev)
			if math.Abs(dev) > 0.10 {
				t.Errorf("%d nodes: %s has %d keys, want %.0f ±10%%", n, id, count[id], want)
			}
		}
	}
}

// TestJoinMovesOnlyItsShare: a node joining 3 takes about a quarter of the
// keys, every moved key moves to it, and no other key moves.
func TestJoinMovesOnlyItsShare(t *testing.T) {
	ks := keys(100_000)
	before := assign(t, New(nodeList("a", "b", "c")), ks)
	after := assign(t, New(nodeList("a", "b", "c", "d")), ks)
	moved := 0
	for _, k := range ks {
		if before[k] == after[k] {
			continue
		}
		moved++
		if after[k] != "d" {
			t.Fatalf("key %s moved from %s to %s, not to the new node", k, before[k], after[k])
		}
	}
	share := float64(moved) / float64(len(ks))
	t.Logf("join: %d of %d keys moved (%.2f%%; ideal 1/4 = 25%%)", moved, len(ks), 100*share)
	if math.Abs(share-0.25) > 0.025 {
		t.Fatalf("join moved %.2f%% of the keys, want 25%% ±2.5", 100*share)
	}
}

// TestLeaveMovesOnlyItsKeys: when a node leaves, exactly its keys move,
// spread evenly over the others.
func TestLeaveMovesOnlyItsKeys(t *testing.T) {
	ks := keys(100_000)
	before := assign(t, New(nodeList("a", "b", "c", "d")), ks)
	after := assign(t, New(nodeList("a", "b", "d")), ks)
	moved, to := 0, map[string]int{}
	for _, k := range ks {
		if before[k] == "c" {
			moved++
			to[after[k]]++
			continue
		}
		if before[k] != after[k] {
			t.Fatalf("key %s of %s moved to %s when c left", k, before[k], after[k])
		}
	}
	t.Logf("leave: %d keys of c moved: %v", moved, to)
	for _, id := range []string{"a", "b", "d"} {
		if dev := math.Abs(float64(to[id])-float64(moved)/3) / (float64(moved) / 3); dev > 0.10 {
			t.Errorf("%s took %d of c's %d keys, want a third ±10%%", id, to[id], moved)
		}
	}
}

// TestDeterministic: two rings built from the same nodes in any order, in
// any process, agree; the picks below are fixed so that a change of hash
// (which would split a mixed-version cluster) fails here.
func TestDeterministic(t *testing.T) {
	ks := keys(10_000)
	r1 := New(nodeList("a", "b", "c", "d", "e"))
	r2 := New(nodeList("e", "c", "a", "d", "b", "c"))
	if r2.Len() != 5 {
		t.Fatalf("duplicate id kept: %d nodes", r2.Len())
	}
	a1, a2 := assign(t, r1, ks), assign(t, r2, ks)
	for _, k := range ks {
		if a1[k] != a2[k] {
			t.Fatalf("key %s: %s on one ring, %s on the other", k, a1[k], a2[k])
		}
	}
	golden := map[string]string{
		"W0": "d", "W1": "c", "W2": "b", "W3": "c", "W4": "a",
		"W5": "e", "W6": "e", "W7": "c", "W8": "d", "W9": "a",
		"W01KXQ1ZV7Z5Y9DQ6Y5W3M8N2P4": "e", "W01KXQ1ZV7Z5Y9DQ6Y5W3M8N2P5": "d",
	}
	for k, want := range golden {
		if n, _ := r1.Lookup(k); n.ID != want {
			t.Errorf("Lookup(%q) = %s, want %s (the hash changed?)", k, n.ID, want)
		}
	}
}

func TestEmpty(t *testing.T) {
	var zero *Ring
	if _, ok := zero.Lookup("W1"); ok {
		t.Fatal("nil ring found a node")
	}
	if _, ok := New(nil).Lookup("W1"); ok {
		t.Fatal("empty ring found a node")
	}
	if n, ok := New(nodeList("only")).Lookup("W1"); !ok || n.ID != "only" {
		t.Fatalf("one-node ring: %v %v", n, ok)
	}
}

// fakeMembership hands the tracker lists by hand.
type fakeMembership struct {
	mu sync.Mutex
	fn func([]nodes.Node)
}

func (f *fakeMembership) Subscribe(fn func([]nodes.Node)) func() {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
	fn(nodeList("a"))
	return func() {
		f.mu.Lock()
		f.fn = nil
		f.mu.Unlock()
	}
}

func (f *fakeMembership) set(list []nodes.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fn != nil {
		f.fn(list)
	}
}

// TestTrackerRebuildsOnlyOnChange: the ring is swapped when the gateway
// nodes change, and only then (not for a node without the gateway role,
// not for the same list again).
func TestTrackerRebuildsOnlyOnChange(t *testing.T) {
	m := &fakeMembership{}
	tr := Track(m)
	defer tr.Close()
	if n, ok := tr.Lookup("W1"); !ok || n.ID != "a" || tr.Rebuilds() != 1 {
		t.Fatalf("first ring: %v %v, %d rebuilds", n, ok, tr.Rebuilds())
	}
	first := tr.Ring()
	apiOnly := nodes.Node{ID: "z", WSURL: "ws://z/", Roles: []string{"api"}}
	m.set(append(nodeList("a"), apiOnly))
	m.set(nodeList("a"))
	if tr.Ring() != first || tr.Rebuilds() != 1 {
		t.Fatalf("rebuilt without a gateway change (%d rebuilds)", tr.Rebuilds())
	}
	m.set(nodeList("b", "a"))
	if tr.Ring() == first || tr.Ring().Len() != 2 || tr.Rebuilds() != 2 {
		t.Fatalf("no rebuild on a join: %d nodes, %d rebuilds", tr.Ring().Len(), tr.Rebuilds())
	}
	moved := nodeList("a", "b")
	moved[1].WSURL = "wss://b.example/api/v1/gateway"
	m.set(moved)
	if n := tr.Ring().Nodes()[1]; n.WSURL != moved[1].WSURL || tr.Rebuilds() != 3 {
		t.Fatalf("a new ws_url was not taken: %v", n)
	}
	tr.Close()
	m.set(nil)
	if tr.Ring().Len() != 2 {
		t.Fatal("changed after Close")
	}
}

// TestTrackerConcurrentLookups: lookups during rebuilds always see a whole
// ring (run with -race).
func TestTrackerConcurrentLookups(t *testing.T) {
	m := &fakeMembership{}
	tr := Track(m)
	defer tr.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, ok := tr.Lookup("W1"); !ok {
					t.Error("lookup found nothing")
					return
				}
			}
		}()
	}
	for i := range 200 {
		m.set(nodeList("a", fmt.Sprintf("n%d", i%7)))
	}
	close(stop)
	wg.Wait()
}

// TestTrackerFollowsMembers: over a real bus, a node that starts joins the
// ring of another and leaves it when it closes.
func TestTrackerFollowsMembers(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus, err := natsbus.Start(natsbus.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	start := func(id string) *nodes.Members {
		m, err := nodes.Start(nodes.Config{Bus: bus, Self: node(id), Interval: 50 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := start("a")
	defer a.Close()
	tr := Track(a)
	defer tr.Close()
	b := start("b")
	waitFor(t, "b in a's ring", func() bool { return slices.ContainsFunc(tr.Ring().Nodes(), hasID("b")) })
	b.Close()
	waitFor(t, "b out of a's ring", func() bool { return tr.Ring().Len() == 1 })
}

func hasID(id string) func(nodes.Node) bool { return func(n nodes.Node) bool { return n.ID == id } }

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

// BenchmarkLookup: one lookup through the tracker's pointer, for rings of
// 3, 10 and 50 nodes.
func BenchmarkLookup(b *testing.B) {
	ks := make([]string, 1024)
	for i := range ks {
		ks[i] = parley.NewID(parley.PrefixWorkspace)
	}
	for _, n := range []int{3, 10, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("node-%d", i)
			}
			m := &fakeMembership{}
			tr := Track(m)
			defer tr.Close()
			m.set(nodeList(ids...))
			b.ReportAllocs()
			var sink int
			for i := 0; b.Loop(); i++ {
				nd, _ := tr.Lookup(ks[i&1023])
				sink += len(nd.ID)
			}
			_ = sink
		})
	}
}
