package querycache

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"parley"
	"parley/internal/bustest"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/sqlstore"
)

// TestMultiNodeFreshness: two nodes, each with its own store connection,
// bus and cache, the buses joined (two clustered embedded servers, or two
// connections to the machine's NATS) and the store shared. A change written
// through node 1 is in node 2's switcher within a second, and the other way
// round.
func TestMultiNodeFreshness(t *testing.T) {
	for _, kind := range bustest.Kinds() {
		t.Run(kind.Name, func(t *testing.T) {
			kind.Require(t)
			for _, d := range []sqlstore.Dialect{sqlstore.SQLite, sqlstore.Postgres} {
				t.Run(string(d), func(t *testing.T) { testMultiNodeFreshness(t, kind, d) })
			}
		})
	}
}

func testMultiNodeFreshness(t *testing.T, kind bustest.Kind, d sqlstore.Dialect) {
	b1, b2 := kind.Pair(t)
	where := filepath.Join(t.TempDir(), "shared.db")
	if d == sqlstore.Postgres {
		where = testpg.New(t)
	}
	s1 := openStore(t, d, where, b1)
	s2 := openStore(t, d, where, b2)
	n1 := newNodeOn(t, s1, b1)
	n2 := newNodeOn(t, s2, b2)

	owner := mustUser(t, s1, "owner", "Olive Owner")
	ann := mustUser(t, s1, "ann", "Ann Lee")
	ws := mustWorkspace(t, s1, owner)
	mustJoin(t, s1, ws, owner, ann)
	for _, n := range []*node{n1, n2} {
		users, _ := switcher(t, n.cache, owner.ID, ws.ID, "ann")
		if !slices.Equal(users, []string{"ann"}) {
			t.Fatalf("warm-up switcher: %v", users)
		}
	}
	// A subscription reaches the other server of the cluster a moment
	// after its own: wait until each node hears the other's probes.
	waitRouted(t, b1, n2, ws.ID)
	waitRouted(t, b2, n1, ws.ID)

	// Ann renames herself through node 1; node 2 shows it.
	name := "Ann Zephyr"
	start := time.Now()
	_, err := s1.UpdateMe(bg(t), ann.ID, parley.UserPatch{Name: &name})
	noErr(t, err)
	waitFor(t, "node 2's switcher to find the new name", time.Second, func() bool {
		users, _ := switcher(t, n2.cache, owner.ID, ws.ID, "zephyr")
		return slices.Equal(users, []string{"ann"})
	})
	t.Logf("%s: a rename on node 1 reached node 2's switcher in %v", d, time.Since(start))

	// A private channel made through node 2 shows on node 1 to its
	// member only.
	start = time.Now()
	mustChannel(t, s2, ws, ann, "zephyr-notes", parley.KindPrivate)
	waitFor(t, "node 1's switcher to find the new channel", time.Second, func() bool {
		_, chs := switcher(t, n1.cache, ann.ID, ws.ID, "zephyr")
		return slices.Equal(chs, []string{"zephyr-notes"})
	})
	t.Logf("%s: a channel made on node 2 reached node 1's switcher in %v", d, time.Since(start))
	if _, chs := switcher(t, n1.cache, owner.ID, ws.ID, "zephyr"); len(chs) != 0 {
		t.Fatalf("a non-member finds the private channel on node 1: %v", chs)
	}
	for _, n := range []*node{n1, n2} {
		if got := n.count.reads.Load(); got != 1 {
			t.Errorf("a node read the directory %d times; the events should keep one load fresh", got)
		}
	}
}

// waitRouted publishes probes on the workspace's directory topic from bus
// until node n's cache has received one.
func waitRouted(t *testing.T, from *natsbus.Bus, n *node, workspaceID string) {
	t.Helper()
	before := n.cache.Stats().Events
	probe := parley.Event{WorkspaceID: workspaceID, Type: "probe", Topics: []string{parley.TopicDirectory(workspaceID)}}
	waitFor(t, "the other node's subscription to be routed", 10*time.Second, func() bool {
		from.Publish([]parley.Event{probe})
		from.Flush()
		return n.cache.Stats().Events > before
	})
}
