package gateway

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/hot"
)

// View-aware delivery (view.go, docs/hot-channels.md). view_min_members 0
// makes every channel passive for a session that does not have it in
// focus, so small workspaces show it.

func viewLive(mutate func(c *parley.LiveConfig)) *liveSwitch {
	l := newLiveSwitch()
	c := l.LiveConfig()
	c.ViewMinMembers = 0
	c.ViewSummarySeconds = 1
	if mutate != nil {
		mutate(&c)
	}
	l.cur.Store(&c)
	return l
}

type summaryFrame struct {
	ChannelID   string `json:"channel_id"`
	LastSeq     int64  `json:"last_seq"`
	Unread      int    `json:"unread"`
	Mentions    int    `json:"mentions"`
	MemberCount int64  `json:"member_count"`
}

func summaryOf(t *testing.T, f frame) summaryFrame {
	t.Helper()
	var d summaryFrame
	if err := json.Unmarshal(f.D, &d); err != nil {
		t.Fatalf("channel.summary %s: %v", f.D, err)
	}
	return d
}

// channelStream is what the client was given of a channel, in s order:
// each event's seq, and for a summary its last_seq (negated).
func channelStream(t *testing.T, c *client, channelID string) []int64 {
	t.Helper()
	var out []int64
	for _, f := range c.events() {
		switch {
		case f.T == parley.EventChannelSummary:
			if d := summaryOf(t, f); d.ChannelID == channelID {
				out = append(out, -d.LastSeq)
			}
		case parley.IsEphemeralEvent(f.T) || f.T == parley.EventChannelHot:
		default:
			if d := f.data(t); d.ChannelID == channelID && d.Seq > 0 {
				out = append(out, d.Seq)
			}
		}
	}
	return out
}

// gapFree fails unless the stream moves one seq at a time, a summary
// jumping to its last_seq, starting after from.
func gapFree(t *testing.T, stream []int64, from int64) {
	t.Helper()
	pos := from
	for _, v := range stream {
		switch {
		case v < 0 && -v > pos:
			pos = -v
		case v == pos+1:
			pos = v
		default:
			t.Fatalf("stream %v is not gap-free after %d (at %d)", stream, from, v)
		}
	}
}

// TestPassiveChannelGetsSummaries: a session without the channel in focus
// gets a summary of its messages (the unread ones by others, the mentions
// of its user) instead of the messages; one with it in focus gets every
// message; after the summary, the next event follows its last_seq.
func TestPassiveChannelGetsSummaries(t *testing.T) {
	live := viewLive(nil)
	e, dir := jitEnv(t, func(c *Config) { c.Live = live })
	a, b, c := e.user("alice"), e.user("bob"), e.user("carol")
	ws := e.workspace(a, b, c)
	dir.actor = a.ID
	general := generalOf(t, e, a, ws)
	cb, rb := e.identify(b, ws)
	cc, rc := e.identify(c, ws)
	cc.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	e.viewing(rc.SessionID, general.ID)
	start := general.LastSeq

	var last *parley.Message
	for i := range 5 {
		text := fmt.Sprintf("m%d", i)
		if i == 2 {
			text += " @" + b.Handle
		}
		if i == 3 {
			text += " @channel"
		}
		last = e.post(a, general, text)
	}
	e.post(b, general, "bob's own") // not unread for bob
	cc.waitEvents(parley.EventMessageCreated, 6)
	var unread, mentions int
	var lastSeq int64
	cb.waitFor("summaries up to bob's own message", func() bool {
		unread, mentions, lastSeq = 0, 0, 0
		for _, f := range cb.frames {
			if f.Op == "event" && f.T == parley.EventChannelSummary {
				d := summaryOf(t, f)
				unread, mentions, lastSeq = unread+d.Unread, mentions+d.Mentions, d.LastSeq
			}
		}
		return lastSeq == last.Seq+1
	})
	if unread != 5 || mentions != 2 {
		t.Fatalf("summaries: %d unread, %d mentions; want 5 and 2", unread, mentions)
	}
	for _, f := range cb.events() {
		if f.T == parley.EventMessageCreated {
			t.Fatalf("a passive session got a message: %s", f.D)
		}
	}
	if s := summaryOf(t, cb.waitEvents(parley.EventChannelSummary, 1)[0]); s.MemberCount != 3 {
		t.Fatalf("summary member_count %d, want 3", s.MemberCount)
	}

	// In focus from here: the next message follows the summary.
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	e.viewing(rb.SessionID, general.ID)
	next := e.post(a, general, "now you see it")
	got := cb.waitEvents(parley.EventMessageCreated, 1)
	if d := got[0].data(t); d.Seq != next.Seq {
		t.Fatalf("first message after focus has seq %d, want %d", d.Seq, next.Seq)
	}
	gapFree(t, channelStream(t, cb, general.ID), start)
	gapFree(t, channelStream(t, cc, general.ID), start)
}

