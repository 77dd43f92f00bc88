package presence

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/internal/bustest"
	"parley/natsbus"
	"parley/nodes"
)

// Several trackers ("nodes") on one bus, on the real clock with short
// durations.

const (
	testGrace     = 300 * time.Millisecond
	testHeartbeat = 50 * time.Millisecond
	testExpiry    = 200 * time.Millisecond
)

// TestCluster runs every test of trackers between nodes over each kind of
// bus (bustest): the embedded NATS and the machine's NATS, through the same
// seam.
func TestCluster(t *testing.T) {
	suite := []struct {
		name string
		fn   func(*testing.T, *natsbus.Bus)
	}{
		{"CrossNodeInitialStatusAndChanges", testCrossNodeInitialStatusAndChanges},
		{"DevicesOnTwoNodes", testDevicesOnTwoNodes},
		{"NodeDiesWithoutGoodbye", testNodeDiesWithoutGoodbye},
		{"CrashedNodesUsersReconnectElsewhereWithoutFlap", testCrashedNodesUsersReconnectElsewhereWithoutFlap},
		{"GracefulCloseKeepsUsersForGrace", testGracefulCloseKeepsUsersForGrace},
		{"ManualAwayAcrossNodes", testManualAwayAcrossNodes},
		{"PresenceTopicSubscriptionIsRefCounted", testPresenceTopicSubscriptionIsRefCounted},
		{"MembershipDecidesLiveness", testMembershipDecidesLiveness},
		{"WatchRightAfterStart", testWatchRightAfterStart},
		{"QueryAnsweredByAllNodesCompletesBeforeTimeout", testQueryAnsweredByAllNodesCompletesBeforeTimeout},
		{"WithNodesMembership", testWithNodesMembership},
		{"NodeMetLateIsAsked", testNodeMetLateIsAsked},
		{"OnlineUsersAcrossNodes", testOnlineUsersAcrossNodes},
	}
	for _, kind := range bustest.Kinds() {
		t.Run(kind.Name, func(t *testing.T) {
			kind.Require(t)
			for _, tc := range suite {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, kind.Start(t)) })
			}
		})
	}
}

func clusterConfig(bus *natsbus.Bus, node string) Config {
	return Config{
		Bus:          bus,
		NodeID:       node,
		Grace:        testGrace,
		AwayAfter:    time.Hour,
		Heartbeat:    testHeartbeat,
		NodeExpiry:   testExpiry,
		QueryTimeout: 2 * time.Second, // long: the tests must not pass by timing out
	}
}

func mustNode(t *testing.T, cfg Config) *Tracker {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// mustNodes starts trackers n1, n2… on bus and waits until each knows all
// the others.
func mustNodes(t *testing.T, bus *natsbus.Bus, n int) []*Tracker {
	t.Helper()
	var trs []*Tracker
	for i := 1; i <= n; i++ {
		trs = append(trs, mustNode(t, clusterConfig(bus, "n"+string(rune('0'+i)))))
	}
	for _, tr := range trs {
		waitFor(t, tr.node+" meets every node", func() bool { return tr.livePeerCount() == n-1 })
	}
	return trs
}

func (t *Tracker) livePeerCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.livePeers())
}

func testCrossNodeInitialStatusAndChanges(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 2)
	n1, n2 := nodes[0], nodes[1]

	n1.Connect("U1", "s1")
	var r recorder
	defer n2.Watch([]string{"U1", "U2"}, r.fn)()
	// The first report is the aggregate over both nodes: online, with no
	// "offline" before it.
	waitStatus(t, &r, "U1", Online)
	waitStatus(t, &r, "U2", Offline)
	if s := n2.Status("U1"); s != Online {
		t.Fatalf("n2 Status of a user on n1: %s", s)
	}

	n1.Connect("U2", "s2")
	waitStatus(t, &r, "U2", Online)

	start := time.Now()
	n1.Disconnect("U2", "s2")
	waitStatus(t, &r, "U2", Offline)
	if d := time.Since(start); d < testGrace {
		t.Fatalf("offline on n2 %v after the last session closed, before the grace of %v", d, testGrace)
	}
	settle(t, n2)
	wantReports(t, &r, "U1", Online)
	wantReports(t, &r, "U2", Offline, Online, Offline)
}

