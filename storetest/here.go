package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"parley"
)

// Contract tests of @here: it reaches the members (in a thread, the
// followers) that the presence snapshot says are active when the message is
// written, and the stored counts agree with the mention events sent.
//
// The snapshot here is ActiveSet, a stand-in for the presence tracker: the
// tracker is a separate component with its own suite, and the gateway's
// tests run @here with the real one on the embedded bus.

func init() {
	registerHarness("Mentions/HereReachesActiveOnly", testHereActiveOnly)
	registerHarness("Mentions/HereInThread", testHereInThread)
}

// ActiveSet is a parley.PresenceSnapshot over a set a test changes.
type ActiveSet struct {
	mu     sync.Mutex
	active map[string]bool // guarded by mu
	asked  [][]string      // guarded by mu; every question, in order
}

var _ parley.PresenceSnapshot = (*ActiveSet)(nil)

// Set makes exactly users active.
func (a *ActiveSet) Set(users ...*parley.User) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active = map[string]bool{}
	for _, u := range users {
		a.active[u.ID] = true
	}
}

// ActiveUsers returns those of userIDs in the set.
func (a *ActiveSet) ActiveUsers(_ context.Context, userIDs []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, append([]string(nil), userIDs...))
	var out []string
	for _, id := range userIDs {
		if a.active[id] {
			out = append(out, id)
		}
	}
	return out
}

// lastAsked returns the ids of the last question.
func (a *ActiveSet) lastAsked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.asked) == 0 {
		return nil
	}
	return a.asked[len(a.asked)-1]
}

func newHereEnv(t *testing.T, h Harness) (*threadEnv, *ActiveSet) {
	t.Helper()
	if h.SetPresence == nil {
		t.Skip("the store takes no presence snapshot")
	}
	e := newThreadEnv(t, h)
	a := &ActiveSet{}
	h.SetPresence(t, e.s, a)
	return e, a
}

// mentionEvents counts u's mention events about messages in ch: those in
// the channel and those in threads.
func (e *threadEnv) mentionEvents(t *testing.T, u *parley.User) (channel, thread int) {
	t.Helper()
	for _, ev := range e.userEvents(u, parley.EventMention) {
		if chData[parley.MentionEventData](t, ev).ThreadRootID == "" {
			channel++
		} else {
			thread++
		}
	}
	return channel, thread
}