// waitPosition waits until the session's position in the channel (what it
// was given or passed over) is seq.
func (e *env) waitPosition(sessionID, channelID string, seq int64) {
	e.t.Helper()
	waitUntil(e.t, fmt.Sprintf("position %d in %s", seq, channelID), func() bool {
		var last int64
		e.onSession(sessionID, func(_ *partition, s *session) {
			if cp := s.chans[channelID]; cp != nil {
				last = cp.last
			}
		})
		return last == seq
	})
}

// TestFocusReplaysPassedOver: what a session passed over since its last
// summary is replayed, in order, when it brings the channel into focus; more
// than view_replay_max is summarized instead.
func TestFocusReplaysPassedOver(t *testing.T) {
	live := viewLive(func(c *parley.LiveConfig) { c.ViewSummarySeconds = 60; c.ViewReplayMax = 3 })
	e := newEnv(t, func(c *Config) { c.Live = live })
	a, b := e.user("alice"), e.user("bob")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	other := e.channel(ws, a, "other", parley.KindPublic)
	if _, err := e.store.JoinChannel(t.Context(), b.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	cb, rb := e.identify(b, ws)
	start := general.LastSeq

	// The first summary goes out at once; the next waits its 60 s.
	e.post(a, general, "first")
	first := summaryOf(t, cb.waitEvents(parley.EventChannelSummary, 1)[0])
	var want []int64
	for i := range 3 {
		want = append(want, e.post(a, general, fmt.Sprintf("passed over %d", i)).Seq)
	}
	e.waitPosition(rb.SessionID, general.ID, want[2])
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	got := cb.waitEvents(parley.EventMessageCreated, 3)
	for i, f := range got {
		if d := f.data(t); d.Seq != want[i] {
			t.Fatalf("replayed message %d has seq %d, want %d", i, d.Seq, want[i])
		}
	}
	if n := len(cb.waitEvents(parley.EventChannelSummary, 1)); n != 1 || first.LastSeq != want[0]-1 {
		t.Fatalf("%d summaries, first up to %d; want 1 up to %d", n, first.LastSeq, want[0]-1)
	}
	gapFree(t, channelStream(t, cb, general.ID), start)

	// Too many to replay: one summary, then live.
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{}})
	e.viewing(rb.SessionID)
	e.post(a, other, "marker") // other is passive too; its summary shows bob's partition moved on
	cb.waitEvents(parley.EventChannelSummary, 2)
	var many []int64
	for i := range 5 {
		many = append(many, e.post(a, general, fmt.Sprintf("many %d", i)).Seq)
	}
	e.waitPosition(rb.SessionID, general.ID, many[4])
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	cb.waitFor("a summary up to the fifth", func() bool {
		for _, f := range cb.frames {
			if f.T == parley.EventChannelSummary && summaryOf(t, f).LastSeq == many[4] {
				return true
			}
		}
		return false
	})
	if n := len(cb.waitEvents(parley.EventMessageCreated, 3)); n != 3 {
		t.Fatalf("%d messages after a focus with too many to replay, want the 3 replayed before", n)
	}
	gapFree(t, channelStream(t, cb, general.ID), start)
}

// TestDMsAreNeverPassive: direct messages arrive whatever the focus.
func TestDMsAreNeverPassive(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Live = viewLive(nil) })
	a, b := e.user("alice"), e.user("bob")
	ws := e.workspace(a, b)
	dm, _, err := e.store.OpenDM(t.Context(), a.ID, ws.ID, []string{b.ID})
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := e.identify(b, ws)
	e.post(a, dm, "psst")
	if d := cb.waitEvents(parley.EventMessageCreated, 1)[0].data(t); d.ChannelID != dm.ID {
		t.Fatalf("message in %s, want the DM %s", d.ChannelID, dm.ID)
	}
}

// TestViewDryRun: in dry run every event is delivered and the passive ones
// are counted.
func TestViewDryRun(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Live = viewLive(func(c *parley.LiveConfig) { c.ViewDryRun = true }) })
	a, b := e.user("alice"), e.user("bob")
	ws := e.workspace(a, b)
	general := generalOf(t, e, a, ws)
	cb, _ := e.identify(b, ws)
	e.post(a, general, "one")
	e.post(a, general, "two")
	cb.waitEvents(parley.EventMessageCreated, 2)
	waitUntil(t, "dry-run count", func() bool {
		return counterValue(t, e.reg, "parley_gateway_passive_events_total") >= 2
	})
	for _, f := range cb.events() {
		if f.T == parley.EventChannelSummary {
			t.Fatalf("a summary in dry run: %s", f.D)
		}
	}
}

