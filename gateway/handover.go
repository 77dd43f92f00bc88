package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"parley"
)

// Session handover: a client that resumes on another node than the one
// holding its session (the node named in the session id) makes the new
// node ask the holder over the bus. The holder closes the old socket,
// hands over the session's state (channel positions, the replay entries
// after the client's seq, its presence watch) and forgets the session,
// leaving a note of where it went for the resume window. The new node
// adopts the session under the same id: it follows the channels from the
// handed-over positions (catching up where its own stream is ahead: from
// its tail of the stream, tail.go, else from the store), owes the summaries
// of what the session passed over in passive channels, replays the
// entries, and goes on. A holder that does not answer
// (dead) leaves the client to invalid_session and /sync.

// handoverName is the node-to-node request kind: the topic is
// parley.NodeTopic(nodeID, "handover").
const handoverName = "handover"

// maxHandoverHops bounds how far a handover follows "moved" notes.
const maxHandoverHops = 3

type handoverRequest struct {
	SessionID string `json:"session_id"`
	TokenHash string `json:"token_hash"`
	Seq       uint64 `json:"seq"`
	Node      string `json:"node"` // the asking node, where the session goes
}

type handoverReply struct {
	Status      string           `json:"status"` // ok, moved, unknown, invalid_seq, replay_unavailable
	MovedTo     string           `json:"moved_to,omitempty"`
	UserID      string           `json:"user_id,omitempty"`
	WorkspaceID string           `json:"workspace_id,omitempty"`
	LastS       uint64           `json:"last_s,omitempty"`
	Channels    map[string]int64 `json:"channels,omitempty"` // channel → last seq given
	// Passed: the channels whose newest events the session passed over
	// (passive, view.go): where the holder's stream had given it up to,
	// and the summary it owes. The new node follows from there and sends
	// the summary, with no read of the passed-over events. A holder that
	// sends none (an older node) leaves the new node to read them.
	Passed     map[string]passedOver `json:"passed,omitempty"`
	Entries    []handoverEntry       `json:"entries,omitempty"`  // s = Seq+1 … LastS
	Presence   []string              `json:"presence,omitempty"` // watched users
	Focus      []string              `json:"focus,omitempty"`
	Admin      bool                  `json:"admin,omitempty"`       // the user administers the workspace
	KnownUsers []string              `json:"known_users,omitempty"` // users sent to it (jit.go)
	Members    map[string]int64      `json:"members,omitempty"`     // channel → member count known (view.go)
	Handle     string                `json:"handle,omitempty"`      // the user's handle (view.go)
	// ExpiresAt is when the session's login expires (Unix µs; 0 when the
	// holder did not know), so that the new node checks later resumes
	// without the store.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// Bot: the session was identified with a bot token (bots.go).
	Bot bool `json:"bot,omitempty"`
}

// passedOver is a channel's events past what its client was given
// (handoverReply.Channels), counted for the summary the session owes.
type passedOver struct {
	Last     int64 `json:"last"`
	Unread   int   `json:"unread,omitempty"`
	Mentions int   `json:"mentions,omitempty"`
}

type handoverEntry struct {
	Tail      string `json:"tail"` // the event frame after its s
	Ephemeral bool   `json:"ephemeral,omitempty"`
}

// movedNotes remembers where handed-over sessions went.
type movedNotes struct {
	mu    sync.Mutex
	notes map[string]movedNote // guarded by mu
}

type movedNote struct {
	node  string
	until time.Time
}

const maxMovedNotes = 100_000

func (m *movedNotes) add(sessionID, node string, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.notes == nil {
		m.notes = map[string]movedNote{}
	}
	if len(m.notes) >= maxMovedNotes {
		for id, n := range m.notes {
			if until.After(n.until.Add(time.Hour)) || len(m.notes) >= maxMovedNotes {
				delete(m.notes, id)
			}
		}
	}
	m.notes[sessionID] = movedNote{node: node, until: until}
}

