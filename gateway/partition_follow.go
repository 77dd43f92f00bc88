package gateway

import (
	"errors"
	"math/rand/v2"
	"time"

	"parley"
)

// Which channels a session follows, and from where. All of it runs on the
// session's partition goroutine; reads of the store run on their own
// goroutines and come back through the inbox.

// fillRetry is the pause before a failed catch-up read is tried again; it
// doubles with each failure in a row, up to fillRetryMax, with jitter.
const (
	fillRetry    = time.Second
	fillRetryMax = 15 * time.Second
)

// fillStuck is how long a catch-up read may go unanswered before the
// session asks for a new one (partitionEnv.fillStuck; tests shorten it).
// A read is bounded by fetchTimeout, so an answer this late is lost.
const fillStuck = 3 * fetchTimeout

// fillRef names a session's catch-up of one channel.
type fillRef struct {
	s         *session
	channelID string
}

// follow starts delivering a channel to the session after seq last. start
// is where the node's stream of the channel began: if the stream is already
// past last, the session first catches up from the log.
func (p *partition) follow(s *session, channelID string, last, start int64) {
	s.chans[channelID] = &chanPos{last: last, given: last}
	p.indexAdd(parley.TopicChannel(channelID), s)
	if max(p.chanPos[channelID], start) > last {
		p.startFill(s, channelID)
	}
}

// join makes the session follow a channel its user just joined (or was
// created in), from the event that said so, and takes a node reference on
// the channel's topic.
func (p *partition) join(s *session, channelID string, seq int64) {
	if _, ok := s.chans[channelID]; ok {
		return
	}
	delete(s.left, channelID)
	p.env.later(subOp{topic: parley.TopicChannel(channelID), after: seq})
	p.follow(s, channelID, seq, 0)
}

// leave stops delivering the channel to the session at once.
func (p *partition) leave(s *session, channelID string) {
	if _, ok := s.chans[channelID]; !ok {
		return
	}
	cp := s.chans[channelID]
	delete(s.chans, channelID)
	if s.left == nil {
		s.left = map[string]int64{}
	}
	s.left[channelID] = cp.last
	p.indexRemove(parley.TopicChannel(channelID), s)
	p.env.later(subOp{topic: parley.TopicChannel(channelID), release: true})
	// A re-join (and what followed it) that came on the user topic while
	// the session waited for its removal on the channel's stream.
	for _, e := range cp.later {
		p.deliverTo(s, e, parley.TopicKindUser)
	}
}

// leaveAfter makes the session leave the channel once it has been given
// the channel's events up to seq (its user's member.left): what came before
// the leave still arrives in order, nothing after it does.
func (p *partition) leaveAfter(s *session, channelID string, seq int64) {
	cp, ok := s.chans[channelID]
	if !ok {
		return
	}
	if cp.last >= seq {
		p.leave(s, channelID)
		return
	}
	cp.until = seq
}

// startFill asks the node's fill pool (fills.go) for the channel's log
// after the session's position; fillDone delivers what it found. Nothing
// of the channel is given to the session meanwhile.
func (p *partition) startFill(s *session, channelID string) {
	cp, ok := s.chans[channelID]
	if !ok || cp.catching {
		return
	}
	cp.catching = true
	if p.fillsOut == nil {
		p.fillsOut = map[fillRef]int64{}
	}
	p.fillsOut[fillRef{s, channelID}] = p.now
	p.env.metrics.sessionFills.Inc()
	p.env.fills.request(p, s, channelID, cp.last)
}

// checkFills is the sweep's look at the catch-ups under way: one that has
// waited longer than fillStuck for its read is asked for again, so that no
// session stays behind a channel for good, given nothing of it (while a
// read is in flight the partition gives the session nothing of the
// channel, not even summaries) and with no gap for its client to see.
func (p *partition) checkFills() {
	stuck := p.now - int64(p.env.fillStuck)
	for ref, since := range p.fillsOut {
		cp := ref.s.chans[ref.channelID]
		if ref.s.removed || cp == nil || !cp.catching {
			delete(p.fillsOut, ref)
			continue
		}
		if since > stuck {
			continue
		}
		p.cur = ref.s
		p.env.log.Warn("gateway session catch-up unanswered; asking again", "session_id", ref.s.id,
			"channel_id", ref.channelID, "after_seq", cp.last, "waited", time.Duration(p.now-since))
		p.env.metrics.fillRetries.WithLabelValues("stuck").Inc()
		cp.catching = false
		delete(p.fillsOut, ref)
		p.startFill(ref.s, ref.channelID)
	}
	p.cur = nil
}

