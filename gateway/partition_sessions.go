package gateway

import (
	"math/bits"

	"parley"
)

// A partition taking in, handing over and attaching its sessions, and
// choosing the variant of an event each is sent (jit.go has the rest); the
// connection side of identify, resume and handover is in identify.go and
// handover.go.

// place puts a new session in the partition: indexed under its topics,
// following its channels (a new identify, or a session handed over from
// another node).
func (p *partition) place(s *session, refs []parley.ChannelRef, starts []int64) {
	p.cur = s
	p.sessions[s] = struct{}{}
	if s.isBot() && p.env.botsClosedSince(s.workspaceID, s.botGen) {
		// Its workspace turned integrations off while it was being
		// identified or handed over, after its check (bots.go).
		p.closeBot(s)
	}
	for _, t := range s.topics {
		p.indexAdd(t, s)
	}
	for i, r := range refs {
		if r.MemberCount > 0 {
			p.noteMembers(r.ID, r.MemberCount, r.LastSeq)
		}
		p.follow(s, r.ID, r.LastSeq, starts[i])
	}
}

// addSession puts a new session in the partition (place) and attaches it
// to its socket.
func (p *partition) addSession(s *session, c *conn, refs []parley.ChannelRef, starts []int64) {
	p.place(s, refs, starts)
	s.c = c
	if c.closed() {
		p.detach(s)
	}
}

// attach hands a session to a new socket: the events after seq are queued
// for it (the replay), followed by resumed. An older socket still attached
// is closed.
func (p *partition) attach(s *session, c *conn, seq uint64) resumeOutcome {
	if s.removed {
		return resumeGone
	}
	p.cur = s
	if seq > s.sentS {
		return resumeBadSeq
	}
	if seq < s.lastS && (s.ring.len() == 0 || s.ring.first > seq+1) {
		p.kill(s, 0, "")
		return resumeTooOld
	}
	if old := s.c; old != nil {
		p.detach(s)
		old.closeWith(parley.CloseSessionTimeout, "session resumed on another connection")
	}
	c.lastBeat.Store(p.now)
	c.sess.Store(s)
	s.c, s.detachedAt, s.sentS = c, 0, seq
	s.resumeOwed, s.resumeMark, s.resumeCount = true, s.lastS, s.lastS-seq
	p.env.presenceConnect(s)
	if c.closed() {
		p.detach(s)
	} else {
		p.markDirty(s)
	}
	return resumeOK
}

// handOver packs the session for another node and removes it here.
func (p *partition) handOver(s *session, req handoverRequest) handoverReply {
	if s.removed {
		return handoverReply{Status: "unknown"}
	}
	p.cur = s
	if req.Seq > s.sentS {
		return handoverReply{Status: "invalid_seq"}
	}
	if req.Seq < s.lastS && (s.ring.len() == 0 || s.ring.first > req.Seq+1) {
		p.kill(s, 0, "")
		return handoverReply{Status: "replay_unavailable"}
	}
	rep := handoverReply{
		Status:      "ok",
		UserID:      s.userID,
		WorkspaceID: s.workspaceID,
		LastS:       s.lastS,
		Channels:    make(map[string]int64, len(s.chans)),
	}
	for id, cp := range s.chans {
		if cp.until > 0 || cp.preview {
			continue // leaving, or a preview: the new node previews afresh from focus
		}
		rep.Channels[id] = cp.given
		if cp.last > cp.given { // passed over: the new node owes the summary
			if rep.Passed == nil {
				rep.Passed = map[string]passedOver{}
			}
			rep.Passed[id] = passedOver{Last: cp.last, Unread: cp.unread, Mentions: cp.mentions}
		}
		if mc, ok := p.members[id]; ok {
			if rep.Members == nil {
				rep.Members = map[string]int64{}
			}
			rep.Members[id] = mc.n
		}
	}
	rep.Admin, rep.Handle, rep.Bot = s.admin, s.handle, s.isBot()
	if !s.expiresAt.IsZero() {
		rep.ExpiresAt = s.expiresAt.UnixMicro()
	}
	for seq := req.Seq + 1; seq <= s.lastS; seq++ {
		en := s.ring.at(seq)
		rep.Entries = append(rep.Entries, handoverEntry{Tail: string(en.ev.tail), Ephemeral: en.ev.ephemeral})
	}
	s.mu.Lock()
	rep.Presence, rep.Focus = s.watched, s.focus
	s.mu.Unlock()
	rep.KnownUsers = p.env.knownUsers(s)
	p.kill(s, parley.CloseSessionTimeout, "session resumed on another node")
	return rep
}

// withUsers returns e as session s must get it: e itself when s has been
// sent every user e references (no allocation), else a variant carrying the
// missing users, which s is then deemed to have. The author's own sessions
// get the variant with the message's client_msg_id (event.forSession).
func (p *partition) withUsers(s *session, e *event) *event {
	e = e.forSession(s)
	if len(e.users) == 0 {
		return e
	}
	var missing uint64
	for i := range e.users {
		if !s.known.has(e.users[i].n) {
			missing |= 1 << i
		}
	}
	if missing == 0 {
		return e
	}
	v := p.jitMemo.variant(e, missing)
	for i := range e.users {
		if missing&(1<<i) != 0 {
			s.known.add(e.users[i].n)
		}
	}
	p.env.jitAttached.Add(float64(bits.OnesCount64(missing)))
	return v
}
