package gateway

import (
	"context"
	"crypto/subtle"
	"hash/maphash"
	"time"

	"parley"
	"parley/auth"
)

// Identify and resume: the two ways a connection gets a session.

// storeTimeout bounds the store reads of one identify or resume.
const storeTimeout = 10 * time.Second

// identify authenticates the token, checks the workspace membership, makes
// a session, subscribes the node to its topics and says ready.
func (c *conn) identify(f *inFrame) {
	if !c.admit() {
		return
	}
	defer c.releaseAdmission()
	g := c.g
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	hash := auth.HashToken(f.Token)
	login, err := g.store.SessionByToken(ctx, hash)
	if err == nil && !login.Allows(parley.ScopeChannelsRead) {
		// A bot token reads its channels through the gateway only with
		// channels:read (docs/integrations.md).
		err = parley.Errorf(parley.EFORBIDDEN, "this token lacks the %s scope", parley.ScopeChannelsRead)
	}
	if err != nil {
		c.authFailed("identify", err)
		return
	}
	if f.WorkspaceID == "" {
		c.authFailed("identify", parley.Errorf(parley.ENOTFOUND, "workspace_id is required"))
		return
	}
	// An id no row can hold names no workspace (PostgreSQL would refuse
	// it as an internal error).
	if err := parley.CheckText("workspace_id", f.WorkspaceID); err != nil {
		c.authFailed("identify", err)
		return
	}
	ws, err := g.store.GetWorkspace(ctx, login.UserID, f.WorkspaceID)
	if err != nil {
		c.authFailed("identify", err)
		return
	}
	bot := login.Scopes != nil
	botGen := g.botGen.Load() // before the check: see bots.go
	if err := g.botAllowed(ctx, bot, f.WorkspaceID); err != nil {
		c.authFailed("identify", err)
		return
	}
	refs, err := g.store.SessionChannels(ctx, login.UserID, f.WorkspaceID)
	if err != nil {
		c.authFailed("identify", err)
		return
	}

	s := g.newSession(g.cfg.NodeID+"."+randomID(10), login.UserID, f.WorkspaceID, hash)
	s.handle = g.handleOf(ctx, f.WorkspaceID, login.UserID)
	s.expiresAt = login.ExpiresAt
	s.bot.Store(bot)
	s.botGen = botGen
	admin := ws.Role.IsAdmin()
	topics := sessionTopics(login.UserID, f.WorkspaceID, admin)
	starts := make([]int64, len(refs))
	if err := g.acquireAll(topics, refs, starts); err != nil {
		g.log.Error("gateway subscribe failed", "user_id", login.UserID, "err", err)
		g.metrics.identifies.WithLabelValues("error").Inc()
		c.closeWith(parley.CloseUnknownError, "internal error")
		return
	}
	s.topics, s.admin = topics, admin
	g.registry.add(s)
	g.metrics.sessions.Inc()

	c.lastBeat.Store(g.now().UnixNano())
	c.sess.Store(s)
	c.identified.Store(true)
	c.timer.Stop()
	// Counted before ready goes out: a client that has its ready sees the
	// identify counted (TestIdentifyQueueAbsorbsBurst failed CI reading 9
	// of 10).
	g.metrics.identifies.WithLabelValues("ok").Inc()
	c.writeJSON(readyFrame{Op: parley.OpReady, SessionID: s.id, UserID: s.userID})
	g.presenceConnect(s)
	s.p.post(func() { s.p.addSession(s, c, refs, starts) })
}

// sessionTopics are the plain topics a session follows: its user's, and
// the workspace admins' when its user is one.
func sessionTopics(userID, workspaceID string, admin bool) []string {
	if admin {
		return []string{parley.TopicUser(userID), parley.TopicAdmins(workspaceID)}
	}
	return []string{parley.TopicUser(userID)}
}

// acquireAll takes the node references of a new session: its plain topics
// and its channels (starts receives where each channel's node stream began).
// On error, what was taken is given back.
func (g *Gateway) acquireAll(topics []string, refs []parley.ChannelRef, starts []int64) error {
	var taken []string
	for _, t := range topics {
		if _, err := g.hub.acquire(t, 0); err != nil {
			g.releaseAll(taken)
			return err
		}
		taken = append(taken, t)
	}
	for i, r := range refs {
		start, err := g.hub.acquire(parley.TopicChannel(r.ID), r.LastSeq)
		if err != nil {
			g.releaseAll(taken)
			return err
		}
		starts[i] = start
		taken = append(taken, parley.TopicChannel(r.ID))
	}
	return nil
}

func (g *Gateway) releaseAll(topics []string) {
	for _, t := range topics {
		g.hub.release(t)
	}
}

