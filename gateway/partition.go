package gateway

import (
	"slices"
	"sync"
	"time"

	"parley"
)

// partition owns a share of the node's sessions (by hash of session id) and
// an index topic → those sessions. One goroutine runs it: it takes events
// and requests from its inbox, enqueues events to its sessions, and then
// flushes each session it touched once. Nothing in it blocks on a socket or
// on the store.
type partition struct {
	env   *partitionEnv // what it reaches outside itself (partition_env.go)
	id    int
	inbox chan item

	asyncMu   sync.Mutex
	async     []func() // guarded by asyncMu: requests from callbacks that must not block
	asyncWake chan struct{}

	// Owned by the partition goroutine.
	sessions   map[*session]struct{}
	index      map[string]*topicSet
	chanPos    map[string]int64 // per channel, the highest seq of the node's stream seen here
	dirty      []*session
	doomed     []doom
	scratch    []byte // one event frame being built
	corkBuf    []byte // the frames of one session's flush
	now        int64  // unix nanos, read once per batch
	flushEvery int
	flushes    uint64    // flushes so far, to sample the queue depth
	walk       *topicSet // the set a delivery loop is walking, if any
	batching   bool      // the loop delivers a hot channel's event: flush with the batch
	cur        *session  // the session a request is working on (partition_recover.go)
	walkTopic  string    // its topic
	delivered  int       // deliveries not yet added to the metric
	dropped    int       // ephemeral events dropped, not yet added to the metric

	jitMemo jitMemo // the variants with users of the event being delivered (jit.go)

	deflate deflateState // compression settings and counts (deflate.go)

	// View-aware delivery and hot channels (view.go).
	view        viewState
	members     map[string]memberCount // per channel followed here
	sumDue      []sumRef               // summaries pending
	sumArmed    bool                   // the summary timer is running
	batched     []*session             // sessions waiting for the hot batch
	batchArmed  bool                   // the batch timer is running
	typingAt    map[string]int64       // per hot channel, the last typing let through
	hotMemo     hotMemo
	passiveMemo hotMemo // mayBePassive's last answer
	passiveN    int     // passed-over events not yet added to the metric
	passiveDry  int     // dry run: events that would have been

	fillsOut map[fillRef]int64 // catch-ups asked for, with when (partition_follow.go)
}

// item is one inbox entry: an event for a topic, or a request to run.
type item struct {
	ev    *event
	topic string
	fn    func()
}

// topicSet is the partition's sessions that follow a topic.
//
// A delivery loop walks list while the sessions it delivers to may leave
// the topic (their user left the channel) or be added to it. While a loop
// walks the set, a removal leaves a nil hole in its slot instead of moving
// the last session into it (which the loop would then skip, and whose old
// slot it would read as nil); appends land past the loop's end. The loop
// closes the holes when it is done.
type topicSet struct {
	list  []*session
	holes int // nil slots left by removals during the current walk
}

// doom is a session to remove once the current delivery loop is done.
type doom struct {
	s      *session
	code   int // close code for an attached socket; 0: leave it
	reason string
}

// inboxSize bounds a partition's inbox; senders wait when it is full.
const inboxSize = 4096

// queueDepthSample: one flush in this many records its queue depth.
const queueDepthSample = 16

// maxBatch bounds how many inbox items one flush round takes.
const maxBatch = 1024

func newPartition(env *partitionEnv, id int) *partition {
	return &partition{
		env:       env,
		id:        id,
		inbox:     make(chan item, inboxSize),
		asyncWake: make(chan struct{}, 1),
		sessions:  map[*session]struct{}{},
		index:     map[string]*topicSet{},
		chanPos:   map[string]int64{},
		members:   map[string]memberCount{},
		typingAt:  map[string]int64{},
		// A burst may add this many frames to a queue before a flush.
		flushEvery: max(1, min(64, env.sendQueue/4)),
	}
}

// post runs fn on the partition goroutine, waiting if the inbox is full.
// Once the gateway has stopped, fn is dropped.
func (p *partition) post(fn func()) { p.send(item{fn: fn}) }

func (p *partition) send(it item) {
	select {
	case p.inbox <- it:
	case <-p.env.stop:
	}
}

