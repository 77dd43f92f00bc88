package gateway

// entry is one event in a session's ring: the shared event and when it was
// queued (unix nanoseconds, for the replay TTL).
type entry struct {
	ev *event
	at int64
}

// ring is a session's replay buffer and send queue at once. Every event
// that took an s is in it, in s order with no holes: the entry at offset i
// from the oldest has s = first+i. The part after the session's sentS is
// the send queue; the rest is kept for resume until it is too old or too
// many.
//
// It starts without a buffer and grows by doubling, so that idle sessions
// cost nothing; it gives its buffer back when it empties. It is owned by the
// session's partition.
type ring struct {
	buf   []entry // length a power of two, or nil while empty
	head  int     // index of the oldest entry
	n     int     // entries held
	first uint64  // s of the oldest entry, when n > 0
}

const minRing = 8

func (r *ring) len() int { return r.n }

// last is the s of the newest entry (first-1 when empty).
func (r *ring) last() uint64 { return r.first + uint64(r.n) - 1 }

// push appends the entry with the given s, which must follow the newest
// entry (or start the ring when it is empty). The caller keeps n below max
// by popping first; the buffer grows up to the power of two at or above max.
func (r *ring) push(s uint64, e entry) {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	if r.n == 0 {
		r.first = s
		r.head = 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
}

// at returns the entry with session seq s, or nil if it is not held.
func (r *ring) at(s uint64) *entry {
	if r.n == 0 || s < r.first || s > r.last() {
		return nil
	}
	return &r.buf[(r.head+int(s-r.first))&(len(r.buf)-1)]
}

// oldest returns the oldest entry, or nil when empty.
func (r *ring) oldest() *entry {
	if r.n == 0 {
		return nil
	}
	return &r.buf[r.head]
}

// pop drops the oldest entry.
func (r *ring) pop() {
	if r.n == 0 {
		return
	}
	r.buf[r.head] = entry{} // let the event go
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	r.first++
	if r.n == 0 {
		r.buf, r.head = nil, 0
	} else if len(r.buf) > 4*minRing && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// resize moves the entries into a new buffer of size (a power of two ≥ n).
func (r *ring) resize(size int) {
	nb := make([]entry, size)
	for i := 0; i < r.n; i++ {
		nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = nb, 0
}

// reset drops everything.
func (r *ring) reset() { *r = ring{} }
