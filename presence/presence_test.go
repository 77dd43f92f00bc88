package presence

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// Single-node behaviour on a fake clock: the tests move the clock and run a
// sweep themselves (the tracker's own sweeper runs too, which is harmless).

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// recorder collects watcher calls as "user=status".
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) fn(user, status string) {
	r.mu.Lock()
	r.got = append(r.got, user+"="+status)
	r.mu.Unlock()
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// of returns the statuses reported for user, in order.
func (r *recorder) of(user string) []string {
	var out []string
	for _, c := range r.calls() {
		if len(c) > len(user) && c[:len(user)+1] == user+"=" {
			out = append(out, c[len(user)+1:])
		}
	}
	return out
}

func (r *recorder) last(user string) string {
	s := r.of(user)
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
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

// waitStatus waits until user's last reported status is want.
func waitStatus(t *testing.T, r *recorder, user, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s to be reported %s (reports %v)", user, want, r.of(user)), func() bool {
		return r.last(user) == want
	})
}

// settle waits until the dispatcher has nothing left to deliver, so that a
// test may check that something was not reported.
func settle(t *testing.T, tr *Tracker) {
	t.Helper()
	waitFor(t, "dispatcher idle", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.notes) == 0 && len(tr.wake) == 0
	})
	time.Sleep(time.Millisecond) // a batch already taken may still be running its calls
}