// postAsync runs fn on the partition goroutine without ever waiting: for
// callbacks from the poller, timers and presence, which must not block.
func (p *partition) postAsync(fn func()) {
	p.asyncMu.Lock()
	p.async = append(p.async, fn)
	p.asyncMu.Unlock()
	select {
	case p.asyncWake <- struct{}{}:
	default:
	}
}

// run is the partition's goroutine, until stop is closed. A panic ends
// the round it happened in, never the loop (recover.go).
func (p *partition) run(stop <-chan struct{}) {
	tick := time.NewTicker(p.env.sweepEvery)
	defer tick.Stop()
	for !p.roundGuarded(stop, tick.C) {
	}
}

// round waits for work, does it, then removes the doomed sessions and
// flushes the touched ones. It reports whether stop was closed.
func (p *partition) round(stop <-chan struct{}, tick <-chan time.Time) bool {
	select {
	case <-stop:
		return true
	case it := <-p.inbox:
		p.startRound()
		p.handle(it)
		p.drain()
	case <-p.asyncWake:
		p.startRound()
		p.runAsync()
		p.drain()
	case <-tick:
		p.startRound()
		p.sweep()
	}
	p.reap()
	p.flushDirty()
	p.publishCounts()
	return false
}

// drain takes what else is waiting, up to maxBatch items, flushing the
// touched sessions every flushEvery items: a burst is written in batches of
// that many frames per session, and a session's queue holds only what its
// socket could not take.
func (p *partition) drain() {
	for i := 1; i <= maxBatch; i++ {
		select {
		case it := <-p.inbox:
			p.handle(it)
			if i%p.flushEvery == 0 {
				p.reap()
				p.flushDirty()
			}
		default:
			p.runAsync()
			return
		}
	}
	p.runAsync()
}

// startRound reads the clock for the round and forgets what was decided
// once per round (view.go's memos, the live settings).
func (p *partition) startRound() {
	p.now = p.env.now().UnixNano()
	p.hotMemo, p.passiveMemo = hotMemo{}, hotMemo{}
	p.view.at = 0
}

func (p *partition) runAsync() {
	p.asyncMu.Lock()
	fns := p.async
	p.async = nil
	p.asyncMu.Unlock()
	for _, fn := range fns {
		p.runGuarded(fn)
	}
}

func (p *partition) handle(it item) {
	if it.fn != nil {
		p.runGuarded(it.fn)
		return
	}
	p.deliver(it.topic, it.ev)
}

func (p *partition) publishCounts() {
	if p.delivered > 0 {
		p.env.metrics.deliveries.Add(float64(p.delivered))
		p.delivered = 0
	}
	if p.dropped > 0 {
		p.env.metrics.droppedEphemeral.Add(float64(p.dropped))
		p.dropped = 0
	}
	p.publishDeflate()
	p.publishView()
}

// deliver enqueues e to every session of this partition that follows
// topic and may see it.
func (p *partition) deliver(topic string, e *event) {
	kind := parley.TopicKindOf(topic)
	if kind == parley.TopicKindChannel && e.seq > p.chanPos[e.channelID] {
		p.chanPos[e.channelID] = e.seq
	}
	set := p.index[topic]
	if set == nil {
		return
	}
	if e.memberCount >= 0 {
		p.noteMembers(e.channelID, e.memberCount, e.seq)
	}
	if kind == parley.TopicKindChannel {
		if e.typ == parley.EventTypingStarted && p.sampleTyping(e) {
			return
		}
		p.batching = p.batchHot(e)
		defer func() { p.batching = false }()
	}
	p.walk, p.walkTopic = set, topic
	// Indexes below n stay put during the walk; list is read afresh each
	// time because an append may have moved it.
	for i, n := 0, len(set.list); i < n; i++ {
		if s := set.list[i]; s != nil && !s.removed {
			p.deliverGuarded(s, e, kind)
		}
	}
	p.endWalk()
	p.env.metrics.fanout.Observe(time.Duration(p.now - e.recv.UnixNano()).Seconds())
}

