package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/promutil"
)

// View-aware delivery and hot channels (docs/hot-channels.md).
//
// A session follows every channel its user is in, but a huge or hot channel
// that it does not have in focus is passive for it: the channel's durable
// events move the session's position (chanPos.last) without being queued,
// and a channel.summary {channel_id, last_seq, unread, mentions,
// member_count} is queued instead, at most once per view_summary_seconds.
// The summary moves the position the client sees (chanPos.given) to its
// last_seq, so the channel stays gap-free for the client: what it is sent
// of the channel is either events in seq order or summaries that cover the
// events in between. Focusing the channel replays what the session missed
// since its last summary (through the node's shared catch-up reads) or, if
// that is more than view_replay_max events, sends one last summary.
//
// A hot channel's events go to its viewers batched: the sessions are
// flushed together once per hot_batch_ms instead of at once, and the
// channel's typing is sampled.
//
// All of it runs on the session's partition goroutine.

// viewState is a partition's copy of the live view and hot settings, read
// at most once per round.
type viewState struct {
	at          int64 // 1 once read this round (startRound clears it)
	on          bool  // view-aware delivery changes delivery
	dry         bool  // it only counts
	minMembers  int64
	every       int64 // ns between two summaries of a channel to a session
	replayMax   int64
	batch       time.Duration // hot batching window; 0: off
	typingEvery int64         // ns between two typing events of a hot channel
	collapsed   bool          // collapsed threads: replies do not count as unread
}

// summaryTick is how often a partition looks at its due summaries.
const summaryTick = 250 * time.Millisecond

func (p *partition) viewCfg() *viewState {
	v := &p.view
	if v.at == 0 {
		c := p.env.live.LiveConfig()
		v.at = 1
		v.on = c.ViewEnabled && !c.ViewDryRun
		v.dry = c.ViewEnabled && c.ViewDryRun
		v.minMembers = int64(c.ViewMinMembers)
		v.every = int64(time.Duration(max(1, c.ViewSummarySeconds)) * time.Second)
		v.replayMax = int64(c.ViewReplayMax)
		v.batch = 0
		v.typingEvery = 0
		if c.HotEnabled && !c.HotDryRun {
			v.batch = time.Duration(c.HotBatchMs) * time.Millisecond
			v.typingEvery = int64(time.Duration(c.HotTypingIntervalMs) * time.Millisecond)
		}
		v.collapsed = c.CollapsedThreads
	}
	return v
}

// hot reports whether the channel is hot (never without a detector),
// asking the detector once per channel and round.
func (p *partition) hot(channelID string) bool {
	if p.env.hot == nil {
		return false
	}
	m := &p.hotMemo
	if m.channelID != channelID || m.at == 0 {
		m.channelID, m.at, m.on = channelID, 1, p.env.hot.Hot(channelID)
	}
	return m.on
}

// hotMemo is a per-round answer about one channel (the hot detector's,
// or mayBePassive's), kept because a delivery asks it once per session.
type hotMemo struct {
	channelID string
	at        int64 // 1: set this round; startRound clears it
	on        bool
}

// publishView adds the partition's view counts to the metrics.
func (p *partition) publishView() {
	if p.passiveN > 0 {
		p.env.view.passiveEvents.WithLabelValues("summarized").Add(float64(p.passiveN))
		p.passiveN = 0
	}
	if p.passiveDry > 0 {
		p.env.view.passiveEvents.WithLabelValues("dry_run").Add(float64(p.passiveDry))
		p.passiveDry = 0
	}
}

// passive reports whether the channel's events reach the session as
// summaries: a huge or hot channel (never a DM or group DM) that the
// session does not have in focus. With dry run on it counts and says no.
func (p *partition) passive(s *session, channelID string) bool {
	if !p.mayBePassive(channelID) || s.viewing[channelID] {
		return false
	}
	if p.viewCfg().dry {
		p.passiveDry++
		return false
	}
	return true
}