func testDevicesOnTwoNodes(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	var r recorder
	defer n3.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Offline)

	n1.Connect("U1", "phone")
	n2.Connect("U1", "laptop")
	waitStatus(t, &r, "U1", Online)
	n1.Disconnect("U1", "phone")
	// n1 reports offline after its grace; n2 still says online.
	waitFor(t, "n1 to let U1 go", func() bool { return n1.Status("U1") == Offline })
	settle(t, n3)
	if s := n3.Status("U1"); s != Online {
		t.Fatalf("with the laptop still on n2: %s", s)
	}

	// The phone comes back on n3 itself, the laptop leaves n2: no flap.
	n3.Connect("U1", "phone2")
	n2.Disconnect("U1", "laptop")
	waitFor(t, "n2 to let U1 go", func() bool { return n2.Status("U1") == Offline })
	settle(t, n3)
	n3.Disconnect("U1", "phone2")
	waitStatus(t, &r, "U1", Offline)
	settle(t, n3)
	wantReports(t, &r, "U1", Offline, Online, Offline)
}

func testNodeDiesWithoutGoodbye(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 2)
	n1, n2 := nodes[0], nodes[1]
	n1.Connect("U1", "s1")
	var r recorder
	defer n2.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)

	start := time.Now()
	n1.stop(false) // a crash: no bye, no more heartbeats
	waitStatus(t, &r, "U1", Offline)
	took := time.Since(start)
	// Silent for NodeExpiry, then Grace; a heartbeat and a sweep tick of slack.
	bound := testExpiry + testGrace + testHeartbeat + 500*time.Millisecond
	if took < testGrace || took > bound {
		t.Fatalf("offline %v after the crash, want between %v and %v", took, testGrace, bound)
	}
	if n := n2.livePeerCount(); n != 0 {
		t.Fatal("n2 still counts the dead node live")
	}
}

func testCrashedNodesUsersReconnectElsewhereWithoutFlap(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.Connect("U1", "s1")
	var r recorder
	defer n3.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)

	n1.stop(false)
	n2.Connect("U1", "s1-resumed")
	waitFor(t, "n1 declared dead and purged on n3", func() bool {
		n3.mu.Lock()
		defer n3.mu.Unlock()
		return !n3.peers["n1"].live && len(n3.purges) == 0
	})
	settle(t, n3)
	wantReports(t, &r, "U1", Online)
}

func testGracefulCloseKeepsUsersForGrace(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 2)
	n1, n2 := nodes[0], nodes[1]
	n1.Connect("U1", "s1")
	var r recorder
	defer n2.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)
	start := time.Now()
	n1.Close()
	waitStatus(t, &r, "U1", Offline)
	if d := time.Since(start); d < testGrace || d > testGrace+time.Second {
		t.Fatalf("offline %v after the node closed, want about %v", d, testGrace)
	}
}

func testManualAwayAcrossNodes(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 2)
	n1, n2 := nodes[0], nodes[1]
	n1.Connect("U1", "s1")
	var r recorder
	defer n2.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)

	n2.SetAway("U1", true) // set where the user has no session
	waitStatus(t, &r, "U1", Away)
	waitFor(t, "n1 to learn the manual away", func() bool { return n1.Status("U1") == Away })
	n1.Activity("U1", "s1")
	n1.SetAway("U1", false)
	waitStatus(t, &r, "U1", Online)

	// A node that starts later learns who is set away.
	n2.SetAway("U2", true)
	n3 := mustNode(t, clusterConfig(bus, "n3"))
	waitFor(t, "n3 to learn the manual-away set", func() bool {
		n3.mu.Lock()
		defer n3.mu.Unlock()
		_, ok := n3.manual["U2"]
		return ok
	})
	n3.Connect("U2", "s2")
	if s := n3.Status("U2"); s != Away {
		t.Fatalf("user set away, connected on a new node: %s", s)
	}
}

