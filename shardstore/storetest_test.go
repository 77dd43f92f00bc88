package shardstore_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/storetest"
)

// TestStoreSuite runs the store contract suite against the router over
// three PostgreSQL shards: each test's workspaces are placed by the
// catalogue's policy, which spreads them over the three. The shards'
// relays stay quiet, as in sqlstore's own run of the suite.
func TestStoreSuite(t *testing.T) {
	storetest.Run(t, func(tb testing.TB, pub parley.EventPublisher) parley.Store {
		sharedShards(tb)
		c := &cluster{region: shared.region, reg: prometheus.NewRegistry(), dir: shared.dir,
			shards: shared.shards, dsns: shared.dsns, quietRelay: true}
		return c.open(tb, pub).r
	})
}
