package querycache

import (
	"slices"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/natsbus"
)

// testLoadOnceUnderConcurrentFirstRequests: fifty first requests for a cold
// workspace make one directory read between them, and all get the answer.
func testLoadOnceUnderConcurrentFirstRequests(t *testing.T, bus *natsbus.Bus) {
	n := newNodeOnBus(t, bus)
	owner := mustUser(t, n.store, "owner", "Olive Owner")
	ws := mustWorkspace(t, n.store, owner)
	ann := mustUser(t, n.store, "ann", "Ann Lee")
	mustJoin(t, n.store, ws, owner, ann)

	n.count.gate = make(chan struct{})
	n.count.entered = make(chan struct{}, 1)
	const requests = 50
	var started, done sync.WaitGroup
	results := make([]*parley.SwitcherResult, requests)
	errs := make([]error, requests)
	for i := range requests {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			results[i], errs[i] = n.cache.Switcher(bg(t), owner.ID, ws.ID, "an", 10)
		}()
	}
	started.Wait()
	<-n.count.entered // the load is under way, held at the gate
	close(n.count.gate)
	done.Wait()

	if got := n.count.reads.Load(); got != 1 {
		t.Fatalf("%d directory reads for %d concurrent first requests, want 1", got, requests)
	}
	for i := range requests {
		noErr(t, errs[i])
		if got := handles(results[i].Users); !slices.Equal(got, []string{"ann"}) {
			t.Fatalf("request %d: users %v, want [ann]", i, got)
		}
	}
	if s := n.cache.Stats(); s.Loads != 1 || s.Workspaces != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// testUnknownWorkspace: an unknown workspace or a non-member is not found,
// and leaves nothing subscribed behind.
func testUnknownWorkspace(t *testing.T, bus *natsbus.Bus) {
	n := newNodeOnBus(t, bus)
	owner := mustUser(t, n.store, "owner", "Olive Owner")
	stranger := mustUser(t, n.store, "stranger", "Sam Stranger")
	ws := mustWorkspace(t, n.store, owner)

	_, err := n.cache.Switcher(bg(t), owner.ID, "Wnosuch", "", 10)
	wantCode(t, err, parley.ENOTFOUND)
	if n.cache.mux.(*natsbus.Mux).Topics() != 0 || n.cache.Stats().Workspaces != 0 {
		t.Fatalf("an unknown workspace stays subscribed: %d topics, %+v", n.cache.mux.(*natsbus.Mux).Topics(), n.cache.Stats())
	}
	_, err = n.cache.Switcher(bg(t), stranger.ID, ws.ID, "", 10)
	wantCode(t, err, parley.ENOTFOUND)
	_, err = n.cache.Directory(bg(t), stranger.ID, ws.ID, parley.UserQuery{})
	wantCode(t, err, parley.ENOTFOUND)
	_, err = n.cache.MentionSuggestions(bg(t), owner.ID, "Cnosuch", "", 10)
	wantCode(t, err, parley.ENOTFOUND)
	_, err = n.cache.ChannelHeader(bg(t), owner.ID, "Cnosuch")
	wantCode(t, err, parley.ENOTFOUND)
}

// testWarmThenEvicted: a workspace stays loaded while used and for WarmFor
// after its last use, then it is evicted, unsubscribed and its users
// dropped; the next query loads it again.
func testWarmThenEvicted(t *testing.T, bus *natsbus.Bus) {
	n := newNodeOnBus(t, bus, func(c *Config) { c.WarmFor = 10 * time.Minute })
	owner := mustUser(t, n.store, "owner", "Olive Owner")
	ws := mustWorkspace(t, n.store, owner)

	_, err := n.cache.Switcher(bg(t), owner.ID, ws.ID, "", 10)
	noErr(t, err)
	for range 3 {
		n.clock.Advance(6 * time.Minute)
		_, err := n.cache.Directory(bg(t), owner.ID, ws.ID, parley.UserQuery{})
		noErr(t, err)
		n.cache.sweep()
	}
	n.clock.Advance(9 * time.Minute)
	n.cache.sweep()
	if s := n.cache.Stats(); s.Workspaces != 1 || s.Users != 1 || n.count.reads.Load() != 1 {
		t.Fatalf("evicted while still warm: %+v, %d reads", s, n.count.reads.Load())
	}
	n.clock.Advance(2 * time.Minute)
	n.cache.sweep()
	if s := n.cache.Stats(); s.Workspaces != 0 || s.Users != 0 || n.cache.mux.(*natsbus.Mux).Topics() != 0 {
		t.Fatalf("not evicted after 11 idle minutes: %+v, %d topics", s, n.cache.mux.(*natsbus.Mux).Topics())
	}
	_, err = n.cache.Switcher(bg(t), owner.ID, ws.ID, "", 10)
	noErr(t, err)
	if got := n.count.reads.Load(); got != 2 {
		t.Fatalf("%d directory reads, want 2 (one after the eviction)", got)
	}
}