func newLocal(t *testing.T, clk *fakeClock) *Tracker {
	t.Helper()
	tr, err := New(Config{Now: clk.Now, Grace: 30 * time.Second, AwayAfter: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

func wantReports(t *testing.T, r *recorder, user string, want ...string) {
	t.Helper()
	if got := r.of(user); !slices.Equal(got, want) {
		t.Fatalf("reports for %s = %v, want %v", user, got, want)
	}
}

func TestOnlineUntilLastDevicePlusGrace(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	var r recorder
	defer tr.Watch([]string{"U1"}, r.fn)()
	waitStatus(t, &r, "U1", Offline)

	tr.Connect("U1", "phone")
	tr.Connect("U1", "laptop")
	waitStatus(t, &r, "U1", Online)

	tr.Disconnect("U1", "phone")
	clk.Add(time.Minute)
	tr.Activity("U1", "laptop")
	tr.sweep()
	if s := tr.Status("U1"); s != Online {
		t.Fatalf("with one device left: %s", s)
	}

	tr.Disconnect("U1", "laptop")
	clk.Add(29 * time.Second)
	tr.sweep()
	if s := tr.Status("U1"); s != Online {
		t.Fatalf("within grace: %s", s)
	}
	clk.Add(time.Second)
	tr.sweep()
	waitStatus(t, &r, "U1", Offline)
	settle(t, tr)
	wantReports(t, &r, "U1", Offline, Online, Offline)
	if n := len(tr.local); n != 0 {
		t.Fatalf("%d local records left after offline", n)
	}
}

func TestReconnectWithinGraceDoesNotFlap(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	var r recorder
	defer tr.Watch([]string{"U1"}, r.fn)()
	tr.Connect("U1", "s1")
	waitStatus(t, &r, "U1", Online)

	tr.Disconnect("U1", "s1")
	clk.Add(20 * time.Second)
	tr.sweep()
	tr.Connect("U1", "s2") // back on another session 20 s later
	clk.Add(20 * time.Second)
	tr.sweep() // the first grace deadline passes: void
	if s := tr.Status("U1"); s != Online {
		t.Fatalf("after reconnect: %s", s)
	}

	// Grace counts from the last disconnect, not the first.
	tr.Disconnect("U1", "s2")
	clk.Add(29 * time.Second)
	tr.sweep()
	if s := tr.Status("U1"); s != Online {
		t.Fatalf("29 s after the second disconnect: %s", s)
	}
	clk.Add(2 * time.Second)
	tr.sweep()
	waitStatus(t, &r, "U1", Offline)
	settle(t, tr)
	wantReports(t, &r, "U1", Offline, Online, Offline)
}

func TestAwayAfterInactivityAndBack(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	var r recorder
	defer tr.Watch([]string{"U1"}, r.fn)()
	tr.Connect("U1", "s1")
	waitStatus(t, &r, "U1", Online)

	clk.Add(9 * time.Minute)
	tr.sweep()
	tr.Activity("U1", "s1") // resets the clock
	clk.Add(9 * time.Minute)
	tr.sweep()
	if s := tr.Status("U1"); s != Online {
		t.Fatalf("9 min after activity: %s", s)
	}
	clk.Add(time.Minute) // heartbeats only: 10 min without activity
	tr.sweep()
	waitStatus(t, &r, "U1", Away)

	tr.Activity("U1", "s1")
	waitStatus(t, &r, "U1", Online)
	settle(t, tr)
	wantReports(t, &r, "U1", Offline, Online, Away, Online)

	// A busy user keeps one away deadline in the heap, not one per action.
	for range 100 {
		tr.Activity("U1", "s1")
	}
	tr.mu.Lock()
	n := len(tr.deadlines)
	tr.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d deadlines queued for one user", n)
	}
}

func TestManualAway(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	var r recorder
	defer tr.Watch([]string{"U1"}, r.fn)()
	tr.Connect("U1", "s1")
	waitStatus(t, &r, "U1", Online)

	tr.SetAway("U1", true)
	waitStatus(t, &r, "U1", Away)
	tr.Activity("U1", "s1")
	tr.Connect("U1", "s2")
	settle(t, tr)
	if s := tr.Status("U1"); s != Away {
		t.Fatalf("set away, then active: %s", s)
	}

	tr.SetAway("U1", false)
	waitStatus(t, &r, "U1", Online)
	settle(t, tr)
	wantReports(t, &r, "U1", Offline, Online, Away, Online)

	// Set away while offline: away as soon as they connect.
	tr.SetAway("U2", true)
	if s := tr.Status("U2"); s != Offline {
		t.Fatalf("set away while offline: %s", s)
	}
	tr.Connect("U2", "s3")
	if s := tr.Status("U2"); s != Away {
		t.Fatalf("set away, then connected: %s", s)
	}
}

func TestWatchersGetOnlyTheirUsers(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	tr.Connect("B", "sb")
	var ra, rb, rab recorder
	defer tr.Watch([]string{"A"}, ra.fn)()
	defer tr.Watch([]string{"B", "B", ""}, rb.fn)()
	defer tr.Watch([]string{"A", "B"}, rab.fn)()
	waitStatus(t, &ra, "A", Offline)
	waitStatus(t, &rb, "B", Online) // initial status, not a change
	waitStatus(t, &rab, "B", Online)

	tr.Connect("A", "sa")
	waitStatus(t, &ra, "A", Online)
	waitStatus(t, &rab, "A", Online)
	settle(t, tr)
	if got := rb.calls(); !slices.Equal(got, []string{"B=online"}) {
		t.Fatalf("watcher of B got %v", got)
	}
	if got := ra.calls(); !slices.Equal(got, []string{"A=offline", "A=online"}) {
		t.Fatalf("watcher of A got %v", got)
	}
	if s := tr.Status("C"); s != Offline {
		t.Fatalf("unknown user: %s", s)
	}
}

func TestWatcherSetReplacesUsers(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	var r recorder
	w := tr.NewWatcher(r.fn)
	defer w.Close()
	w.Set([]string{"A", "B"})
	waitFor(t, "two initial statuses", func() bool { return len(r.calls()) == 2 })

	w.Set([]string{"B", "C"})
	waitStatus(t, &r, "C", Offline)
	tr.Connect("A", "s1") // no longer watched
	tr.Connect("B", "s2")
	waitStatus(t, &r, "B", Online)
	settle(t, tr)
	wantReports(t, &r, "A", Offline)
	wantReports(t, &r, "B", Offline, Online) // kept: not told again on Set
	tr.mu.Lock()
	_, watchedA := tr.watched["A"]
	tr.mu.Unlock()
	if watchedA {
		t.Fatal("A still watched after Set left it out")
	}

	w.Close()
	tr.Connect("C", "s3")
	settle(t, tr)
	wantReports(t, &r, "C", Offline)
	tr.mu.Lock()
	n := len(tr.watched)
	tr.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d users still watched after Close", n)
	}
}

func TestCallbackMayCallTracker(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	done := make(chan string, 1)
	var w *Watcher
	w = tr.NewWatcher(func(user, status string) {
		// Calls back in: no lock is held while fn runs.
		done <- tr.Status(user)
		w.Close()
	})
	w.Set([]string{"A"})
	select {
	case s := <-done:
		if s != Offline {
			t.Fatalf("status from inside the callback: %s", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no callback")
	}
}

func TestConfigChecks(t *testing.T) {
	if _, err := New(Config{NodeID: "a.b"}); err == nil { // a dot would split the subject
		t.Fatal("a node id with a dot was accepted")
	}
	tr, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	tr.Close()
	tr.Connect("U", "s") // after Close: ignored
	if s := tr.Status("U"); s != Offline {
		t.Fatalf("after close: %s", s)
	}
	tr.Watch([]string{"U"}, func(string, string) { t.Error("called after close") })()
}
