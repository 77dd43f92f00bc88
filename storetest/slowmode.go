package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
)

// Contract tests of slow mode and per-channel post caps: who may set them,
// what values are refused, who they hold and who is exempt, and that two
// sessions of one user racing cannot both pass (the check is in the write).

// SlowModeOpener returns a new, empty store whose clock is now and whose
// live configuration is live.
type SlowModeOpener func(tb testing.TB, pub parley.EventPublisher, now func() time.Time, live parley.LiveConfigSource) parley.Store

// Clock is a settable clock for stores under test.
type Clock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

// NewClock starts at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Live is a live configuration tests change while a store runs.
type Live struct {
	p atomic.Pointer[parley.LiveConfig]
}

// NewLive starts at the defaults.
func NewLive() *Live {
	l := &Live{}
	l.Set(parley.DefaultLiveConfig())
	return l
}

func (l *Live) Set(c parley.LiveConfig)       { l.p.Store(&c) }
func (l *Live) LiveConfig() parley.LiveConfig { return *l.p.Load() }

// RunSlowMode runs the slow-mode contract tests against stores made by open.
func RunSlowMode(t *testing.T, open SlowModeOpener) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, open SlowModeOpener)
	}{
		{"Settings", testSlowModeSettings},
		{"SlowMode", testSlowMode},
		{"SameUserRace", testSlowModeRace},
		{"PostLimit", testPostLimit},
		{"DryRunAndOff", testSlowModeDryRun},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// slowEnv is a chanEnv on a store with a settable clock and live config,
// and a public channel created by member (its creator) that everyone has
// joined.
type slowEnv struct {
	*chanEnv
	clock *Clock
	live  *Live
	ch    *parley.Channel
}

func newSlowEnv(t *testing.T, open SlowModeOpener) *slowEnv {
	t.Helper()
	clk, live := NewClock(), NewLive()
	e := &slowEnv{clock: clk, live: live}
	e.chanEnv = newChanEnv(t, func(tb testing.TB, pub parley.EventPublisher) parley.Store {
		return open(tb, pub, clk.Now, live)
	})
	e.ch = MustChannel(t, e.s, e.ws, e.member, "announce", parley.KindPublic)
	for _, u := range []*parley.User{e.owner, e.member2} {
		_, err := e.s.JoinChannel(ctx(t), u.ID, e.ch.ID)
		NoErr(t, err)
	}
	return e
}

// set sets the channel's limits as the workspace owner.
func (e *slowEnv) set(t *testing.T, slow, perMinute int) {
	t.Helper()
	_, err := e.s.UpdateChannel(ctx(t), e.owner.ID, e.ch.ID,
		parley.ChannelPatch{SlowModeSeconds: &slow, PostLimitPerMinute: &perMinute})
	NoErr(t, err)
}

func (e *slowEnv) post(t *testing.T, u *parley.User, nm parley.NewMessage) (*parley.Message, bool, error) {
	t.Helper()
	if nm.Text == "" {
		nm.Text = "hello"
	}
	return e.s.PostMessage(ctx(t), u.ID, e.ch.ID, nm)
}

// limited asserts a 429-class refusal asking to wait exactly want.
func limited(t *testing.T, what string, err error, want time.Duration) {
	t.Helper()
	if parley.ErrorCode(err) != parley.ERATELIMITED {
		t.Fatalf("%s: %v, want %s", what, err, parley.ERATELIMITED)
	}
	if got, ok := parley.RetryAfterOf(err); !ok || got != want {
		t.Fatalf("%s: retry after %v (%v), want %v", what, got, ok, want)
	}
}

func testSlowModeSettings(t *testing.T, open SlowModeOpener) {
	e := newSlowEnv(t, open)
	c := ctx(t)
	// The creator (a plain member) and a workspace admin may set them.
	ch, err := e.s.UpdateChannel(c, e.member.ID, e.ch.ID, parley.ChannelPatch{SlowModeSeconds: ptr(30)})
	NoErr(t, err)
	if ch.SlowModeSeconds != 30 || ch.PostLimitPerMinute != 0 {
		t.Fatalf("after the creator's change: %+v", ch)
	}
	ch, err = e.s.UpdateChannel(c, e.owner.ID, e.ch.ID, parley.ChannelPatch{PostLimitPerMinute: ptr(100)})
	NoErr(t, err)
	if ch.SlowModeSeconds != 30 || ch.PostLimitPerMinute != 100 {
		t.Fatalf("after the admin's change: %+v", ch)
	}
	// Every reader sees them.
	if got := e.get(t, e.member2, e.ch); got.SlowModeSeconds != 30 || got.PostLimitPerMinute != 100 {
		t.Fatalf("another member reads %+v", got)
	}
	// Another member may still set the topic, not the limits.
	_, err = e.s.UpdateChannel(c, e.member2.ID, e.ch.ID, parley.ChannelPatch{SlowModeSeconds: ptr(0)})
	Code(t, err, parley.EFORBIDDEN)
	_, err = e.s.UpdateChannel(c, e.member2.ID, e.ch.ID, parley.ChannelPatch{Topic: ptr("news"), SlowModeSeconds: ptr(30)})
	NoErr(t, err) // unchanged limits need no rights
	for _, p := range []parley.ChannelPatch{
		{SlowModeSeconds: ptr(-1)},
		{SlowModeSeconds: ptr(parley.MaxSlowModeSeconds + 1)},
		{PostLimitPerMinute: ptr(-5)},
		{PostLimitPerMinute: ptr(1 << 40)},
	} {
		_, err = e.s.UpdateChannel(c, e.owner.ID, e.ch.ID, p)
		Code(t, err, parley.EINVALID)
	}
	// Another workspace's owner does not see the channel.
	_, err = e.s.UpdateChannel(c, e.outsider.ID, e.ch.ID, parley.ChannelPatch{SlowModeSeconds: ptr(5)})
	Code(t, err, parley.ENOTFOUND)
	// DMs have no slow mode.
	dm, _, err := e.s.OpenDM(c, e.member.ID, e.ws.ID, []string{e.member2.ID})
	NoErr(t, err)
	_, err = e.s.UpdateChannel(c, e.member.ID, dm.ID, parley.ChannelPatch{SlowModeSeconds: ptr(5)})
	Code(t, err, parley.EINVALID)
	if got := e.get(t, e.member, e.ch); got.SlowModeSeconds != 30 || got.PostLimitPerMinute != 100 {
		t.Fatalf("refused changes changed the channel: %+v", got)
	}
	// The change is announced with the new values.
	var last parley.Event
	for _, ev := range e.rec.OfType(parley.EventChannelUpdated) {
		if ev.ChannelID == e.ch.ID {
			last = ev
		}
	}
	if !containsAll(string(last.Data), `"slow_mode_seconds":30`, `"post_limit_per_minute":100`) {
		t.Fatalf("last channel.updated: %s", last.Data)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func testSlowMode(t *testing.T, open SlowModeOpener) {
	e := newSlowEnv(t, open)
	e.set(t, 30, 0)
	first, _, err := e.post(t, e.member2, parley.NewMessage{ClientMsgID: "m-1"})
	NoErr(t, err)
	e.clock.Advance(10 * time.Second)
	_, _, err = e.post(t, e.member2, parley.NewMessage{})
	limited(t, "second post 10 s later", err, 20*time.Second)
	// A reply is a post too.
	_, _, err = e.post(t, e.member2, parley.NewMessage{ThreadRootID: first.ID})
	limited(t, "a reply 10 s later", err, 20*time.Second)
	// A retry of the first post gets it back, not a 429.
	again, created, err := e.post(t, e.member2, parley.NewMessage{ClientMsgID: "m-1"})
	NoErr(t, err)
	if created || again.ID != first.ID {
		t.Fatalf("retry: created %v, id %s, want the first message %s", created, again.ID, first.ID)
	}
	// Others have their own clocks; the creator and admins are exempt.
	for _, u := range []*parley.User{e.member, e.member, e.owner, e.owner} {
		_, _, err = e.post(t, u, parley.NewMessage{})
		NoErr(t, err)
	}
	e.clock.Advance(20 * time.Second)
	_, _, err = e.post(t, e.member2, parley.NewMessage{ThreadRootID: first.ID})
	NoErr(t, err)
	_, _, err = e.post(t, e.member2, parley.NewMessage{})
	limited(t, "right after the reply", err, 30*time.Second)
	// Off again: at once.
	e.set(t, 0, 0)
	_, _, err = e.post(t, e.member2, parley.NewMessage{})
	NoErr(t, err)
}

// testSlowModeRace: one user's sessions posting at once; one gets through.
func testSlowModeRace(t *testing.T, open SlowModeOpener) {
	e := newSlowEnv(t, open)
	e.set(t, 60, 0)
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, _, err := e.s.PostMessage(ctx(t), e.member2.ID, e.ch.ID, parley.NewMessage{Text: "me first"})
			switch parley.ErrorCode(err) {
			case "":
				ok.Add(1)
			case parley.ERATELIMITED:
			default:
				t.Errorf("racing post: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d racing posts went through, want 1", ok.Load())
	}
}

func testPostLimit(t *testing.T, open SlowModeOpener) {
	e := newSlowEnv(t, open)
	e.set(t, 0, 3)
	third := e.join(t, "member")
	_, err := e.s.JoinChannel(ctx(t), third.ID, e.ch.ID)
	NoErr(t, err)
	_, _, err = e.post(t, e.member2, parley.NewMessage{}) // opens the window
	NoErr(t, err)
	e.clock.Advance(15 * time.Second)
	_, _, err = e.post(t, e.member2, parley.NewMessage{})
	NoErr(t, err)
	_, _, err = e.post(t, e.owner, parley.NewMessage{}) // exempt, not counted
	NoErr(t, err)
	_, _, err = e.post(t, third, parley.NewMessage{})
	NoErr(t, err)
	e.clock.Advance(15 * time.Second)
	_, _, err = e.post(t, third, parley.NewMessage{})
	limited(t, "fourth post in the minute", err, 30*time.Second)
	_, _, err = e.post(t, e.member, parley.NewMessage{}) // the creator is exempt
	NoErr(t, err)
	e.clock.Advance(30 * time.Second)
	_, _, err = e.post(t, third, parley.NewMessage{})
	NoErr(t, err)
	// Slow mode answers first, with the member's own wait (its clock
	// starts with the first post under slow mode).
	e.set(t, 10, 3)
	_, _, err = e.post(t, third, parley.NewMessage{})
	NoErr(t, err)
	_, _, err = e.post(t, third, parley.NewMessage{})
	limited(t, "slow mode under the cap", err, 10*time.Second)
}

func testSlowModeDryRun(t *testing.T, open SlowModeOpener) {
	e := newSlowEnv(t, open)
	e.set(t, 60, 1)
	cfg := parley.DefaultLiveConfig()
	cfg.SlowModeDryRun = true
	e.live.Set(cfg)
	for range 3 {
		_, _, err := e.post(t, e.member2, parley.NewMessage{})
		NoErr(t, err)
	}
	cfg.SlowModeDryRun, cfg.SlowModeEnabled = false, false
	e.live.Set(cfg)
	for range 3 {
		_, _, err := e.post(t, e.member2, parley.NewMessage{})
		NoErr(t, err)
	}
	cfg.SlowModeEnabled = true
	e.live.Set(cfg)
	_, _, err := e.post(t, e.member2, parley.NewMessage{})
	limited(t, "enforced again", err, 60*time.Second)
}
