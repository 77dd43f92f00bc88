package querycache

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
)

// The hit rate's two counters: the first query of a workspace misses (and
// loads it), the next ones hit, also through the channel index; the series
// are in the registry.
func TestLookupHitsAndMisses(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := newNode(t, func(c *Config) { c.Registerer = reg })
	owner := mustUser(t, n.store, "owner", "Olive Owner")
	ws := mustWorkspace(t, n.store, owner)
	ch := mustChannel(t, n.store, ws, owner, "lobby", parley.KindPublic)

	hits, misses := n.cache.metrics.lookups.WithLabelValues("hit"), n.cache.metrics.lookups.WithLabelValues("miss")
	_, err := n.cache.Switcher(bg(t), owner.ID, ws.ID, "", 10)
	noErr(t, err)
	if h, m := testutil.ToFloat64(hits), testutil.ToFloat64(misses); h != 0 || m != 1 {
		t.Fatalf("after the first query: %v hits, %v misses; want 0 and 1", h, m)
	}
	_, err = n.cache.Directory(bg(t), owner.ID, ws.ID, parley.UserQuery{})
	noErr(t, err)
	_, err = n.cache.ChannelHeader(bg(t), owner.ID, ch.ID)
	noErr(t, err)
	if h, m := testutil.ToFloat64(hits), testutil.ToFloat64(misses); h != 2 || m != 1 {
		t.Fatalf("after two warm queries: %v hits, %v misses; want 2 and 1", h, m)
	}
	if got := n.count.reads.Load(); got != 1 {
		t.Fatalf("%d directory reads, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "parley_querycache_lookups_total"); err != nil || n != 2 {
		t.Fatalf("parley_querycache_lookups_total: %d series, err %v; want hit and miss", n, err)
	}
}