// deliverTo decides for one session. A channel's durable events reach a
// session through the channel's ordered stream, filtered by the session's
// position there; the copies that come on user and workspace topics go only
// to sessions that do not follow the channel, and tell a session's partition
// when its user joined or left one.
func (p *partition) deliverTo(s *session, e *event, kind parley.TopicKind) {
	if e.workspaceID != "" && e.workspaceID != s.workspaceID {
		return // a user topic carries all of the user's workspaces
	}
	switch e.typ {
	case parley.EventTypingStarted:
		if e.userID == s.userID || !s.viewing[e.channelID] {
			return // to the channel's viewers, not back to the typer
		}
	case parley.EventUserUpdated, parley.EventUserStatus:
		if kind == parley.TopicKindProfile && e.userID == s.userID {
			return // its own changes come on its user topic
		}
	case parley.EventSessionRevoked:
		// Internal to the servers: it closes that token's sockets.
		if e.tokenHash == s.tokenHash {
			p.kill(s, parley.CloseAuthFailed, "session revoked")
		}
		return
	case parley.EventWorkspaceMemberUpdated:
		// Internal to the servers: the user's role changed, so its
		// sessions follow the admins' topic or stop.
		if e.userID == s.userID {
			p.setAdmin(s, e.role.IsAdmin())
		}
		return
	case parley.EventUserDeactivated:
		// The account is gone: its own sessions close (its tokens are
		// revoked already); others see the user marked deactivated.
		if e.userID == s.userID {
			p.kill(s, parley.CloseAccountDeactivated, "account deactivated")
			return
		}
		if kind == parley.TopicKindProfile {
			p.enqueue(s, e)
		}
		return
	case parley.EventWorkspaceMemberLeft:
		// Removed from the workspace: the member.left of each of its
		// channels came first on the same user topic; the session has
		// nothing left to follow. Admins get the event.
		if e.userID == s.userID {
			p.kill(s, parley.CloseWorkspaceGone, "removed from the workspace")
			return
		}
		p.enqueue(s, e)
		return
	case parley.EventWorkspaceDeleted:
		// Internal to the servers: every session of the workspace closes
		// (the user topic carries it; deliverTo's first check keeps it to
		// the sessions of that workspace).
		p.kill(s, parley.CloseWorkspaceGone, "workspace deleted")
		return
	}
	if !e.durable() {
		p.enqueue(s, e)
		return
	}
	cp, follows := s.chans[e.channelID]
	if kind == parley.TopicKindChannel {
		if !follows || cp.catching || e.seq <= cp.last {
			return
		}
		if e.seq > cp.last+1 {
			p.startFill(s, e.channelID) // the session is behind the node's stream
			return
		}
		p.give(s, cp, e)
		if cp.preview && e.typ == parley.EventMemberJoined && e.userID == s.userID {
			cp.preview = false // joined while previewing: a member from here on
		}
		if (cp.until > 0 && cp.last >= cp.until) || (e.typ == parley.EventMemberLeft && e.userID == s.userID) {
			p.leave(s, e.channelID)
		}
		return
	}
	if follows {
		own := e.userID == s.userID && (e.typ == parley.EventMemberLeft || e.typ == parley.EventMemberJoined)
		if own && cp.until > 0 && e.seq > cp.until {
			// The user's membership changed again after a removal the
			// channel's stream has not brought yet: replayed once the
			// session has left (leave).
			cp.later = append(cp.later, e)
			return
		}
		if e.typ == parley.EventMemberLeft && e.userID == s.userID {
			p.leaveAfter(s, e.channelID, e.seq)
		}
		return
	}
	if e.seq <= s.left[e.channelID] {
		return // the channel's stream gave it before the session left
	}
	p.enqueue(s, e)
	joined := (e.typ == parley.EventMemberJoined && e.userID == s.userID) ||
		(e.typ == parley.EventChannelCreated && (kind == parley.TopicKindUser || e.userID == s.userID))
	if joined {
		p.join(s, e.channelID, e.seq)
	}
}

