package order

import (
	"context"
	"time"

	"parley"
)

// armLocked starts the channel's hold-back timer unless it runs already or
// a fill is under way (which covers the gap). When it fires, the gap is
// fetched.
func (s *Sequencer) armLocked(c *channel, d time.Duration) {
	if c.timer != nil || c.filling || c.gone.Load() {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.timer != t { // stopped, or replaced, after it fired
			return
		}
		c.timer = nil
		s.startFillLocked(c)
	})
	c.timer = t
}

func (c *channel) stopTimerLocked() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// startFillLocked starts the channel's fill goroutine unless it runs
// already; a running one sees the new work (a higher maxSeen, a CatchUp)
// before it ends.
func (s *Sequencer) startFillLocked(c *channel) {
	c.stopTimerLocked()
	if c.filling || c.gone.Load() {
		return
	}
	c.filling = true
	// Close marks every channel gone (under c.mu) before it waits, so no
	// Add can race with its Wait.
	s.wg.Add(1)
	go s.fill(c)
}

// fill fetches from the store until the channel has no gap and no pending
// catch-up, delivering what it fetched in order. It is the channel's only
// fill goroutine while c.filling is set.
func (s *Sequencer) fill(c *channel) {
	defer s.wg.Done()
	failures := 0
	fetched := 0
	defer func() {
		if fetched > 0 {
			s.m.gapFills.Inc()
		}
	}()
	for {
		c.mu.Lock()
		if c.gone.Load() || (c.pos >= c.maxSeen && c.catchUpDone >= c.catchUpWant) {
			c.filling = false
			c.mu.Unlock()
			return
		}
		after, want := c.pos, c.catchUpWant
		c.mu.Unlock()

		evs, err := s.fetch(c, after)
		if err != nil {
			if c.ctx.Err() != nil {
				s.endFill(c, 0)
				return
			}
			s.m.fetchErrors.Inc()
			failures++
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				s.log.Error("gap fill: channel not in the store; giving up", "channel_id", c.id, "after_seq", after, "err", err)
				c.mu.Lock()
				c.catchUpDone = c.catchUpWant
				c.mu.Unlock()
				s.endFill(c, 0)
				return
			}
			if failures > s.cfg.FetchRetries {
				s.log.Error("gap fill failed; retrying later", "channel_id", c.id, "after_seq", after,
					"attempts", failures, "retry_in", s.cfg.RetryPause, "err", err)
				s.endFill(c, s.cfg.RetryPause)
				return
			}
			s.log.Warn("gap fill fetch failed", "channel_id", c.id, "after_seq", after, "attempt", failures, "err", err)
			if !sleep(c.ctx, backoff(s.cfg.RetryBackoff, failures)) {
				s.endFill(c, 0)
				return
			}
			continue
		}
		failures = 0

		c.mu.Lock()
		if c.gone.Load() {
			c.filling = false
			c.mu.Unlock()
			return
		}
		n, filled := s.applyLocked(c, evs)
		fetched += filled
		short := len(evs) < s.cfg.FetchLimit
		if short || n == 0 {
			// The log had nothing more when this fetch ran.
			c.catchUpDone = max(c.catchUpDone, want)
		}
		if (short || n == 0) && c.pos < c.maxSeen {
			// The bus has shown a seq the store does not (yet) return:
			// deliver what there is and look again after a hold-back.
			s.log.Warn("gap fill: the store's log ends before the seq seen on the bus",
				"channel_id", c.id, "pos", c.pos, "max_seen", c.maxSeen)
			c.filling = false
			s.armLocked(c, s.cfg.HoldBack)
			s.drainLocked(c)
			return
		}
		s.drainLocked(c)
	}
}

// endFill clears the fill flag and, if a gap remains, looks again after
// retry (0: not at all until the next early event or CatchUp).
func (s *Sequencer) endFill(c *channel, retry time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.filling = false
	if retry > 0 && (c.pos < c.maxSeen || c.catchUpDone < c.catchUpWant) {
		s.armLocked(c, retry)
	}
}

func (s *Sequencer) fetch(c *channel, after int64) ([]parley.Event, error) {
	ctx, cancel := context.WithTimeout(c.ctx, s.cfg.FetchTimeout)
	defer cancel()
	return s.cfg.Fetch(ctx, c.id, after, s.cfg.FetchLimit)
}

// applyLocked accepts the fetched events that follow the position, then
// any held ones that now follow. It returns how many fetched events it
// accepted, and how many of those the bus had not brought. It stops at the first seq that does not follow: the log is
// gap-free, so that is a broken Fetch, and delivering past it would break
// the order.
func (s *Sequencer) applyLocked(c *channel, evs []parley.Event) (accepted, filled int) {
	for _, ev := range evs {
		if ev.Seq <= c.pos {
			continue // came from the bus meanwhile
		}
		if ev.Seq != c.pos+1 {
			s.log.Error("gap fill: fetched events skip a seq", "channel_id", c.id, "pos", c.pos, "seq", ev.Seq)
			break
		}
		if _, ok := c.held[ev.Seq]; ok {
			delete(c.held, ev.Seq)
			s.m.heldBack.Dec()
		} else {
			filled++
		}
		c.pos = ev.Seq
		c.maxSeen = max(c.maxSeen, ev.Seq)
		c.ready = append(c.ready, ev)
		accepted++
	}
	s.m.filledEvents.Add(float64(filled))
	s.releaseLocked(c)
	return accepted, filled
}

// backoff is base doubled for each failure after the first, capped.
func backoff(base time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < maxRetryBackoff; i++ {
		d *= 2
	}
	return min(d, maxRetryBackoff)
}

// sleep waits d, or less if ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