func testHereActiveOnly(t *testing.T, h Harness) {
	e, active := newHereEnv(t, h)
	e.live.Collapsed(true)
	// The channel: owner, alice, bob, dave. carol is in the workspace only.
	active.Set(e.bob, e.carol)
	m := e.post(t, e.alice, e.ch, "@here standup")
	asked := active.lastAsked()
	slices.Sort(asked)
	want := []string{e.owner.ID, e.bob.ID, e.dave.ID}
	slices.Sort(want)
	if !slices.Equal(asked, want) {
		t.Fatalf("the snapshot was asked about %v, want the other members %v", asked, want)
	}
	if n, _ := e.mentionEvents(t, e.bob); n != 1 {
		t.Fatalf("bob (active) got %d mention events, want 1", n)
	}
	for _, u := range []*parley.User{e.owner, e.dave, e.carol, e.alice} {
		if n, _ := e.mentionEvents(t, u); n != 0 {
			t.Fatalf("%s (not active, or not a member, or the author) got %d mention events", u.Handle, n)
		}
	}
	e.wantCounts(t, e.bob, e.ch, 1, 1)
	e.wantCounts(t, e.dave, e.ch, 1, 0)
	e.wantCounts(t, e.owner, e.ch, 1, 0)

	// A member named by handle is mentioned whether active or not.
	active.Set(e.bob)
	e.post(t, e.alice, e.ch, "@here and @"+e.dave.Handle)
	e.wantCounts(t, e.bob, e.ch, 2, 2)
	e.wantCounts(t, e.dave, e.ch, 2, 1)
	e.wantCounts(t, e.owner, e.ch, 2, 0)

	// @channel and @everyone reach everyone, with or without @here.
	active.Set()
	e.post(t, e.alice, e.ch, "@here @channel now")
	e.post(t, e.alice, e.ch, "@everyone too")
	e.wantCounts(t, e.bob, e.ch, 4, 4)
	e.wantCounts(t, e.dave, e.ch, 4, 3)
	e.wantCounts(t, e.owner, e.ch, 4, 2)

	// Nobody active: @here mentions nobody and sends nothing.
	before := len(e.rec.OfType(parley.EventMention))
	e.post(t, e.alice, e.ch, "@here anyone?")
	if n := len(e.rec.OfType(parley.EventMention)); n != before {
		t.Fatalf("@here with nobody active sent %d mention events", n-before)
	}
	e.wantCounts(t, e.owner, e.ch, 5, 2)

	// Every member's stored count equals the mention events they got.
	for _, u := range []*parley.User{e.owner, e.bob, e.dave} {
		n, _ := e.mentionEvents(t, u)
		got, err := e.s.GetChannel(ctx(t), u.ID, e.ch.ID)
		NoErr(t, err)
		if got.MentionCount != int64(n) {
			t.Fatalf("%s: %d stored mentions, %d mention events", u.Handle, got.MentionCount, n)
		}
	}

	// Without a snapshot source @here reaches every member, as before.
	h.SetPresence(t, e.s, nil)
	e.post(t, e.alice, e.ch, "@here fallback")
	e.wantCounts(t, e.owner, e.ch, 6, 3)
	e.wantCounts(t, e.dave, e.ch, 6, 4)

	// An edit that adds @here counts the members active at the edit.
	h.SetPresence(t, e.s, active)
	active.Set(e.owner)
	_, err := e.s.EditMessage(ctx(t), e.alice.ID, m.ID, "@here standup, edited")
	NoErr(t, err)
	e.wantCounts(t, e.owner, e.ch, 6, 4)
	e.wantCounts(t, e.bob, e.ch, 6, 4) // bob's @here mention on m went with the edit
}

func testHereInThread(t *testing.T, h Harness) {
	e, active := newHereEnv(t, h)
	e.live.Collapsed(true)
	root := e.post(t, e.owner, e.ch, "root")
	e.reply(t, e.bob, root, "following")
	e.reply(t, e.dave, root, "me too")
	// Followers: owner (the root's author), bob, dave. Only bob is active.
	active.Set(e.bob, e.alice)
	e.reply(t, e.alice, root, "@here in the thread")
	th := e.threads(t, e.bob, false)[root.ID]
	wantThread(t, "bob", th, true, 2, 1)
	wantThread(t, "dave", e.threads(t, e.dave, false)[root.ID], true, 1, 0)
	wantThread(t, "owner", e.threads(t, e.owner, false)[root.ID], true, 3, 0)
	if _, n := e.mentionEvents(t, e.bob); n != 1 {
		t.Fatalf("bob (active follower) got %d thread mention events, want 1", n)
	}
	for _, u := range []*parley.User{e.owner, e.dave, e.alice} {
		if c, n := e.mentionEvents(t, u); c+n != 0 {
			t.Fatalf("%s got %d mention events, want none", u.Handle, c+n)
		}
	}
	// The channel's counts are not touched by a reply.
	e.wantCounts(t, e.bob, e.ch, 1, 0)
	// A named follower counts whether active or not; @everyone reaches all.
	e.reply(t, e.alice, root, "@here and @"+e.dave.Handle)
	e.reply(t, e.alice, root, "@"+parley.MentionEveryone)
	wantThread(t, "bob", e.threads(t, e.bob, false)[root.ID], true, 4, 3)
	wantThread(t, "dave", e.threads(t, e.dave, false)[root.ID], true, 3, 2)
	wantThread(t, "owner", e.threads(t, e.owner, false)[root.ID], true, 5, 1)
	for _, u := range []*parley.User{e.owner, e.bob, e.dave} {
		_, n := e.mentionEvents(t, u)
		if th := e.threads(t, u, false)[root.ID]; th.UnreadMentions != n {
			t.Fatalf("%s: %d stored thread mentions, %d mention events", u.Handle, th.UnreadMentions, n)
		}
	}
}