// authFailed closes the connection: 4004 when the store refused the
// token or the workspace, 4000 when it failed.
func (c *conn) authFailed(op string, err error) {
	switch parley.CloseCodeFor(err) {
	case parley.CloseAuthFailed:
		c.g.metrics.counter(op, "auth_failed").Inc()
		c.closeWith(parley.CloseAuthFailed, "authentication failed")
	default:
		c.g.log.Error("gateway "+op+" failed", "err", err)
		c.g.metrics.counter(op, "error").Inc()
		c.closeWith(parley.CloseUnknownError, "internal error")
	}
}

// resumeOutcome is what a partition says to a resume.
type resumeOutcome int

const (
	resumeOK resumeOutcome = iota
	resumeBadSeq
	resumeGone   // removed meanwhile
	resumeTooOld // the replay buffer no longer holds what the client missed
)

// resume takes over a session after a drop: the replay of what the client
// missed, then resumed.
func (c *conn) resume(f *inFrame) {
	if !c.admit() {
		return
	}
	defer c.releaseAdmission()
	g := c.g
	if f.Seq == nil || f.SessionID == "" {
		c.closeWith(parley.CloseDecodeError, "resume needs session_id and seq")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	hash := auth.HashToken(f.Token)
	// The token is checked without the store when this node holds the
	// session, or another node hands it over, and the token is the one the
	// session was identified with and has not expired: a revoked token's
	// sessions are removed by session.revoked (partition.go), so a held
	// session's token is live. Anything else asks the store, as identify
	// does, which tells a bad token (4004) from an unknown session.
	s := g.registry.get(f.SessionID)
	source := "buffer"
	if s == nil {
		source = "handover"
		var out resumeOutcome
		s, out = g.handover(ctx, f.SessionID, hash, *f.Seq)
		switch out {
		case resumeBadSeq:
			g.metrics.resumes.WithLabelValues("invalid_seq").Inc()
			c.closeWith(parley.CloseInvalidSeq, "resume seq is ahead of the session")
			return
		case resumeTooOld:
			c.invalidSession("replay_unavailable")
			return
		}
	}
	if s == nil || !s.tokenValid(hash, g.now()) {
		g.metrics.resumeTokenChecks.WithLabelValues("store").Inc()
		login, err := g.store.SessionByToken(ctx, hash)
		if err == nil && !login.Allows(parley.ScopeChannelsRead) {
			err = parley.Errorf(parley.EFORBIDDEN, "this token lacks the %s scope", parley.ScopeChannelsRead)
		}
		if err != nil {
			c.authFailed("resume", err)
			return
		}
		if s == nil || s.tokenHash != hash || s.userID != login.UserID {
			c.invalidSession("unknown_session")
			return
		}
		if login.Scopes != nil {
			s.markBot() // a session handed over by a node that did not say
		}
	} else {
		g.metrics.resumeTokenChecks.WithLabelValues("session").Inc()
	}
	if s.isBot() {
		if err := g.botAllowed(ctx, true, s.workspaceID); err != nil {
			// Missed the change that closed it (bots.go): it goes now.
			s.p.postAsync(func() { s.p.closeBot(s) })
			c.authFailed("resume", err)
			return
		}
	}
	res := make(chan resumeOutcome, 1)
	s.p.post(func() {
		out := resumeGone // if attach panics
		defer func() { res <- out }()
		out = s.p.attach(s, c, *f.Seq)
	})
	switch <-res {
	case resumeOK:
		c.identified.Store(true)
		c.timer.Stop()
		g.metrics.resumes.WithLabelValues("ok").Inc()
		g.metrics.resumeSources.WithLabelValues(source).Inc()
		g.refreshPresence(s)
	case resumeBadSeq:
		g.metrics.resumes.WithLabelValues("invalid_seq").Inc()
		c.closeWith(parley.CloseInvalidSeq, "resume seq is ahead of the session")
	case resumeTooOld:
		c.invalidSession("replay_unavailable")
	default:
		c.invalidSession("unknown_session")
	}
}

// tokenValid reports whether hash is the hash of the token s was
// identified with (compared in constant time) and that login has not
// expired by now. A session whose expiry is unknown is not vouched for.
func (s *session) tokenValid(hash string, now time.Time) bool {
	if subtle.ConstantTimeCompare([]byte(s.tokenHash), []byte(hash)) != 1 {
		return false
	}
	return !s.expiresAt.IsZero() && now.Before(s.expiresAt)
}

// invalidSession tells the client to boot again; the connection stays open
// for an identify.
func (c *conn) invalidSession(reason string) {
	c.g.metrics.resumes.WithLabelValues(reason).Inc()
	c.g.metrics.resumeSources.WithLabelValues("sync").Inc()
	c.writeJSON(invalidSessionFrame{Op: parley.OpInvalidSession, Reason: reason})
}

// partitionOf picks a session's partition by its id.
func (g *Gateway) partitionOf(id string) *partition {
	return g.parts[maphash.String(g.seed, id)%uint64(len(g.parts))]
}