// mayBePassive reports whether the channel is passive for the sessions
// that do not have it in focus: view-aware delivery on (or in dry run), not
// a DM, huge or hot. It is decided once per channel and round, not per
// session (a delivery walks thousands).
func (p *partition) mayBePassive(channelID string) bool {
	m := &p.passiveMemo
	if m.channelID == channelID && m.at != 0 {
		return m.on
	}
	v := p.viewCfg()
	on := (v.on || v.dry) && !strings.HasPrefix(channelID, parley.PrefixDM) &&
		(p.members[channelID].n > v.minMembers || p.hot(channelID))
	m.channelID, m.at, m.on = channelID, 1, on
	return on
}

// memberCount is a partition's knowledge of a channel's member count: from
// the session refs read at identify and from member events, the newest by
// seq.
type memberCount struct {
	n   int64
	seq int64
}

func (p *partition) noteMembers(channelID string, n, seq int64) {
	if mc, ok := p.members[channelID]; !ok || seq >= mc.seq {
		p.members[channelID] = memberCount{n: n, seq: seq}
	}
}

// give hands a channel's durable event, next in the session's position, to
// the session: queued, or counted toward a summary when the channel is
// passive for it. It reports whether the event was queued.
func (p *partition) give(s *session, cp *chanPos, e *event) bool {
	if !p.names(s, e) && p.passive(s, e.channelID) {
		cp.last = e.seq
		p.countPending(s, cp, e)
		return false
	}
	if cp.given < cp.last {
		p.summarize(s, e.channelID, cp) // what was passed over, first
	}
	// The position moves once the event is queued: a panic in between
	// leaves it behind, and the resync reads the event again.
	p.enqueue(s, e)
	cp.last, cp.given = e.seq, e.seq
	return true
}

// names reports whether e concerns the session's user or the channel
// itself, so that it is sent even to a passive session: the user's own
// membership changes and the channel's own lifecycle (renames, archiving),
// which the client's channel list shows.
func (p *partition) names(s *session, e *event) bool {
	switch e.typ {
	case parley.EventMemberJoined, parley.EventMemberLeft:
		return e.userID == s.userID
	case parley.EventChannelCreated, parley.EventChannelUpdated, parley.EventChannelArchived, parley.EventChannelDeleted:
		return true
	}
	return false
}

// countPending adds a passed-over event to the session's pending summary of
// the channel and makes sure the summary is scheduled.
func (p *partition) countPending(s *session, cp *chanPos, e *event) {
	p.passiveN++
	if e.typ == parley.EventMessageCreated && e.msgUser != s.userID && (e.msgRoot == "" || !p.viewCfg().collapsed) {
		cp.unread++
		if e.mentionsAll || (s.handle != "" && e.mentions(s.handle)) {
			cp.mentions++
		}
	}
	if cp.sumQueued {
		return
	}
	cp.sumQueued = true
	p.sumDue = append(p.sumDue, sumRef{s: s, channelID: e.channelID})
	p.armSummaries()
}

// owePassed sets a handed-over session's position in a channel whose
// newest events it passed over on the node it came from: the client has
// given; the stream gave it up to po.Last, counted in po. The summary is
// owed as if those events had passed here.
func (p *partition) owePassed(s *session, channelID string, given int64, po passedOver) {
	cp := s.chans[channelID]
	if cp == nil || cp.last != po.Last {
		return
	}
	cp.given, cp.unread, cp.mentions = given, po.Unread, po.Mentions
	if !cp.sumQueued {
		cp.sumQueued = true
		p.sumDue = append(p.sumDue, sumRef{s: s, channelID: channelID})
		p.armSummaries()
	}
}

// sumRef is a session's channel with a summary pending.
type sumRef struct {
	s         *session
	channelID string
}

// armSummaries starts the partition's summary timer if it is not running.
func (p *partition) armSummaries() {
	if p.sumArmed {
		return
	}
	p.sumArmed = true
	time.AfterFunc(summaryTick, func() { p.postAsync(p.runSummaries) })
}

