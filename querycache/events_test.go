package querycache

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"parley"
	"parley/natsbus"
)

// eventually waits (up to a second: events reach the cache within a second
// of the commit) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, time.Second, cond)
}

// switcher runs the switcher and returns the handles and channel names.
func switcher(t *testing.T, c *Cache, actor, ws, q string) (users, channels []string) {
	t.Helper()
	r, err := c.Switcher(bg(t), actor, ws, q, 20)
	noErr(t, err)
	return handles(r.Users), channelNames(r.Channels)
}

// testEventsApplied: each kind of directory change made through the store
// reaches a warm cache and shows in its answers.
func testEventsApplied(t *testing.T, bus *natsbus.Bus) {
	n := newNodeOnBus(t, bus)
	c, st := n.cache, n.store
	owner := mustUser(t, st, "owner", "Olive Owner")
	bob := mustUser(t, st, "bob", "Bob Brown")
	ws := mustWorkspace(t, st, owner)
	mustJoin(t, st, ws, owner, bob)
	_, err := c.Switcher(bg(t), owner.ID, ws.ID, "", 10) // warm
	noErr(t, err)

	t.Run("user renamed", func(t *testing.T) {
		name := "Robert Green"
		_, err := st.UpdateMe(bg(t), bob.ID, parley.UserPatch{Name: &name})
		noErr(t, err)
		eventually(t, "the new name in the switcher", func() bool {
			users, _ := switcher(t, c, owner.ID, ws.ID, "green")
			return slices.Equal(users, []string{"bob"})
		})
		if users, _ := switcher(t, c, owner.ID, ws.ID, "brown"); len(users) != 0 {
			t.Errorf("the old name still matches: %v", users)
		}
	})

	t.Run("status", func(t *testing.T) {
		_, err := st.SetStatus(bg(t), bob.ID, parley.Status{Emoji: "palm_tree", Text: "away"})
		noErr(t, err)
		eventually(t, "the status", func() bool {
			us, err := c.Users(bg(t), ws.ID, []string{bob.ID})
			return err == nil && len(us) == 1 && us[0].Status != nil && us[0].Status.Text == "away"
		})
	})

	var pub *parley.Channel
	t.Run("channel created", func(t *testing.T) {
		pub = mustChannel(t, st, ws, owner, "design-team", parley.KindPublic)
		eventually(t, "the new channel", func() bool {
			_, chs := switcher(t, c, bob.ID, ws.ID, "design")
			return slices.Equal(chs, []string{"design-team"})
		})
	})

	t.Run("channel renamed", func(t *testing.T) {
		name := "product-design"
		_, err := st.UpdateChannel(bg(t), owner.ID, pub.ID, parley.ChannelPatch{Name: &name})
		noErr(t, err)
		eventually(t, "the new channel name", func() bool {
			_, chs := switcher(t, c, bob.ID, ws.ID, "product")
			return slices.Equal(chs, []string{"product-design"})
		})
		if _, chs := switcher(t, c, bob.ID, ws.ID, "design-team"); len(chs) != 0 {
			t.Errorf("old name still found: %v", chs)
		}
	})

	t.Run("member joined and left", func(t *testing.T) {
		_, err := st.JoinChannel(bg(t), bob.ID, pub.ID)
		noErr(t, err)
		eventually(t, "bob in the channel", func() bool {
			h, err := c.ChannelHeader(bg(t), bob.ID, pub.ID)
			return err == nil && h.MemberCount == 2 && h.Channel.IsMember && len(h.MembersPreview) == 2
		})
		ms, err := c.MentionSuggestions(bg(t), owner.ID, pub.ID, "bo", 10)
		noErr(t, err)
		if len(ms) != 1 || !ms[0].InChannel {
			t.Fatalf("mention suggestions after the join: %+v", ms)
		}
		noErr(t, st.LeaveChannel(bg(t), bob.ID, pub.ID))
		eventually(t, "bob out of the channel", func() bool {
			ms, err := c.MentionSuggestions(bg(t), owner.ID, pub.ID, "bo", 10)
			return err == nil && len(ms) == 1 && !ms[0].InChannel
		})
	})

	t.Run("private channel visible only to members", func(t *testing.T) {
		priv := mustChannel(t, st, ws, owner, "secret-plans", parley.KindPrivate)
		eventually(t, "the private channel for its member", func() bool {
			_, chs := switcher(t, c, owner.ID, ws.ID, "secret")
			return slices.Equal(chs, []string{"secret-plans"})
		})
		if _, chs := switcher(t, c, bob.ID, ws.ID, "secret"); len(chs) != 0 {
			t.Fatalf("a non-member finds the private channel: %v", chs)
		}
		_, err := c.ChannelHeader(bg(t), bob.ID, priv.ID)
		wantCode(t, err, parley.ENOTFOUND)
		_, err = c.MentionSuggestions(bg(t), bob.ID, priv.ID, "", 10)
		wantCode(t, err, parley.ENOTFOUND)

		_, err = st.AddMembers(bg(t), owner.ID, priv.ID, []string{bob.ID})
		noErr(t, err)
		eventually(t, "the private channel for its new member", func() bool {
			_, chs := switcher(t, c, bob.ID, ws.ID, "secret")
			return slices.Equal(chs, []string{"secret-plans"})
		})
	})

	t.Run("channel archived", func(t *testing.T) {
		_, err := st.ArchiveChannel(bg(t), owner.ID, pub.ID)
		noErr(t, err)
		eventually(t, "the archived channel gone from the switcher", func() bool {
			_, chs := switcher(t, c, owner.ID, ws.ID, "product")
			return len(chs) == 0
		})
		h, err := c.ChannelHeader(bg(t), owner.ID, pub.ID)
		noErr(t, err)
		if h.Channel.ArchivedAt == nil {
			t.Errorf("header of an archived channel: %+v", h.Channel)
		}
	})

	t.Run("new member and DM", func(t *testing.T) {
		cara := mustUser(t, st, "cara", "Cara Clark")
		mustJoin(t, st, ws, owner, cara)
		eventually(t, "the newcomer in the directory", func() bool {
			p, err := c.Directory(bg(t), owner.ID, ws.ID, parley.UserQuery{Q: "cara"})
			return err == nil && len(p.Users) == 1
		})
		// The newcomer can use the cache at once: they are a member.
		_, err := c.Switcher(bg(t), cara.ID, ws.ID, "", 10)
		noErr(t, err)
		// A DM puts its partner first, ahead of a better alphabetical match.
		cat := mustUser(t, st, "cat", "Cat Cole")
		mustJoin(t, st, ws, owner, cat)
		_, _, err = st.OpenDM(bg(t), owner.ID, ws.ID, []string{cat.ID})
		noErr(t, err)
		eventually(t, "the DM partner first", func() bool {
			users, _ := switcher(t, c, owner.ID, ws.ID, "ca")
			return slices.Equal(users, []string{"cat", "cara"})
		})
	})

	t.Run("demoted to guest", func(t *testing.T) {
		open := mustChannel(t, st, ws, owner, "open-floor", parley.KindPublic)
		eventually(t, "bob sees the public channel", func() bool {
			_, chs := switcher(t, c, bob.ID, ws.ID, "open")
			return len(chs) == 1
		})
		noErr(t, st.SetMemberRole(bg(t), owner.ID, ws.ID, bob.ID, parley.RoleGuest))
		eventually(t, "the guest no longer sees channels they are not in", func() bool {
			_, chs := switcher(t, c, bob.ID, ws.ID, "open")
			return len(chs) == 0
		})
		_, err := c.ChannelHeader(bg(t), bob.ID, open.ID)
		wantCode(t, err, parley.ENOTFOUND)
	})

	if n.count.reads.Load() != 1 {
		t.Errorf("%d directory reads: the events should have kept one load fresh", n.count.reads.Load())
	}
}

