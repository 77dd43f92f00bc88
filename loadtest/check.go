package loadtest

import (
	"math/bits"
	"sync"
)

// seqCheck follows one channel's durable events as one user received them.
// The user is owed every seq after start; what is still missing at the end
// (after the final catch-up window) is lost.
type seqCheck struct {
	start    int64    // the user had the channel up to here (boot's last_seq)
	max      int64    // highest seq received
	seen     []uint64 // bit i: seq start+1+i received
	implicit bool     // not declared: start is a guess from the first event seen
}

// checker holds one user's channels. The handler (one goroutine per Conn)
// writes it; the final accounting reads it after the Conn has stopped; mu
// keeps the race detector and the progress reader honest.
type checker struct {
	mu    sync.Mutex
	chans map[string]*seqCheck // guarded by mu
	dups  int64                // guarded by mu
	ooo   int64                // guarded by mu
	// covered counts the seqs channel.summary frames covered (passed
	// over, not sent, not lost); behind counts summaries that covered
	// nothing (last_seq at or below what the user already had).
	covered int64 // guarded by mu
	behind  int64 // guarded by mu
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
		s = &seqCheck{start: seq - 1, max: seq - 1, implicit: true}
		c.chans[ch] = s
	}
	if seq <= s.start && s.implicit && seq > 0 {
		// An earlier event of a channel first seen during the run came
		// after a later one: the channel is owed from here on.
		s.rebase(seq - 1)
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
	if seq < s.max {
		c.ooo++
		outOfOrder = true
	}
	s.max = max(s.max, seq)
	return false, outOfOrder
}

// cover records a channel.summary of channel ch up to last: the seqs
// after the user's position in the channel (the highest seq received or
// covered) up to last were passed over by the server and count as
// received (docs/protocol.md, View-aware delivery). A hole below the
// position stays a hole: a summary covers only what follows the last
// thing the session was given. A summary of a channel not declared starts
// it at last, as the client does. It returns the seqs covered.
func (c *checker) cover(ch string, last int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chans == nil {
		c.chans = map[string]*seqCheck{}
	}
	s := c.chans[ch]
	if s == nil {
		c.chans[ch] = &seqCheck{start: last, max: last, implicit: true}
		return 0
	}
	if last <= s.max {
		c.behind++
		return 0
	}
	for seq := s.max + 1; seq <= last; seq++ {
		i := seq - s.start - 1
		w := int(i / 64)
		for len(s.seen) <= w {
			s.seen = append(s.seen, 0)
		}
		s.seen[w] |= 1 << (i % 64)
	}
	n := last - s.max
	s.max = last
	c.covered += n
	return n
}

// summarized returns the seqs covered by summaries and the summaries that
// covered nothing.
func (c *checker) summarized() (covered, behind int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.covered, c.behind
}

// rebase moves start down to start (below the current one), keeping what was seen.
func (s *seqCheck) rebase(start int64) {
	old, oldStart := s.seen, s.start
	shift := oldStart - start
	s.start = start
	s.seen = make([]uint64, (int64(len(old)*64)+shift+63)/64)
	for w, word := range old {
		for word != 0 {
			b := int64(bits.TrailingZeros64(word))
			word &= word - 1
			i := int64(w)*64 + b + shift
			s.seen[i/64] |= 1 << (i % 64)
		}
	}
}

// got counts the distinct seqs received in (start, h].
func (s *seqCheck) got(h int64) int64 {
	n := h - s.start // bits 0..n-1
	if n <= 0 {
		return 0
	}
	var got int64
	for w, word := range s.seen {
		lo := int64(w) * 64
		if lo >= n {
			break
		}
		if n-lo < 64 {
			word &= (1 << (n - lo)) - 1
		}
		got += int64(bits.OnesCount64(word))
	}
	return got
}

// reset forgets everything (a user whose connection failed).
func (c *checker) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chans, c.dups, c.ooo, c.covered, c.behind = nil, 0, 0, 0, 0
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
		if h, ok := heads[id]; ok && s.got(h) < h-s.start {
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
		lost += max(h-s.start, 0) - s.got(h)
	}
	return lost, c.dups, c.ooo
}
