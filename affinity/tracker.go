package affinity

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"parley/nodes"
)

// GatewayRole is the role a node announces when it serves the WebSocket
// gateway; only such nodes are in a Tracker's ring.
const GatewayRole = "gateway"

// Membership is the live node list to follow; *nodes.Members implements
// it. Subscribe calls fn with the list at once and after every change, one
// call at a time.
type Membership interface {
	Subscribe(fn func([]nodes.Node)) (cancel func())
}

var _ Membership = (*nodes.Members)(nil)

// Tracker keeps a Ring over the live gateway nodes (those announcing
// GatewayRole and a ws_url). It rebuilds the ring only when that set
// changes and publishes it through one atomic pointer: Lookup never takes
// a lock and never waits for a rebuild.
type Tracker struct {
	cur atomic.Pointer[Ring] // never nil after Track

	mu       sync.Mutex // guards cancel and rebuilds
	cancel   func()
	closed   bool
	rebuilds int // how many rings were built; guarded by mu
}

// Track follows m until Close. The ring is built before Track returns.
func Track(m Membership) *Tracker {
	t := &Tracker{}
	t.cur.Store(New(nil))
	cancel := m.Subscribe(t.update)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		cancel()
		return t
	}
	t.cancel = cancel
	t.mu.Unlock()
	return t
}

// update is the membership callback: a new ring if the gateway nodes
// changed, else nothing.
func (t *Tracker) update(live []nodes.Node) {
	gw := make([]nodes.Node, 0, len(live))
	for _, n := range live {
		if n.WSURL != "" && slices.Contains(n.Roles, GatewayRole) {
			gw = append(gw, n)
		}
	}
	slices.SortStableFunc(gw, func(a, b nodes.Node) int { return strings.Compare(a.ID, b.ID) })
	gw = slices.CompactFunc(gw, func(a, b nodes.Node) bool { return a.ID == b.ID })
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.cur.Load().sameNodes(gw) {
		return
	}
	t.cur.Store(New(gw))
	t.rebuilds++
}

// Lookup returns the gateway node that key maps to; false when no gateway
// node is live.
func (t *Tracker) Lookup(key string) (nodes.Node, bool) {
	return t.cur.Load().Lookup(key)
}

// Ring returns the current snapshot.
func (t *Tracker) Ring() *Ring { return t.cur.Load() }

// Rebuilds is how many times the ring was rebuilt since Track (the first
// build included when any gateway node was live).
func (t *Tracker) Rebuilds() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rebuilds
}

// Close stops following the membership; the last ring stays readable.
func (t *Tracker) Close() {
	t.mu.Lock()
	cancel := t.cancel
	t.cancel, t.closed = nil, true
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