// TestHotChannel: a channel turns hot (the node's real detector, with a low
// threshold); its viewers are told (channel.hot) and get every event, in
// batches; a member who is not looking gets summaries; typing is sampled;
// focusing the hot channel says it is hot.
func TestHotChannel(t *testing.T) {
	live := viewLive(func(c *parley.LiveConfig) {
		c.ViewMinMembers = 1000 // passive only because hot
		c.HotOnRate, c.HotOffRate, c.HotWindowSeconds, c.HotTTLSeconds = 2, 0, 5, 30
		c.HotBatchMs, c.HotTypingIntervalMs = 50, 60000
	})
	det, err := hot.New(hot.Config{Live: live, Logger: quietLogger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(det.Close)
	e := newEnv(t, func(c *Config) { c.Live, c.Hot, c.TypingInterval = live, det, time.Millisecond })
	a, b, c, x := e.user("alice"), e.user("bob"), e.user("carol"), e.user("xavier")
	ws := e.workspace(a, b, c, x)
	general := generalOf(t, e, a, ws)
	ca, _ := e.identify(a, ws)
	cb, rb := e.identify(b, ws)
	cc, _ := e.identify(c, ws)
	cx, rx := e.identify(x, ws)
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	e.viewing(rb.SessionID, general.ID)
	start := general.LastSeq

	var posted []*parley.Message
	for i := 0; !det.Hot(general.ID); i++ {
		if i > 200 {
			t.Fatal("the channel did not turn hot")
		}
		posted = append(posted, e.post(a, general, fmt.Sprintf("warm %d", i)))
	}
	on := cb.waitEvents(parley.EventChannelHot, 1)[0]
	var d struct {
		ChannelID string `json:"channel_id"`
		On        bool   `json:"on"`
	}
	if err := json.Unmarshal(on.D, &d); err != nil || d.ChannelID != general.ID || !d.On {
		t.Fatalf("channel.hot %s (%v)", on.D, err)
	}
	for i := range 5 {
		posted = append(posted, e.post(a, general, fmt.Sprintf("hot %d", i)))
	}
	last := posted[len(posted)-1].Seq
	cb.waitFor("every message", func() bool {
		n := 0
		for _, f := range cb.frames {
			if f.T == parley.EventMessageCreated {
				n++
			}
		}
		return n == len(posted)
	})
	gapFree(t, channelStream(t, cb, general.ID), start)
	waitUntil(t, "a hot batch flushed", func() bool { return counterValue(t, e.reg, "parley_gateway_hot_batches_total") > 0 })

	// Carol is not looking: once hot, summaries, up to the last message.
	cc.waitFor("a summary up to the last message", func() bool {
		for _, f := range cc.frames {
			if f.T == parley.EventChannelSummary && summaryOf(t, f).LastSeq == last {
				return true
			}
		}
		return false
	})
	gapFree(t, channelStream(t, cc, general.ID), start)
	for _, f := range cc.events() {
		if f.T == parley.EventChannelHot {
			t.Fatal("channel.hot went to a member who is not looking")
		}
	}

	// Typing: the first in the interval reaches the viewers, not the next.
	ca.send(map[string]any{"op": "typing", "channel_id": general.ID})
	cb.waitEvents(parley.EventTypingStarted, 1)
	cc.send(map[string]any{"op": "typing", "channel_id": general.ID})
	e.post(a, general, "after the typing")
	cb.waitFor("the message after the typing", func() bool {
		n := 0
		for _, f := range cb.frames {
			if f.T == parley.EventMessageCreated {
				n++
			}
		}
		return n == len(posted)+1
	})
	if n := len(cb.waitEvents(parley.EventTypingStarted, 1)); n != 1 {
		t.Fatalf("viewer got %d typing events in one interval, want 1", n)
	}
	waitUntil(t, "typing sampled", func() bool { return counterValue(t, e.reg, "parley_gateway_hot_typing_sampled_total") >= 1 })

	// Focusing the hot channel says it is hot.
	cx.send(map[string]any{"op": "focus", "channel_ids": []string{general.ID}})
	e.viewing(rx.SessionID, general.ID)
	cx.waitEvents(parley.EventChannelHot, 1)
}
