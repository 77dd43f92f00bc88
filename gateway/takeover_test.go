package gateway

import (
	"sync"
	"sync/atomic"
	"testing"

	"parley"
)

// A node that takes over a session (a handover in a rolling restart)
// brings it up to its own stream of each channel without reading the
// store: from its tail of the stream (tail.go), and, for the events the
// session passed over in a passive channel, from the summary state the
// holder hands over (handoverReply.Passed).

// catchUps returns the node's catch-up counters: store reads, and the
// catch-ups answered from its stream's tail.
func catchUps(t *testing.T, e *env) (reads, fromTail float64) {
	t.Helper()
	return counterValue(t, e.reg, "parley_gateway_catchup_reads_total"),
		counterValue(t, e.reg, "parley_gateway_catchup_stream_hits_total")
}

// holdChannel makes the node's stream of the channel stop before its next
// event until the returned release is called (also at the end of the test).
func holdChannel(t *testing.T, e *env, channelID string) (release func()) {
	gate := make(chan struct{})
	var held atomic.Bool
	held.Store(true)
	hook := func(topic string, _ parley.Event) {
		if topic == parley.TopicChannel(channelID) && held.Load() {
			<-gate
		}
	}
	e.gw.dispatchHook.Store(&hook)
	var once sync.Once
	release = func() { once.Do(func() { held.Store(false); close(gate) }) }
	t.Cleanup(release)
	return release
}

// TestTakeoverCatchUpFromStreamTail: the holder's stream of #general is
// held up, so the session it hands over stands one… two events behind the
// stream of the node taking it over. That node gives the session those
// events from its tail of the stream, in order and once, with no read of
// the store; then the session goes on live.
func TestTakeoverCatchUpFromStreamTail(t *testing.T) {
	e := newEnv(t, nil)
	n2 := e.node("n2")
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	cb, _ := n2.identify(b, ws) // n2 follows #general
	ca, ready := e.identify(a, ws)
	e.post(b, general, "one")
	lastS := ca.waitEvents(parley.EventMessageCreated, 1)[0].S
	waitMessages(t, cb, general.ID, 1)
	ca.drop()
	e.waitDetached(ready.SessionID)

	release := holdChannel(t, e, general.ID)
	e.post(b, general, "two")
	e.post(b, general, "three")
	waitMessages(t, cb, general.ID, 3) // n2's stream is at "three", n1's at "one"
	reads0, tail0 := catchUps(t, n2)

	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": lastS})
	c2.nextOp("resumed")
	sameTexts(t, "a on n2", waitMessages(t, c2, general.ID, 2), []string{"two", "three"})
	reads, fromTail := catchUps(t, n2)
	if reads != reads0 || fromTail != tail0+1 {
		t.Fatalf("n2 caught the session up with %v store reads and %v from its tail, want 0 and 1", reads-reads0, fromTail-tail0)
	}
	release()
	e.post(b, general, "four")
	sameTexts(t, "a on n2", waitMessages(t, c2, general.ID, 3), []string{"two", "three", "four"})
	inOrderAfterResume(t, c2, general.ID)
	if got := resumeSources(t, n2.reg)["handover"]; got != 1 {
		t.Fatalf("handover resumes %v, want 1", got)
	}
}

// TestHandoverCarriesPassedOver: #general is passive for a's session on
// n1 (not in focus, view_min_members 0), which has passed over two events
// since its last summary when it resumes on n2. n2 follows the channel
// from where n1's stream had given it (not from the client's last
// summary, which would need a read of the store), sends the summary the
// session owed (their unread count, the @channel mention), and the
// session goes on gap-free.
func TestHandoverCarriesPassedOver(t *testing.T) {
	live := viewLive(func(c *parley.LiveConfig) { c.ViewSummarySeconds = parley.MaxViewSummarySeconds })
	e := newEnv(t, func(c *Config) { c.Live = live })
	n2 := e.nodeWith("n2", func(c *Config) { c.Live = live })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	cb, rb := n2.identify(b, ws) // n2 follows #general, b viewing it
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	n2.viewing(rb.SessionID, general.ID)
	ca, ready := e.identify(a, ws)

	// The first summary goes at once; the next not for a minute.
	first := e.post(b, general, "m1")
	ca.waitFor("the first summary", func() bool {
		return len(summariesOf(t, ca.frames, general.ID)) == 1
	})
	e.post(b, general, "m2")
	last := e.post(b, general, "m3 @channel")
	waitMessages(t, cb, general.ID, 3)
	waitUntil(t, "n1's session passed over m2 and m3", func() bool {
		var pos int64
		e.onSession(ready.SessionID, func(_ *partition, s *session) { pos = s.chans[general.ID].last })
		return pos == last.Seq
	})
	lastS := ca.events()[len(ca.events())-1].S
	ca.drop()
	e.waitDetached(ready.SessionID)
	reads0, tail0 := catchUps(t, n2)

	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": lastS})
	c2.nextOp("resumed")
	var sums []summaryFrame
	c2.waitFor("the owed summary", func() bool {
		sums = summariesOf(t, c2.frames, general.ID)
		return len(sums) == 1
	})
	if s := sums[0]; s.LastSeq != last.Seq || s.Unread != 2 || s.Mentions != 1 {
		t.Fatalf("summary %+v, want last_seq %d, 2 unread, 1 mention", s, last.Seq)
	}
	if reads, fromTail := catchUps(t, n2); reads != reads0 || fromTail != tail0 {
		t.Fatalf("n2 caught the session up (%v store reads, %v from its tail); it had nothing to catch up", reads-reads0, fromTail-tail0)
	}
	c2.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	n2.viewing(ready.SessionID, general.ID)
	e.post(b, general, "m4")
	waitMessages(t, c2, general.ID, 1)
	gapFree(t, channelStream(t, c2, general.ID), first.Seq)
	inOrderAfterResume(t, c2, general.ID)
}