// runSummaries queues the summaries that are due and keeps the others.
func (p *partition) runSummaries() {
	p.sumArmed = false
	every := p.viewCfg().every
	keep := p.sumDue[:0]
	for _, r := range p.sumDue {
		cp := r.s.chans[r.channelID]
		if r.s.removed || cp == nil || !cp.sumQueued {
			continue
		}
		if cp.given >= cp.last {
			cp.sumQueued = false // given meanwhile (an event, a replay)
			continue
		}
		if cp.sumAt != 0 && p.now-cp.sumAt < every {
			keep = append(keep, r)
			continue
		}
		p.summarize(r.s, r.channelID, cp)
	}
	clear(p.sumDue[len(keep):])
	p.sumDue = keep
	if len(p.sumDue) > 0 {
		p.armSummaries()
	}
}

// summaryData is the d of a channel.summary.
type summaryData struct {
	ChannelID   string `json:"channel_id"`
	LastSeq     int64  `json:"last_seq"`
	Unread      int    `json:"unread"`
	Mentions    int    `json:"mentions"`
	MemberCount int64  `json:"member_count"`
}

// summarize queues a channel.summary covering the session's position in
// the channel up to cp.last, and moves what the client has to it.
func (p *partition) summarize(s *session, channelID string, cp *chanPos) {
	if cp.given >= cp.last {
		return
	}
	d, _ := json.Marshal(summaryData{ChannelID: channelID, LastSeq: cp.last, Unread: cp.unread,
		Mentions: cp.mentions, MemberCount: p.members[channelID].n})
	ev := &event{workspaceID: s.workspaceID, channelID: channelID, typ: parley.EventChannelSummary,
		tail: encodeTail(parley.EventChannelSummary, d), recv: time.Unix(0, p.now), z: new(deflated)}
	if !p.enqueue(s, ev) {
		return
	}
	cp.given, cp.unread, cp.mentions, cp.sumAt, cp.sumQueued = cp.last, 0, 0, p.now, false
	p.env.view.summaries.Inc()
}

// focusChanged makes the channels newly in focus active for the session:
// what it passed over since its last summary is replayed from the log
// (through the shared catch-up reads), or, when that is more than
// view_replay_max events, summarized at once. A hot channel among them is
// announced (channel.hot on).
func (p *partition) focusChanged(s *session, added []string) {
	v := p.viewCfg()
	for _, id := range added {
		cp := s.chans[id]
		if cp == nil {
			continue
		}
		if p.hot(id) {
			p.enqueue(s, p.hotEvent(s.workspaceID, id, true))
		}
		if cp.given >= cp.last || cp.catching {
			continue
		}
		if cp.last-cp.given > v.replayMax {
			p.summarize(s, id, cp)
			continue
		}
		cp.last, cp.unread, cp.mentions, cp.sumQueued = cp.given, 0, 0, false
		p.env.view.replays.Inc()
		p.startFill(s, id)
	}
}

// hotChanged passes a change of a channel's hot mark to every partition
// (the detector's Watch callback: it must not block).
func (g *Gateway) hotChanged(channelID string, on bool) {
	g.viewStats.hotNotices.Inc()
	for _, p := range g.parts {
		p.postAsync(func() { p.hotChanged(channelID, on) })
	}
}

// handleOf is the user's handle, for counting the mentions of summaries;
// "" when the node has no user directory (then only @channel and
// @everyone count).
func (g *Gateway) handleOf(ctx context.Context, workspaceID, userID string) string {
	if g.jit.dir == nil {
		return ""
	}
	us, err := g.jit.dir.Users(ctx, workspaceID, []string{userID})
	if err != nil || len(us) == 0 {
		return ""
	}
	return us[0].Handle
}