// enqueue gives e the session's next s and queues it, and reports whether
// it did. Ephemeral events are dropped, without an s, when the session is
// detached or its queue is half full. A connected session whose queue is
// full is cut with 4009; it stays resumable and keeps queueing.
func (p *partition) enqueue(s *session, e *event) bool {
	p.cur = s
	queued := int(s.lastS - s.sentS)
	if e.ephemeral && (s.c == nil || queued >= p.env.sendQueue/2) {
		p.dropped++
		return false
	}
	if s.c != nil && queued >= p.env.sendQueue {
		p.env.metrics.slowCloses.Inc()
		c := s.c
		p.detach(s)
		c.closeWith(parley.CloseSessionTimeout, "send queue full")
	}
	if s.ring.len() >= p.env.replayMax {
		if s.ring.first > s.sentS {
			// The oldest entry was never sent: no resume can replay it.
			p.kill(s, 0, "")
			return false
		}
		s.ring.pop()
	}
	e = p.withUsers(s, e)
	s.lastS++
	s.ring.push(s.lastS, entry{ev: e, at: p.now})
	p.delivered++
	if p.batching {
		p.markBatched(s)
	} else {
		p.markDirty(s)
	}
	return true
}

func (p *partition) markDirty(s *session) {
	if !s.dirty {
		s.dirty = true
		p.dirty = append(p.dirty, s)
	}
}

// flushDirty flushes each dirty session once. A session marked dirty again
// by its own flush (its socket drained meanwhile, so no writable call will
// come) stays in the list for the next round, and the partition wakes
// itself for that round.
func (p *partition) flushDirty() {
	n := len(p.dirty)
	for i := 0; i < n; i++ {
		s := p.dirty[i]
		s.dirty = false
		p.dirty[i] = nil
		if !s.removed {
			p.flushGuarded(s)
		}
	}
	rest := copy(p.dirty, p.dirty[n:])
	clear(p.dirty[rest:])
	p.dirty = p.dirty[:rest]
	if rest > 0 {
		p.wake()
	}
}

// wake makes the partition run another round soon, without waiting.
func (p *partition) wake() {
	select {
	case p.asyncWake <- struct{}{}:
	default:
	}
}

// flush writes the session's queued frames in one batch, as many as the
// socket's write buffer takes; the rest waits for the socket to drain.
func (p *partition) flush(s *session) {
	c := s.c
	if c == nil || (s.sentS == s.lastS && !s.resumeOwed) {
		return
	}
	budget := p.env.writeHighWater - c.pending()
	if budget <= 0 {
		if !c.armWritable() {
			p.markDirty(s) // drained meanwhile: next round
		}
		return
	}
	if p.flushes++; p.flushes%queueDepthSample == 0 {
		p.env.metrics.queueDepth.Observe(float64(s.lastS - s.sentS))
	}
	c.cork(p.corkBuf)
	z := p.deflateFor(c)
	failed := false
	for budget > 0 {
		if s.resumeOwed && s.sentS == s.resumeMark {
			p.scratch = appendJSON(p.scratch[:0], resumedFrame{Op: parley.OpResumed, Replayed: s.resumeCount})
			s.resumeOwed = false
			if !c.text(p.scratch) {
				failed = true
				break
			}
		}
		if s.sentS == s.lastS {
			break
		}
		en := s.ring.at(s.sentS + 1)
		if en == nil {
			break // cannot happen: unsent entries are never dropped
		}
		n, ok := p.writeEvent(c, z, s.sentS+1, en.ev)
		if !ok {
			failed = true
			break
		}
		s.sentS++
		budget -= n
	}
	p.corkBuf = c.uncork()
	if failed {
		return // the socket is closing: its close detaches the session
	}
	if s.sentS < s.lastS || s.resumeOwed {
		if !c.armWritable() {
			p.markDirty(s) // drained meanwhile: next round
		}
		return
	}
	if s.presenceRetry {
		s.presenceRetry = false
		p.env.refreshPresence(s)
	}
}

// detach forgets the session's socket; the session stays resumable.
func (p *partition) detach(s *session) {
	if s.c == nil {
		return
	}
	s.c = nil
	s.detachedAt = p.now
	s.resumeOwed = false
	p.env.presenceDisconnect(s)
}