// countingSubscribe wraps a tracker's bus subscriptions and counts them.
type countingSubscribe struct {
	mu     sync.Mutex
	total  map[string]int
	active map[string]int
}

func countSubscriptions(tr *Tracker) *countingSubscribe {
	c := &countingSubscribe{total: map[string]int{}, active: map[string]int{}}
	inner := tr.subscribe
	tr.mu.Lock()
	tr.subscribe = func(topic string, fn func(parley.Event)) (func() error, error) {
		unsub, err := inner(topic, fn)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.total[topic]++
		c.active[topic]++
		c.mu.Unlock()
		return func() error {
			c.mu.Lock()
			c.active[topic]--
			c.mu.Unlock()
			return unsub()
		}, nil
	}
	tr.mu.Unlock()
	return c
}

func (c *countingSubscribe) counts(topic string) (total, active int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total[topic], c.active[topic]
}

func testPresenceTopicSubscriptionIsRefCounted(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 2)
	n1, n2 := nodes[0], nodes[1]
	subs := countSubscriptions(n2)
	topic := parley.TopicPresence("U1")

	var r1, r2, r3 recorder
	c1 := n2.Watch([]string{"U1"}, r1.fn)
	c2 := n2.Watch([]string{"U1"}, r2.fn)
	c3 := n2.Watch([]string{"U1", "U2"}, r3.fn)
	waitStatus(t, &r3, "U2", Offline)
	if total, active := subs.counts(topic); total != 1 || active != 1 {
		t.Fatalf("three watches of U1: %d subscriptions made, %d active; want 1, 1", total, active)
	}
	if got := testutil.ToFloat64(n2.m.watchedUsers); got != 2 {
		t.Fatalf("watched users gauge = %v, want 2", got)
	}

	c1()
	c2()
	n1.Connect("U1", "s1") // still delivered: one watch is left
	waitStatus(t, &r3, "U1", Online)
	if _, active := subs.counts(topic); active != 1 {
		t.Fatalf("one watch left: %d subscriptions active", active)
	}

	c3()
	if total, active := subs.counts(topic); total != 1 || active != 0 {
		t.Fatalf("no watch left: %d subscriptions made, %d active; want 1, 0", total, active)
	}
	if _, active := subs.counts(parley.TopicPresence("U2")); active != 0 {
		t.Fatal("U2 still subscribed")
	}

	// Watched again: subscribed again, and the first status is current.
	var r4 recorder
	defer n2.Watch([]string{"U1"}, r4.fn)()
	waitStatus(t, &r4, "U1", Online)
	if total, active := subs.counts(topic); total != 2 || active != 1 {
		t.Fatalf("watched again: %d subscriptions made, %d active; want 2, 1", total, active)
	}
	settle(t, n2)
	if got := r1.calls(); !slices.Equal(got, []string{"U1=offline"}) {
		t.Fatalf("cancelled watcher got %v", got)
	}
}

// fakeMembers is a Membership the test drives.
type fakeMembers struct {
	mu   sync.Mutex
	live []nodes.Node
	subs map[int]func([]nodes.Node)
	next int
}

func newFakeMembers(ids ...string) *fakeMembers {
	f := &fakeMembers{subs: map[int]func([]nodes.Node){}}
	f.live = nodeList(ids)
	return f
}

func nodeList(ids []string) []nodes.Node {
	var out []nodes.Node
	for _, id := range ids {
		out = append(out, nodes.Node{ID: id})
	}
	return out
}

func (f *fakeMembers) Live() []nodes.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.live)
}

