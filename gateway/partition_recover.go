package gateway

import (
	"time"

	"parley"
)

// A partition's side of panic containment (recover.go says what happens
// to a session after a panic).

// panicked handles a panic recovered on the partition goroutine while it
// worked on s (nil: no session known).
func (p *partition) panicked(v any, s *session, how afterPanic) {
	if s == nil {
		p.env.logPanic(panicPartition, v, "partition", p.id)
		return
	}
	p.env.logPanic(panicPartition, v, "partition", p.id, "session_id", s.id, "user_id", s.userID)
	p.quarantine(s, how)
}

// quarantine closes the session's socket with 4009 after a panic and either
// rebuilds what the session can get again (resync) or removes it (end).
func (p *partition) quarantine(s *session, how afterPanic) {
	if s.removed {
		return
	}
	if how == endSession {
		p.kill(s, parley.CloseSessionTimeout, closeInternal)
		return
	}
	p.cutSocket(s)
	// An s taken whose event never reached the ring is given back: every
	// s up to lastS must be replayable.
	if s.ring.len() > 0 && s.lastS > s.ring.last() {
		s.lastS = s.ring.last()
	}
	s.sentS = min(s.sentS, s.lastS)
	for id, cp := range s.chans {
		cp.catching = false // a read in flight is superseded by this one
		p.startFill(s, id)
	}
}

// deliverGuarded is deliverTo for one session of a delivery loop, with
// a panic contained to that session.
func (p *partition) deliverGuarded(s *session, e *event, kind parley.TopicKind) {
	defer func() {
		if v := recover(); v != nil {
			how := endSession
			if kind == parley.TopicKindChannel || e.ephemeral {
				how = resyncSession // the log has it, or nothing is owed
			}
			p.panicked(v, s, how)
		}
	}()
	if hook := p.env.deliverHook.Load(); hook != nil {
		(*hook)(s.id, e)
	}
	p.deliverTo(s, e, kind)
}

// flushGuarded is flush with a panic contained to the session: its ring is
// intact, so a resume replays what the flush did not write.
func (p *partition) flushGuarded(s *session) {
	defer func() {
		if v := recover(); v != nil {
			p.panicked(v, s, resyncSession)
		}
	}()
	p.flush(s)
}

// runGuarded runs a request on the partition. A panic ends the session the
// request was working on, if it said (p.cur).
func (p *partition) runGuarded(fn func()) {
	p.cur = nil
	defer func() {
		if v := recover(); v != nil {
			s := p.cur
			p.cur = nil
			p.panicked(v, s, endSession)
		}
	}()
	fn()
	p.cur = nil
}

// sweepGuarded is the sweep of one session.
func (p *partition) sweepGuarded(s *session, hbDeadline, windowDeadline, ttlDeadline int64) {
	defer func() {
		if v := recover(); v != nil {
			p.panicked(v, s, endSession)
		}
	}()
	p.sweepOne(s, hbDeadline, windowDeadline, ttlDeadline)
}

// reapGuarded is the removal of one doomed session; the session is already
// out of every delivery, so a panic is only logged.
func (p *partition) reapGuarded(d doom) {
	defer func() {
		if v := recover(); v != nil {
			p.panicked(v, nil, endSession)
		}
	}()
	p.reapOne(d)
}

// roundGuarded is one round of the partition's loop. What the guards
// above do not catch (the loop's own bookkeeping) is logged and counted
// here, and the loop goes on.
func (p *partition) roundGuarded(stop <-chan struct{}, tick <-chan time.Time) (stopped bool) {
	defer func() {
		if v := recover(); v != nil {
			p.endWalk()
			p.panicked(v, nil, endSession)
			p.wake() // what the round left undone (reap, flush) runs next
		}
	}()
	return p.round(stop, tick)
}

// cutSocket detaches the session from its socket, if it has one, and
// closes that with a resumable 4009 after a panic; the session stays.
func (p *partition) cutSocket(s *session) {
	if c := s.c; c != nil {
		p.detach(s)
		c.closeWith(parley.CloseSessionTimeout, closeInternal)
	}
}
