package shardstore_test

import (
	"testing"

	"parley"
	"parley/storetest"
)

// TestStoreSuite runs the store contract suite against the router over
// three PostgreSQL shards: each test's workspaces are placed by the
// catalogue's policy, which spreads them over the three.
func TestStoreSuite(t *testing.T) {
	storetest.Run(t, func(tb testing.TB, pub parley.EventPublisher) parley.Store {
		return newCluster(tb, pub).r
	})
}
