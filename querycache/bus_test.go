package querycache

import (
	"testing"

	"parley/internal/bustest"
	"parley/natsbus"
)

// TestOverBuses runs the tests of the cache that depend on the bus (its
// mux subscriptions and the events that keep it fresh) over each kind of
// bus (bustest): the embedded NATS and the machine's NATS, through the same
// seam. TestMultiNodeFreshness does the same for two nodes.
func TestOverBuses(t *testing.T) {
	suite := []struct {
		name string
		fn   func(*testing.T, *natsbus.Bus)
	}{
		{"EventsApplied", testEventsApplied},
		{"BufferedDuringLoad", testBufferedDuringLoad},
		{"OutOfOrderMemberEventReloads", testOutOfOrderMemberEventReloads},
		{"SharedUsersHeldOnce", testSharedUsersHeldOnce},
		{"LoadOnceUnderConcurrentFirstRequests", testLoadOnceUnderConcurrentFirstRequests},
		{"UnknownWorkspace", testUnknownWorkspace},
		{"WarmThenEvicted", testWarmThenEvicted},
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