// inOrderAfterResume fails unless the resumed client's frames have s one
// after another and the channel's seqs rise.
func inOrderAfterResume(t *testing.T, c *client, channelID string) {
	t.Helper()
	var lastSeq int64
	var lastS uint64
	for _, f := range c.events() {
		if lastS != 0 && f.S != lastS+1 {
			t.Fatalf("s %d after %d", f.S, lastS)
		}
		lastS = f.S
		if d := f.data(t); d.ChannelID == channelID && d.Seq != 0 {
			if d.Seq <= lastSeq {
				t.Fatalf("channel seq %d after %d (%s)", d.Seq, lastSeq, f.T)
			}
			lastSeq = d.Seq
		}
	}
}

// summariesOf returns the channel.summary frames of a channel.
func summariesOf(t *testing.T, fs []frame, channelID string) []summaryFrame {
	var out []summaryFrame
	for _, f := range fs {
		if f.Op == "event" && f.T == parley.EventChannelSummary {
			if d := summaryOf(t, f); d.ChannelID == channelID {
				out = append(out, d)
			}
		}
	}
	return out
}

// TestFocusReplayFromStreamTail: focusing a passive channel replays what
// the session passed over since its last summary; the node's tail of the
// stream holds it, so no read of the store is made.
func TestFocusReplayFromStreamTail(t *testing.T) {
	live := viewLive(func(c *parley.LiveConfig) { c.ViewSummarySeconds = parley.MaxViewSummarySeconds })
	e := newEnv(t, func(c *Config) { c.Live = live })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	ca, ready := e.identify(a, ws)
	first := e.post(b, general, "m1")
	ca.waitFor("the first summary", func() bool {
		return len(summariesOf(t, ca.frames, general.ID)) == 1
	})
	e.post(b, general, "m2")
	last := e.post(b, general, "m3")
	waitUntil(t, "m2 and m3 passed over", func() bool {
		var pos int64
		e.onSession(ready.SessionID, func(_ *partition, s *session) { pos = s.chans[general.ID].last })
		return pos == last.Seq
	})
	reads0, tail0 := catchUps(t, e)
	ca.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	sameTexts(t, "a", waitMessages(t, ca, general.ID, 2), []string{"m2", "m3"})
	if reads, fromTail := catchUps(t, e); reads != reads0 || fromTail != tail0+1 {
		t.Fatalf("the replay took %v store reads and %v answers from the tail, want 0 and 1", reads-reads0, fromTail-tail0)
	}
	gapFree(t, channelStream(t, ca, general.ID), first.Seq-1)
}

// TestStreamTailOffReadsTheStore: with the tail off (StreamTail < 0) the
// same takeover reads the store: the counters above see the difference.
func TestStreamTailOffReadsTheStore(t *testing.T) {
	e := newEnv(t, nil)
	n2 := e.nodeWith("n2", func(c *Config) { c.StreamTail = -1 })
	a, b := e.user("a"), e.user("b")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	cb, _ := n2.identify(b, ws)
	ca, ready := e.identify(a, ws)
	e.post(b, general, "one")
	lastS := ca.waitEvents(parley.EventMessageCreated, 1)[0].S
	ca.drop()
	e.waitDetached(ready.SessionID)
	holdChannel(t, e, general.ID)
	e.post(b, general, "two")
	waitMessages(t, cb, general.ID, 2)
	reads0, _ := catchUps(t, n2)
	c2 := n2.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": lastS})
	c2.nextOp("resumed")
	sameTexts(t, "a on n2", waitMessages(t, c2, general.ID, 1), []string{"two"})
	if reads, fromTail := catchUps(t, n2); reads != reads0+1 || fromTail != 0 {
		t.Fatalf("%v store reads and %v from the tail, want 1 and 0", reads-reads0, fromTail)
	}
}