// errFillPanicked is the failure of a catch-up read that panicked.
var errFillPanicked = errors.New("catch-up read panicked")

// fillPanicked closes the session's socket with 4009 after its catch-up
// read panicked, and retries the read later like a failed one: the resume
// then gets what the read brings. (An immediate retry could panic again at
// once, and again.)
func (p *partition) fillPanicked(s *session, channelID string) {
	if s.removed {
		return
	}
	p.cutSocket(s)
	p.fillDone(s, channelID, nil, errFillPanicked)
}

// fillAnswer hands one session its share of a catch-up read. A panic
// while giving it ends that session alone: the other sessions that shared
// the read still get their answer (one that never came would leave them
// catching up for good).
func (p *partition) fillAnswer(s *session, channelID string, evs []*event, err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			p.panicked(v, s, endSession)
		}
	}()
	if panicked {
		p.fillPanicked(s, channelID)
		return
	}
	p.fillDone(s, channelID, evs, err)
}

// fillDone delivers a catch-up read. While it was in flight the session
// was given nothing of the channel; if the node's stream has meanwhile gone
// past what the read found, it reads again.
func (p *partition) fillDone(s *session, channelID string, evs []*event, err error) {
	if s.removed {
		return
	}
	p.cur = s
	cp, ok := s.chans[channelID]
	if !ok || !cp.catching {
		return
	}
	cp.catching = false
	delete(p.fillsOut, fillRef{s, channelID})
	if err != nil {
		// The read said nothing of where the log ends: read again after a
		// pause, whether or not the node's stream has shown anything past
		// the session's position (the read may have been asked because the
		// stream began past it, and a quiet channel shows nothing more).
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			// The channel is gone from the store: there is no log to
			// catch up from, now or later (the order package's gap fill
			// gives up the same way).
			p.env.log.Warn("gateway session catch-up: channel not in the store", "session_id", s.id, "channel_id", channelID, "err", err)
			return
		}
		cp.fillFails++
		if !cp.retryArmed {
			cp.retryArmed = true
			wait := fillBackoff(cp.fillFails)
			p.env.log.Warn("gateway session catch-up failed; retrying", "session_id", s.id, "channel_id", channelID,
				"after_seq", cp.last, "attempt", cp.fillFails, "retry_in", wait, "err", err)
			time.AfterFunc(wait, func() { p.postAsync(func() { p.retryFill(s, channelID, cp) }) })
		}
		return
	}
	cp.fillFails = 0
	for _, e := range evs {
		if e.seq <= cp.last {
			continue
		}
		if e.seq != cp.last+1 || (cp.until > 0 && e.seq > cp.until) {
			break
		}
		p.give(s, cp, e)
		if s.removed {
			return
		}
	}
	if cp.until > 0 && cp.last >= cp.until {
		p.leave(s, channelID)
		return
	}
	if len(evs) == fillLimit || p.chanPos[channelID] > cp.last {
		p.startFill(s, channelID)
	}
}

// retryFill asks again for a catch-up whose read failed, unless the
// session has meanwhile left the channel (cp is no longer its position)
// or a read is in flight again.
func (p *partition) retryFill(s *session, channelID string, cp *chanPos) {
	cp.retryArmed = false
	if s.removed || s.chans[channelID] != cp || cp.catching {
		return
	}
	p.cur = s
	p.env.metrics.fillRetries.WithLabelValues("failed").Inc()
	p.startFill(s, channelID)
}

// fillBackoff is the pause before retry n (1-based) of a failed catch-up
// read: fillRetry doubled per failure, at most fillRetryMax, from 75 to 100 %
// of that (sessions that failed together do not all come back together).
func fillBackoff(n int) time.Duration {
	d := fillRetry << min(n-1, 8)
	d = min(d, fillRetryMax)
	return d - rand.N(d/4+1)
}