// testBufferedDuringLoad: events that arrive while the snapshot is being
// read are applied after it, those it already contains are not applied
// twice, and nothing in between is lost.
func testBufferedDuringLoad(t *testing.T, bus *natsbus.Bus) {
	n := newNodeOnBus(t, bus)
	st := n.store
	owner := mustUser(t, st, "owner", "Olive Owner")
	bob := mustUser(t, st, "bob", "Bob Brown")
	ws := mustWorkspace(t, st, owner)
	mustJoin(t, st, ws, owner, bob)
	ch := mustChannel(t, st, ws, owner, "room", parley.KindPublic)

	n.count.gate = make(chan struct{})
	n.count.entered = make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := n.cache.Switcher(bg(t), owner.ID, ws.ID, "", 10)
		done <- err
	}()
	<-n.count.entered // subscribed, about to read the snapshot
	// Committed before the snapshot is read: in the snapshot and buffered.
	_, err := st.JoinChannel(bg(t), bob.ID, ch.ID)
	noErr(t, err)
	name := "Bobby Brown"
	_, err = st.UpdateMe(bg(t), bob.ID, parley.UserPatch{Name: &name})
	noErr(t, err)
	waitFor(t, "the events to be buffered", 5*time.Second, func() bool {
		n.cache.writeMu.Lock()
		defer n.cache.writeMu.Unlock()
		return len(n.cache.wss[ws.ID].pending) >= 2 // member.joined, user.updated
	})
	close(n.count.gate)
	noErr(t, <-done)

	h, err := n.cache.ChannelHeader(bg(t), owner.ID, ch.ID)
	noErr(t, err)
	if h.MemberCount != 2 || len(h.MembersPreview) != 2 {
		t.Fatalf("header %+v: the join is lost or doubled", h)
	}
	users, _ := switcher(t, n.cache, owner.ID, ws.ID, "bobby")
	if !slices.Equal(users, []string{"bob"}) {
		t.Fatalf("rename during the load: %v", users)
	}
}