func (m *movedNotes) get(sessionID string, now time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.notes[sessionID]
	if !ok {
		return ""
	}
	if now.After(n.until) {
		delete(m.notes, sessionID)
		return ""
	}
	return n.node
}

// startHandover answers other nodes' handover requests, when the bus can.
func (g *Gateway) startHandover() error {
	rq, ok := g.bus.(parley.Requester)
	if !ok {
		return nil
	}
	stop, err := rq.Handle(parley.NodeTopic(g.cfg.NodeID, handoverName), g.answerHandoverGuarded)
	if err != nil {
		return err
	}
	g.stopHandover = stop
	return nil
}

// answerHandoverGuarded is answerHandover with a panic contained: the
// asking node is told it failed, and its client boots again.
func (g *Gateway) answerHandoverGuarded(data []byte) (out []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			g.logPanic(panicHandover, v)
			out, err = nil, fmt.Errorf("answer handover: panic: %v", v)
		}
	}()
	return g.answerHandover(data)
}

// answerHandover gives a session away to the asking node.
func (g *Gateway) answerHandover(data []byte) ([]byte, error) {
	var req handoverRequest
	if err := json.Unmarshal(data, &req); err != nil || req.Node == "" {
		return nil, parley.Errorf(parley.EINVALID, "bad handover request")
	}
	s := g.registry.get(req.SessionID)
	// The asking node adopts without asking the store (identify.go): the
	// token must be the session's, and not expired.
	if s == nil || !s.tokenValid(req.TokenHash, g.now()) {
		if to := g.moved.get(req.SessionID, g.now()); to != "" && to != req.Node && s == nil {
			return json.Marshal(handoverReply{Status: "moved", MovedTo: to})
		}
		return json.Marshal(handoverReply{Status: "unknown"})
	}
	res := make(chan handoverReply, 1)
	s.p.post(func() {
		rep := handoverReply{Status: "unknown"} // if handOver panics
		defer func() { res <- rep }()
		rep = s.p.handOver(s, req)
	})
	rep := <-res
	if rep.Status == "ok" {
		g.moved.add(req.SessionID, req.Node, g.now().Add(g.cfg.ResumeWindow))
		g.metrics.handovers.WithLabelValues("given").Inc()
	}
	return json.Marshal(rep)
}

// handover asks the node holding a session for it and adopts it here. It
// returns nil (and why) when no node hands it over. The holder is the node
// named in the session id, or where a note of this node says it went,
// following the holders' "moved" notes; when that chain ends without it
// (a node of the chain restarted and lost its notes, or is gone: a rolling
// restart does both), every other live node is asked in turn.
func (g *Gateway) handover(ctx context.Context, sessionID, tokenHash string, seq uint64) (*session, resumeOutcome) {
	rq, ok := g.bus.(parley.Requester)
	if !ok {
		return nil, resumeGone
	}
	owner := g.moved.get(sessionID, g.now())
	if owner == "" {
		owner = ownerNode(sessionID)
	}
	req, _ := json.Marshal(handoverRequest{SessionID: sessionID, TokenHash: tokenHash, Seq: seq, Node: g.cfg.NodeID})
	asked := map[string]bool{g.cfg.NodeID: true}
	ask := func(node string) (handoverReply, bool) {
		asked[node] = true
		data, err := rq.Request(ctx, parley.NodeTopic(node, handoverName), req)
		if err != nil {
			g.log.Info("gateway handover: no answer", "session_id", sessionID, "node", node, "err", err)
			g.metrics.handovers.WithLabelValues("no_answer").Inc()
			return handoverReply{}, false
		}
		var rep handoverReply
		if err := json.Unmarshal(data, &rep); err != nil {
			g.metrics.handovers.WithLabelValues("error").Inc()
			return handoverReply{}, false
		}
		return rep, true
	}
	// done reports whether rep ends the search, and how.
	done := func(rep *handoverReply) (*session, resumeOutcome, bool) {
		switch rep.Status {
		case "ok":
			s, err := g.adopt(sessionID, tokenHash, seq, rep)
			if err != nil {
				g.log.Error("gateway handover: adopt failed", "session_id", sessionID, "err", err)
				g.metrics.handovers.WithLabelValues("error").Inc()
				return nil, resumeGone, true
			}
			g.metrics.handovers.WithLabelValues("taken").Inc()
			return s, resumeOK, true
		case "invalid_seq":
			return nil, resumeBadSeq, true
		case "replay_unavailable":
			return nil, resumeTooOld, true
		}
		return nil, resumeGone, false
	}
	for hop := 0; hop < maxHandoverHops && owner != "" && !asked[owner]; hop++ {
		rep, ok := ask(owner)
		if !ok {
			break
		}
		if rep.Status == "moved" {
			owner = rep.MovedTo
			continue
		}
		if s, out, end := done(&rep); end {
			return s, out
		}
		break // unknown there
	}
	if g.cfg.LiveNodes != nil {
		for _, node := range g.cfg.LiveNodes() {
			if asked[node] {
				continue
			}
			rep, ok := ask(node)
			if !ok {
				continue
			}
			if s, out, end := done(&rep); end {
				return s, out
			}
		}
	}
	g.metrics.handovers.WithLabelValues("unknown").Inc()
	return nil, resumeGone
}