// hotEvent is the channel.hot event of a channel.
func (p *partition) hotEvent(workspaceID, channelID string, on bool) *event {
	d, _ := json.Marshal(struct {
		ChannelID string `json:"channel_id"`
		On        bool   `json:"on"`
	}{channelID, on})
	return &event{workspaceID: workspaceID, channelID: channelID, typ: parley.EventChannelHot,
		tail: encodeTail(parley.EventChannelHot, d), recv: time.Unix(0, p.now), z: new(deflated)}
}

// hotChanged tells the channel's viewers on this partition that it turned
// hot or cooled.
func (p *partition) hotChanged(channelID string, on bool) {
	if !on {
		delete(p.typingAt, channelID)
	}
	set := p.index[parley.TopicChannel(channelID)]
	if set == nil {
		return
	}
	var ev *event
	for _, s := range set.list {
		if s == nil || s.removed || !s.viewing[channelID] {
			continue
		}
		if ev == nil || ev.workspaceID != s.workspaceID {
			ev = p.hotEvent(s.workspaceID, channelID, on)
		}
		p.cur = s
		p.enqueue(s, ev)
	}
}

// batchHot reports whether the deliveries of e go out in the hot channel's
// next batch rather than at once.
func (p *partition) batchHot(e *event) bool {
	return e.durable() && p.viewCfg().batch > 0 && p.hot(e.channelID)
}

// markBatched defers the session's flush to the partition's next hot batch.
func (p *partition) markBatched(s *session) {
	if s.dirty || s.batched {
		return
	}
	s.batched = true
	p.batched = append(p.batched, s)
	if !p.batchArmed {
		p.batchArmed = true
		time.AfterFunc(p.viewCfg().batch, func() { p.postAsync(p.flushBatch) })
	}
}

// flushBatch marks the batched sessions dirty: the round flushes them.
func (p *partition) flushBatch() {
	p.batchArmed = false
	for i, s := range p.batched {
		p.batched[i] = nil
		s.batched = false
		if !s.removed {
			p.markDirty(s)
		}
	}
	p.batched = p.batched[:0]
	p.env.view.batches.Inc()
}

// sampleTyping reports whether a typing event of a hot channel is dropped:
// at most one per hot_typing_interval_ms reaches the channel's viewers.
func (p *partition) sampleTyping(e *event) bool {
	v := p.viewCfg()
	if v.typingEvery <= 0 || !p.hot(e.channelID) {
		return false
	}
	if last, ok := p.typingAt[e.channelID]; ok && p.now-last < v.typingEvery {
		p.env.view.typingSampled.Inc()
		return true
	}
	p.typingAt[e.channelID] = p.now
	return false
}

// viewMetrics are the metrics of view-aware delivery and hot channels.
type viewMetrics struct {
	passiveEvents *prometheus.CounterVec
	summaries     prometheus.Counter
	replays       prometheus.Counter
	batches       prometheus.Counter
	typingSampled prometheus.Counter
	hotNotices    prometheus.Counter
}

func newViewMetrics(reg prometheus.Registerer) *viewMetrics {
	m := &viewMetrics{
		passiveEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_passive_events_total",
			Help: "Channel events a session was not sent because the channel is passive for it (summarized), or would not have been in dry run (dry_run)."}, []string{"mode"}),
		summaries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_summaries_total", Help: "channel.summary events queued to sessions."}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_focus_replays_total", Help: "Channels brought into focus whose passed-over events were replayed from the log."}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_hot_batches_total", Help: "Hot-channel batches flushed by partitions."}),
		typingSampled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_hot_typing_sampled_total", Help: "Typing events of hot channels not delivered (sampled out)."}),
		hotNotices: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_hot_notices_total", Help: "channel.hot transitions this node passed to its partitions."}),
	}
	m.passiveEvents = promutil.Register(reg, m.passiveEvents)
	m.summaries = promutil.Register(reg, m.summaries)
	m.replays = promutil.Register(reg, m.replays)
	m.batches = promutil.Register(reg, m.batches)
	m.typingSampled = promutil.Register(reg, m.typingSampled)
	m.hotNotices = promutil.Register(reg, m.hotNotices)
	return m
}