// testOutOfOrderMemberEventReloads: a membership change older than one
// already applied means the copy cannot be trusted: the workspace is
// dropped and the next query reloads it.
func testOutOfOrderMemberEventReloads(t *testing.T, bus *natsbus.Bus) {
	n := newNodeOnBus(t, bus)
	st := n.store
	owner := mustUser(t, st, "owner", "Olive Owner")
	bob := mustUser(t, st, "bob", "Bob Brown")
	ws := mustWorkspace(t, st, owner)
	mustJoin(t, st, ws, owner, bob)
	ch := mustChannel(t, st, ws, owner, "room", parley.KindPublic)
	_, err := n.cache.Switcher(bg(t), owner.ID, ws.ID, "", 10)
	noErr(t, err)

	cara := mustUser(t, st, "cara", "Cara Clark")
	mustJoin(t, st, ws, owner, cara)
	for _, u := range []*parley.User{bob, cara} {
		_, err = st.JoinChannel(bg(t), u.ID, ch.ID)
		noErr(t, err)
	}
	eventually(t, "the joins", func() bool {
		h, err := n.cache.ChannelHeader(bg(t), owner.ID, ch.ID)
		return err == nil && h.MemberCount == 3
	})
	h, _ := n.cache.ChannelHeader(bg(t), owner.ID, ch.ID)
	// bob's join again, as if it arrived late: its seq is just before cara's.
	stale, _ := json.Marshal(parley.MemberEventData{ChannelID: ch.ID, Seq: h.Channel.LastSeq - 1, UserID: bob.ID, MemberCount: 2})
	n.cache.onEvent(parley.Event{WorkspaceID: ws.ID, ChannelID: ch.ID, Seq: h.Channel.LastSeq - 1,
		Type: parley.EventMemberJoined, Data: stale, Topics: []string{parley.TopicDirectory(ws.ID)}})
	if s := n.cache.Stats(); s.Workspaces != 0 {
		t.Fatalf("still holding the workspace after an out-of-order event: %+v", s)
	}
	h, err = n.cache.ChannelHeader(bg(t), owner.ID, ch.ID)
	noErr(t, err)
	if h.MemberCount != 3 || n.count.reads.Load() != 2 {
		t.Fatalf("after the reload: %+v, %d reads", h, n.count.reads.Load())
	}
}

// testSharedUsersHeldOnce: a user in two warm workspaces is one object on
// the node; a rename reaches both; evicting one keeps the user for the
// other.
func testSharedUsersHeldOnce(t *testing.T, bus *natsbus.Bus) {
	n := newNodeOnBus(t, bus)
	st := n.store
	a := mustUser(t, st, "alpha", "Alpha One")
	b := mustUser(t, st, "beta", "Beta Two")
	shared := mustUser(t, st, "shared", "Shay Red")
	ws1, ws2 := mustWorkspace(t, st, a), mustWorkspace(t, st, b)
	mustJoin(t, st, ws1, a, shared)
	mustJoin(t, st, ws2, b, shared)
	for _, p := range []struct{ actor, ws string }{{a.ID, ws1.ID}, {b.ID, ws2.ID}} {
		_, err := n.cache.Switcher(bg(t), p.actor, p.ws, "", 10)
		noErr(t, err)
	}
	if s := n.cache.Stats(); s.Users != 3 {
		t.Fatalf("%d users held for 3 distinct users in two workspaces", s.Users)
	}
	w1, w2 := n.cache.wss[ws1.ID], n.cache.wss[ws2.ID]
	i1, _ := w1.actor(shared.ID)
	i2, _ := w2.actor(shared.ID)
	if w1.users[i1] != w2.users[i2] {
		t.Fatal("the shared user is held twice")
	}

	name := "Shay Blue"
	_, err := st.UpdateMe(bg(t), shared.ID, parley.UserPatch{Name: &name})
	noErr(t, err)
	for _, p := range []struct{ actor, ws string }{{a.ID, ws1.ID}, {b.ID, ws2.ID}} {
		eventually(t, "the rename in both workspaces", func() bool {
			users, _ := switcher(t, n.cache, p.actor, p.ws, "blue")
			return slices.Equal(users, []string{"shared"})
		})
	}

	// Evict ws1 only.
	n.clock.Advance(DefaultWarmFor - time.Minute)
	_, err = n.cache.Switcher(bg(t), b.ID, ws2.ID, "", 10)
	noErr(t, err)
	n.clock.Advance(2 * time.Minute)
	n.cache.sweep()
	if s := n.cache.Stats(); s.Workspaces != 1 || s.Users != 2 {
		t.Fatalf("after evicting ws1: %+v, want ws2 and its 2 users", s)
	}
	us, err := n.cache.Users(bg(t), ws2.ID, []string{shared.ID})
	noErr(t, err)
	if len(us) != 1 || us[0].Name != "Shay Blue" {
		t.Fatalf("shared user in ws2: %+v", us)
	}
}
