package loadtest

import "sync"

// seqCheck follows one channel's durable events as one user received them.
// The user is owed every seq after start; what is still missing at the end
// (after the final catch-up window) is lost.
type seqCheck struct {
	start    int64    // the user had the channel up to here (boot's last_seq)
	max      int64    // highest seq received
	seen     []uint64 // bit i: seq start+1+i received
	distinct int64
}

// checker holds one user's channels. The handler (one goroutine per Conn)
// writes it; the final accounting reads it after the Conn has stopped; mu
// keeps the race detector and the progress reader honest.
type checker struct {
	mu    sync.Mutex
	chans map[string]*seqCheck // guarded by mu
	dups  int64                // guarded by mu
	ooo   int64                // guarded by mu
}

// declare says the user has channel ch up to seq start (from boot).
func (c *checker) declare(ch string, start int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chans == nil {
		c.chans = map[string]*seqCheck{}
	}
	if _, ok := c.chans[ch]; !ok {
		c.chans[ch] = &seqCheck{start: start, max: start}
	}
}

// observe records seq of channel ch. A channel not declared starts at its
// first event (one the user joined or was added to during the run). It
// reports whether the event was a duplicate or came after a later one.
func (c *checker) observe(ch string, seq int64) (dup, outOfOrder bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chans == nil {
		c.chans = map[string]*seqCheck{}
	}
	s := c.chans[ch]
	if s == nil {
		s = &seqCheck{start: seq - 1, max: seq - 1}
		c.chans[ch] = s
	}
	if seq <= s.start {
		// Older than what the user had at boot: a replay of history.
		c.dups++
		return true, false
	}
	i := seq - s.start - 1
	w := int(i / 64)
	for len(s.seen) <= w {
		s.seen = append(s.seen, 0)
	}
	bit := uint64(1) << (i % 64)
	if s.seen[w]&bit != 0 {
		c.dups++
		return true, false
	}
	s.seen[w] |= bit
	s.distinct++
	if seq < s.max {
		c.ooo++
		outOfOrder = true
	}
	s.max = max(s.max, seq)
	return false, outOfOrder
}

// reset forgets everything (a user whose connection failed).
func (c *checker) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chans, c.dups, c.ooo = nil, 0, 0
}

// maxes returns each channel's highest received seq.
func (c *checker) maxes() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.chans))
	for id, s := range c.chans {
		out[id] = s.max
	}
	return out
}

// caughtUp reports whether every channel has reached its head.
func (c *checker) caughtUp(heads map[string]int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range c.chans {
		if h, ok := heads[id]; ok && s.start+s.distinct < h {
			return false
		}
	}
	return true
}

// lost counts the seqs after start up to each channel's head that never
// arrived, and returns the duplicates and out-of-order arrivals.
func (c *checker) tally(heads map[string]int64) (lost, dups, ooo int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range c.chans {
		h, ok := heads[id]
		if !ok {
			continue
		}
		var got int64
		for seq := s.start + 1; seq <= h; seq++ {
			i := seq - s.start - 1
			if w := int(i / 64); w < len(s.seen) && s.seen[w]&(1<<(i%64)) != 0 {
				got++
			}
		}
		lost += max(h-s.start, 0) - got
	}
	return lost, c.dups, c.ooo
}
