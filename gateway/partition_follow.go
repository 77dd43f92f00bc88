package gateway

import (
	"errors"
	"time"

	"parley"
)

// Which channels a session follows, and from where. All of it runs on the
// session's partition goroutine; reads of the store run on their own
// goroutines and come back through the inbox.

// fillRetry is the pause before a failed catch-up read is tried again.
const fillRetry = time.Second

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
	p.env.metrics.sessionFills.Inc()
	p.env.fills.request(p, s, channelID, cp.last)
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
	if err != nil {
		p.env.log.Warn("gateway session catch-up failed", "session_id", s.id, "channel_id", channelID, "err", err)
		time.AfterFunc(fillRetry, func() { p.postAsync(func() { p.retryFill(s, channelID) }) })
		return
	}
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

func (p *partition) retryFill(s *session, channelID string) {
	if s.removed {
		return
	}
	if cp, ok := s.chans[channelID]; ok && p.chanPos[channelID] > cp.last {
		p.startFill(s, channelID)
	}
}