func (f *fakeMembers) Subscribe(fn func([]nodes.Node)) func() {
	f.mu.Lock()
	f.next++
	id := f.next
	f.subs[id] = fn
	live := slices.Clone(f.live)
	f.mu.Unlock()
	fn(live)
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

func (f *fakeMembers) set(ids ...string) {
	f.mu.Lock()
	f.live = nodeList(ids)
	var fns []func([]nodes.Node)
	for _, fn := range f.subs {
		fns = append(fns, fn)
	}
	f.mu.Unlock()
	for _, fn := range fns {
		fn(nodeList(ids))
	}
}

var _ Membership = (*nodes.Members)(nil)

func testMembershipDecidesLiveness(t *testing.T, bus *natsbus.Bus) {
	members := newFakeMembers("n1", "n2")
	cfg1, cfg2 := clusterConfig(bus, "n1"), clusterConfig(bus, "n2")
	cfg1.Membership, cfg2.Membership = members, members
	n1, n2 := mustNode(t, cfg1), mustNode(t, cfg2)
	if n1.hbEvery != 0 {
		t.Fatal("heartbeats sent although Membership is given")
	}
	n1.Connect("U1", "s1")
	var r recorder
	defer n2.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)

	// Members stay alive however long they are silent.
	time.Sleep(2 * testExpiry)
	if s := n2.Status("U1"); s != Online {
		t.Fatalf("silent member's user: %s", s)
	}

	start := time.Now()
	members.set("n2") // n1 dropped out of the membership
	waitStatus(t, &r, "U1", Offline)
	if d := time.Since(start); d < testGrace {
		t.Fatalf("offline %v after n1 left the membership, before the grace of %v", d, testGrace)
	}
}

func testWatchRightAfterStart(t *testing.T, bus *natsbus.Bus) {
	n1 := mustNode(t, clusterConfig(bus, "n1"))
	n1.Connect("U1", "s1")
	// n2 watches before it has heard of n1: it must still report the
	// aggregate first, not offline.
	n2 := mustNode(t, clusterConfig(bus, "n2"))
	var r recorder
	defer n2.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)
	settle(t, n2)
	wantReports(t, &r, "U1", Online)
}

func testQueryAnsweredByAllNodesCompletesBeforeTimeout(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 3)
	nodes[0].Connect("U1", "s1")
	start := time.Now()
	var r recorder
	defer nodes[2].Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("first status after %v: the query waited for its timeout", d)
	}
	if n := testutil.ToFloat64(nodes[2].m.queryTimeouts); n != 0 {
		t.Fatalf("%v query timeouts", n)
	}
}

func testWithNodesMembership(t *testing.T, bus *natsbus.Bus) {
	start := func(id string) (*nodes.Members, *Tracker) {
		m, err := nodes.Start(nodes.Config{Bus: bus, Self: nodes.Node{ID: id}, Interval: testHeartbeat})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		cfg := clusterConfig(bus, id)
		cfg.Membership = m
		return m, mustNode(t, cfg)
	}
	m1, n1 := start("n1")
	_, n2 := start("n2")
	waitFor(t, "n2 to see n1 live", func() bool { return n2.livePeerCount() == 1 })

	n1.Connect("U1", "s1")
	var r recorder
	defer n2.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Online)

	began := time.Now()
	n1.stop(false) // the tracker dies; the membership says goodbye
	m1.Close()
	waitStatus(t, &r, "U1", Offline)
	if d := time.Since(began); d < testGrace || d > testGrace+time.Second {
		t.Fatalf("offline %v after n1 left, want about %v", d, testGrace)
	}
}

func testNodeMetLateIsAsked(t *testing.T, bus *natsbus.Bus) {
	m1, m2 := newFakeMembers("n1"), newFakeMembers("n2")
	cfg1, cfg2 := clusterConfig(bus, "n1"), clusterConfig(bus, "n2")
	cfg1.Membership, cfg2.Membership = m1, m2
	n1 := mustNode(t, cfg1)
	n1.Connect("U1", "s1")
	n2 := mustNode(t, cfg2)
	var r recorder
	defer n2.Watch([]string{"U1"}, r.fn)()
	// n2's membership does not list n1, but n1 answers the query.
	waitStatus(t, &r, "U1", Online)
	// n1 is silent and still not a member: after NodeExpiry and Grace n2
	// lets its users go.
	waitStatus(t, &r, "U1", Offline)
	// The membership catches up: n2 asks n1 again.
	m2.set("n1", "n2")
	waitStatus(t, &r, "U1", Online)
	settle(t, n2)
	wantReports(t, &r, "U1", Online, Offline, Online)
}