// adopt makes a handed-over session live here, detached, ready for attach.
func (g *Gateway) adopt(sessionID, tokenHash string, seq uint64, rep *handoverReply) (*session, error) {
	if rep.LastS < seq || uint64(len(rep.Entries)) != rep.LastS-seq {
		return nil, errors.New("inconsistent handover reply")
	}
	s := g.newSession(sessionID, rep.UserID, rep.WorkspaceID, tokenHash)
	topics := sessionTopics(rep.UserID, rep.WorkspaceID, rep.Admin)
	refs := make([]parley.ChannelRef, 0, len(rep.Channels))
	var passed map[string]passedOver // the valid ones of rep.Passed
	for id, given := range rep.Channels {
		last := given
		if po, ok := rep.Passed[id]; ok && po.Last > given && po.Unread >= 0 && po.Mentions >= 0 {
			last = po.Last
			if passed == nil {
				passed = map[string]passedOver{}
			}
			passed[id] = po
		}
		refs = append(refs, parley.ChannelRef{ID: id, LastSeq: last, MemberCount: rep.Members[id]})
	}
	s.handle = rep.Handle
	if rep.ExpiresAt > 0 {
		s.expiresAt = time.UnixMicro(rep.ExpiresAt)
	}
	s.bot.Store(rep.Bot)
	s.botGen = g.botGen.Load() // the resume checks the bot after this (identify.go)
	starts := make([]int64, len(refs))
	if err := g.acquireAll(topics, refs, starts); err != nil {
		return nil, err
	}
	s.topics, s.admin = topics, rep.Admin
	g.registry.add(s)
	g.metrics.sessions.Inc()
	recv := g.now()
	done := make(chan struct{})
	s.p.post(func() {
		defer close(done)
		p := s.p
		p.place(s, refs, starts)
		for id, po := range passed {
			p.owePassed(s, id, rep.Channels[id], po)
		}
		s.sentS, s.lastS, s.detachedAt = seq, seq, p.now
		g.learnUsers(s, rep.KnownUsers)
		for _, en := range rep.Entries {
			s.lastS++
			e := &event{tail: []byte(en.Tail), ephemeral: en.Ephemeral, recv: recv, z: new(deflated)}
			s.ring.push(s.lastS, entry{ev: e, at: p.now})
		}
	})
	<-done
	g.focus(s, rep.Focus)
	if len(rep.Presence) > 0 {
		g.watchPresence(s, rep.Presence)
	}
	return s, nil
}