// kill marks the session for removal after the current loop; an attached
// socket is closed with code (0: not closed).
func (p *partition) kill(s *session, code int, reason string) {
	if s.removed {
		return
	}
	s.removed = true
	p.doomed = append(p.doomed, doom{s: s, code: code, reason: reason})
}

// reap removes the doomed sessions: out of the index, their topics
// released, out of the registry.
func (p *partition) reap() {
	// Indexed, not ranged: a removal could doom another session.
	for i := 0; i < len(p.doomed); i++ {
		d := p.doomed[i]
		p.doomed[i] = doom{}
		p.reapGuarded(d)
	}
	p.doomed = p.doomed[:0]
}

func (p *partition) reapOne(d doom) {
	s := d.s
	if s.c != nil {
		c := s.c
		p.detach(s)
		if d.code != 0 {
			c.closeWith(d.code, d.reason)
		} else {
			c.closeWith(parley.CloseSessionTimeout, "session ended")
		}
	}
	for ch := range s.chans {
		p.indexRemove(parley.TopicChannel(ch), s)
		p.env.later(subOp{topic: parley.TopicChannel(ch), release: true})
	}
	for _, t := range s.topics {
		p.indexRemove(t, s)
		p.env.later(subOp{topic: t, release: true})
	}
	for id := range s.inView {
		p.indexRemove(parley.TopicProfile(id), s)
		p.env.later(subOp{topic: parley.TopicProfile(id), release: true})
	}
	clear(s.inView)
	clear(s.chans)
	s.ring.reset()
	delete(p.sessions, s)
	p.env.forget(s)
	s.setWatch(nil, nil)
	p.env.metrics.sessions.Dec()
}

func (p *partition) indexAdd(topic string, s *session) {
	set := p.index[topic]
	if set == nil {
		set = &topicSet{}
		p.index[topic] = set
	}
	set.list = append(set.list, s)
}

func (p *partition) indexRemove(topic string, s *session) {
	set := p.index[topic]
	if set == nil {
		return
	}
	for i, x := range set.list {
		if x == s {
			if set == p.walk {
				set.list[i] = nil // closed by endWalk
				set.holes++
				return
			}
			last := len(set.list) - 1
			set.list[i] = set.list[last]
			set.list[last] = nil
			set.list = set.list[:last]
			break
		}
	}
	if len(set.list) == 0 {
		delete(p.index, topic)
	}
}

// endWalk ends a delivery loop's walk of its set: the holes that
// removals left are closed, keeping the order of the rest, and a set left
// empty is dropped.
func (p *partition) endWalk() {
	set, topic := p.walk, p.walkTopic
	p.walk, p.walkTopic = nil, ""
	if set == nil || set.holes == 0 {
		return
	}
	set.holes = 0
	set.list = slices.DeleteFunc(set.list, func(s *session) bool { return s == nil })
	if len(set.list) == 0 && p.index[topic] == set {
		delete(p.index, topic)
	}
}

// sweep closes connections that stopped heartbeating, removes sessions
// whose resume window has passed, and trims replay rings by age.
func (p *partition) sweep() {
	hbDeadline := p.now - int64(p.env.heartbeat)*3/2
	windowDeadline := p.now - int64(p.env.resumeWindow)
	ttlDeadline := p.now - int64(p.env.replayTTL)
	for s := range p.sessions {
		if !s.removed {
			p.sweepGuarded(s, hbDeadline, windowDeadline, ttlDeadline)
		}
	}
	p.checkFills()
}

// sweepOne is the sweep of one session.
func (p *partition) sweepOne(s *session, hbDeadline, windowDeadline, ttlDeadline int64) {
	if s.c != nil {
		if c, ok := s.c.(*conn); ok && c.lastBeat.Load() < hbDeadline {
			p.detach(s)
			c.closeWith(parley.CloseSessionTimeout, "heartbeat timeout")
		}
	} else if s.detachedAt < windowDeadline {
		p.kill(s, 0, "")
		return
	}
	for en := s.ring.oldest(); en != nil && en.at < ttlDeadline; en = s.ring.oldest() {
		if s.ring.first > s.sentS {
			if s.c == nil {
				p.kill(s, 0, "") // unsent events expired: not resumable
			}
			break
		}
		s.ring.pop()
	}
}
