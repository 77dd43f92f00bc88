// Package affinity gives workspace affinity: it maps a key (a workspace id) to
// one of the cluster's live gateway nodes, the same node on every node that
// sees the same membership, so that a workspace's sessions and its query
// cache gather on one node.
//
// # Rendezvous hashing, not a ring of virtual nodes
//
// Each node scores a key with mix(hash(key) ^ hash(node id)); the highest
// score wins. We chose it over consistent hashing with virtual nodes:
//
//   - Keys moved. Rendezvous moves the minimum: when a node joins, exactly
//     the keys it now wins move (1/(n+1) of them in expectation) and all of
//     them move to it; when a node leaves, only its keys move, spread
//     evenly over the others. A virtual-node ring moves the same share on
//     average, but which share depends on where the points fall.
//   - Balance. Rendezvous is balanced up to the randomness of the keys
//     themselves (±0.5% of a third for 100,000 keys over 3 nodes). A ring
//     needs a hundred or more points per node to get within ±10%, and the
//     error never goes below what its points give.
//   - Lookup cost. Rendezvous is O(n): one hash of the key, then one
//     multiply-xorshift per node, about 1–2 ns each. A ring is O(log(n·v))
//     with a binary search over n·v points that falls out of the CPU cache
//     as n grows. Gateway nodes number in the tens, where rendezvous is the
//     faster of the two (see docs/benchmarks.md, "Affinity ring"); for
//     hundreds of nodes a ring (or a two-level rendezvous) would win.
//
// The hashes are fixed (a word-at-a-time hash and a fixed mixer, no
// per-process seed):
// every node, and every version that keeps them, picks the same node.
//
// # Snapshots behind one pointer
//
// A Ring is immutable. Tracker follows the live membership and builds a new
// Ring only when the set of gateway nodes changes, then swaps it in with one
// atomic store; a lookup is one atomic load and the scoring loop, with no
// lock and no allocation (Discord's FastGlobal: readers never wait for the
// writer, the writer pays for a rebuild only on a membership change).
//
// The package must not talk to the bus itself or know about sessions: it
// takes the node list from package nodes and answers lookups.
package affinity

import (
	"slices"
	"strings"

	"parley/nodes"
)

// Ring is an immutable snapshot of the nodes a key may map to. The zero
// Ring, and New of no nodes, map nothing.
type Ring struct {
	nodes  []nodes.Node // sorted by ID, each ID once
	hashes []uint64     // hashString of each node's ID, in the same order
}

// New returns the ring over the given nodes. It copies the list; duplicate
// IDs are kept once (the first). The order of the input does not matter.
func New(list []nodes.Node) *Ring {
	ns := slices.Clone(list)
	slices.SortStableFunc(ns, func(a, b nodes.Node) int { return strings.Compare(a.ID, b.ID) })
	ns = slices.CompactFunc(ns, func(a, b nodes.Node) bool { return a.ID == b.ID })
	r := &Ring{nodes: ns, hashes: make([]uint64, len(ns))}
	for i, n := range ns {
		r.hashes[i] = hashString(n.ID)
	}
	return r
}

// Lookup returns the node that key maps to; false when the ring is empty.
func (r *Ring) Lookup(key string) (nodes.Node, bool) {
	i := r.pick(key)
	if i < 0 {
		return nodes.Node{}, false
	}
	return r.nodes[i], true
}

// pick is the index of the winning node, -1 when there is none. Ties (a
// probability of about n²/2⁶⁴) go to the lowest ID.
func (r *Ring) pick(key string) int {
	if r == nil || len(r.hashes) == 0 {
		return -1
	}
	kh := hashString(key)
	best, bestScore := 0, mix(kh^r.hashes[0])
	for i := 1; i < len(r.hashes); i++ {
		if s := mix(kh ^ r.hashes[i]); s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// Len is the number of nodes.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.nodes)
}

// Nodes returns the ring's nodes, sorted by ID. The slice is shared: callers
// must not modify it.
func (r *Ring) Nodes() []nodes.Node {
	if r == nil {
		return nil
	}
	return r.nodes
}

// sameNodes reports whether the ring holds exactly list (sorted by ID, as
// New leaves it), with the same announcements.
func (r *Ring) sameNodes(list []nodes.Node) bool {
	return slices.EqualFunc(r.Nodes(), list, func(a, b nodes.Node) bool {
		return a.ID == b.ID && a.WSURL == b.WSURL && a.APIURL == b.APIURL &&
			slices.Equal(a.Roles, b.Roles) && a.StartedAt.Equal(b.StartedAt)
	})
}

// hashString hashes s eight bytes at a time (little-endian words, each
// folded in with a multiply and a shift, the tail and the length last). It
// is fixed, with no per-process seed, so that every process agrees; mix
// spreads it further before it is compared.
func hashString(s string) uint64 {
	const k = 0x9e3779b97f4a7c15
	h := uint64(len(s)) * k
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		h = (h ^ w) * k
		h ^= h >> 32
	}
	var w uint64
	for j := 0; i < len(s); i, j = i+1, j+8 {
		w |= uint64(s[i]) << j
	}
	h = (h ^ w) * k
	return h ^ h>>29
}

// mix is a 64-bit finalizer after Pelle Evensen's rrmxmx (rotate-xor, then
// multiply-xorshift twice): every input bit affects every output bit, so the scores of one key under two nodes are
// as good as independent.
func mix(x uint64) uint64 {
	x ^= (x>>49 | x<<15) ^ (x>>24 | x<<40)
	x *= 0x9fb21c651e98df25
	x ^= x >> 28
	x *= 0x9fb21c651e98df25
	return x ^ x>>28
}
