package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"parley"
)

// Who receives what (docs/protocol.md, "Who receives what"). A session
// that must not get an event is checked after a later event it does get,
// which the node handled after the first (the pattern of TestTyping).

// countOf counts the client's events of type typ about userID (d.user.id or
// d.user_id).
func countOf(t *testing.T, c *client, typ, userID string) int {
	t.Helper()
	return countIn(t, c.events(), typ, userID)
}

// countIn is countOf over frames (inside waitFor, which holds the lock).
func countIn(t *testing.T, frames []frame, typ, userID string) int {
	t.Helper()
	n := 0
	for _, f := range frames {
		if f.T != typ {
			continue
		}
		var d struct {
			UserID string `json:"user_id"`
			User   *struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		if err := json.Unmarshal(f.D, &d); err != nil {
			t.Fatal(err)
		}
		if d.UserID == userID || (d.User != nil && d.User.ID == userID) {
			n++
		}
	}
	return n
}

// hubRefs is how many local references the node holds on topic (0: not
// subscribed).
func hubRefs(e *env, topic string) int {
	e.gw.hub.mu.Lock()
	defer e.gw.hub.mu.Unlock()
	if ts := e.gw.hub.topics[topic]; ts != nil {
		return ts.refs
	}
	return 0
}

// inView waits until the session holds exactly the profile topics of ids.
func (e *env) inView(sessionID string, ids ...string) {
	e.t.Helper()
	waitUntil(e.t, "users in view applied", func() bool {
		ok := false
		e.onSession(sessionID, func(_ *partition, s *session) {
			ok = len(s.inView) == len(ids)
			for _, id := range ids {
				ok = ok && s.inView[id]
			}
		})
		return ok
	})
}

// TestUserChangesGoToViewers: a user's profile and status changes reach the
// sessions that have the user in view and the user's own sessions, not the
// rest of the workspace; two sessions viewing one user cost the node one
// bus subscription, released with the last.
func TestUserChangesGoToViewers(t *testing.T) {
	// A dropped session ends soon, so that its release is seen.
	e := newEnv(t, func(c *Config) { c.ResumeWindow = 200 * time.Millisecond })
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	ch := e.channel(ws, a, "room", parley.KindPrivate)
	e.addMembers(a, ch, b, c)

	ca, _ := e.identify(a, ws)
	cb1, rb1 := e.identify(b, ws)
	cb2, rb2 := e.identify(b, ws)
	cc, rc := e.identify(c, ws)
	cb1.send(map[string]any{"op": "presence_sub", "user_ids": []string{a.ID, b.ID}})
	cb2.send(map[string]any{"op": "presence_sub", "user_ids": []string{a.ID}})
	cc.send(map[string]any{"op": "presence_sub", "user_ids": []string{b.ID}})
	e.inView(rb1.SessionID, a.ID) // its own user needs no profile topic
	e.inView(rb2.SessionID, a.ID)
	e.inView(rc.SessionID, b.ID)
	if n := hubRefs(e, parley.TopicProfile(a.ID)); n != 2 {
		t.Fatalf("node holds %d references on a's profile topic, want 2 (one subscription)", n)
	}

	name := "Alice Again"
	if _, err := e.store.UpdateMe(context.Background(), a.ID, parley.UserPatch{Name: &name}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetStatus(context.Background(), a.ID, parley.Status{Text: "lunch"}); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{cb1, cb2, ca} {
		cl.waitFor("a's changes", func() bool {
			return countIn(t, cl.frames, parley.EventUserUpdated, a.ID) == 1 && countIn(t, cl.frames, parley.EventUserStatus, a.ID) == 1
		})
	}
	// c has only b in view: a message after the changes, then nothing of a.
	e.post(b, ch, "sync")
	cc.waitEvents(parley.EventMessageCreated, 1)
	if n := countOf(t, cc, parley.EventUserUpdated, a.ID) + countOf(t, cc, parley.EventUserStatus, a.ID); n != 0 {
		t.Fatalf("c, without a in view, got %d of a's changes", n)
	}
	// b's own change reaches its own sessions once each (not again through
	// the profile topic: cb1 has b in its list) and c, who has b in view.
	if _, err := e.store.SetStatus(context.Background(), b.ID, parley.Status{Text: "away"}); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{cb1, cb2, cc} {
		cl.waitFor("b's status", func() bool { return countIn(t, cl.frames, parley.EventUserStatus, b.ID) == 1 })
	}
	e.post(b, ch, "sync 2")
	ca.waitEvents(parley.EventMessageCreated, 2)
	cb1.waitEvents(parley.EventMessageCreated, 2)
	if n := countOf(t, ca, parley.EventUserStatus, b.ID); n != 0 {
		t.Fatalf("a, without b in view, got %d of b's status changes", n)
	}
	if n := countOf(t, cb1, parley.EventUserStatus, b.ID); n != 1 {
		t.Fatalf("b's session got its own status %d times, want 1", n)
	}

	// Out of view: the subscription goes with the last session viewing.
	cb1.send(map[string]any{"op": "presence_sub", "user_ids": []string{}})
	e.inView(rb1.SessionID)
	if n := hubRefs(e, parley.TopicProfile(a.ID)); n != 1 {
		t.Fatalf("after one view dropped a: %d references, want 1", n)
	}
	cb2.drop() // the session ends with its resume window
	waitUntil(t, "a's profile topic released", func() bool {
		return e.gw.registry.get(rb2.SessionID) == nil && hubRefs(e, parley.TopicProfile(a.ID)) == 0
	})
}

// TestInViewOnlyVisibleUsers: a user of another workspace does not enter
// the set (the rule of presence, visibility.go).
func TestInViewOnlyVisibleUsers(t *testing.T) {
	e := newEnv(t, nil)
	a, b, stranger := e.user("a"), e.user("b"), e.user("stranger")
	ws := e.workspace(a, b)
	e.workspace(stranger)
	cb, rb := e.identify(b, ws)
	cb.send(map[string]any{"op": "presence_sub", "user_ids": []string{stranger.ID, a.ID}})
	e.inView(rb.SessionID, a.ID)
	if n := hubRefs(e, parley.TopicProfile(stranger.ID)); n != 0 {
		t.Fatalf("node follows a stranger's profile (%d references)", n)
	}
}

// TestPresenceSubLimited: a view over parley.MaxUsersInView keeps the first
// and says so.
func TestPresenceSubLimited(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("a")
	ws := e.workspace(a)
	ca, _ := e.identify(a, ws)
	ids := make([]string, parley.MaxUsersInView+7)
	for i := range ids {
		ids[i] = fmt.Sprintf("U%025d", i)
	}
	ca.send(map[string]any{"op": "presence_sub", "user_ids": ids})
	f := ca.nextOp(parley.OpPresenceSubLimited)
	if f.Limit != parley.MaxUsersInView || f.Requested != len(ids) {
		t.Fatalf("presence_sub_limited %+v, want limit %d requested %d", f, parley.MaxUsersInView, len(ids))
	}
	if n := counterValue(t, e.reg, "parley_gateway_view_limited_total"); n != 1 {
		t.Fatalf("view_limited %v, want 1", n)
	}
}

// TestPublicChannelEventsToMembers: a public channel's creation, joins,
// leaves and updates reach its members and the user concerned, not the
// workspace; its creator's sessions follow it from their user topic.
func TestPublicChannelEventsToMembers(t *testing.T) {
	e := newEnv(t, nil)
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	side := e.channel(ws, a, "side", parley.KindPrivate)
	e.addMembers(a, side, b, c)
	ca, _ := e.identify(a, ws)
	cb, _ := e.identify(b, ws)
	cc, _ := e.identify(c, ws)

	pub := e.channel(ws, a, "news", parley.KindPublic)
	ca.waitEvents(parley.EventChannelCreated, 1)
	if _, err := e.store.JoinChannel(context.Background(), b.ID, pub.ID); err != nil {
		t.Fatal(err)
	}
	ca.waitEvents(parley.EventMemberJoined, 1)
	cb.waitEvents(parley.EventMemberJoined, 1)
	topic := "fresh"
	if _, err := e.store.UpdateChannel(context.Background(), a.ID, pub.ID, parley.ChannelPatch{Topic: &topic}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.LeaveChannel(context.Background(), b.ID, pub.ID); err != nil {
		t.Fatal(err)
	}
	ca.waitEvents(parley.EventMemberLeft, 1)
	cb.waitEvents(parley.EventMemberLeft, 1)
	// The creator's session followed the channel from channel.created: it
	// gets the message posted there.
	e.post(a, pub, "hello news")
	ca.waitEvents(parley.EventMessageCreated, 1)
	// b got what happened while it was a member, and nothing before or
	// after.
	e.post(a, side, "sync")
	cb.waitEvents(parley.EventMessageCreated, 1)
	var got []string
	for _, f := range cb.events() {
		if f.data(t).ChannelID == pub.ID {
			got = append(got, f.T)
		}
	}
	if want := []string{parley.EventMemberJoined, parley.EventChannelUpdated, parley.EventMemberLeft}; !slices.Equal(got, want) {
		t.Fatalf("b got %v of #news, want %v", got, want)
	}

	// c, never a member, heard nothing of the channel.
	cc.waitEvents(parley.EventMessageCreated, 1)
	for _, f := range cc.events() {
		if f.data(t).ChannelID == pub.ID {
			t.Fatalf("c, not a member, got %s of #news", f.T)
		}
	}
}

// TestPreviewWhileInFocus: a non-member session with a public channel in
// focus gets its events while it stays there; a private channel, or a guest,
// gets no preview.
func TestPreviewWhileInFocus(t *testing.T) {
	e := newEnv(t, nil)
	a, b, g := e.user("a"), e.user("b"), e.user("g")
	ws := e.workspace(a, b, g)
	if err := e.store.SetMemberRole(context.Background(), a.ID, ws.ID, g.ID, parley.RoleGuest); err != nil {
		t.Fatal(err)
	}
	pub := e.channel(ws, a, "news", parley.KindPublic)
	priv := e.channel(ws, a, "secret", parley.KindPrivate)
	side := e.channel(ws, a, "side", parley.KindPrivate)
	e.addMembers(a, side, b, g)

	cb, rb := e.identify(b, ws)
	cg, rg := e.identify(g, ws)
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{pub.ID, priv.ID}})
	cg.send(map[string]any{"op": "focus", "channel_ids": []string{pub.ID}})
	waitUntil(t, "b previews #news", func() bool {
		ok := false
		e.onSession(rb.SessionID, func(_ *partition, s *session) { ok = s.chans[pub.ID] != nil && s.chans[pub.ID].preview })
		return ok
	})
	e.viewing(rg.SessionID, pub.ID)

	e.post(a, pub, "live")
	e.post(a, priv, "hidden")
	got := cb.waitEvents(parley.EventMessageCreated, 1)
	if d := got[0].data(t); d.ChannelID != pub.ID || d.Message.Text != "live" {
		t.Fatalf("preview got %+v", d)
	}

	// Out of focus: no more of it.
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{}})
	waitUntil(t, "preview ended", func() bool {
		ok := false
		e.onSession(rb.SessionID, func(_ *partition, s *session) { ok = s.chans[pub.ID] == nil })
		return ok
	})
	e.post(a, pub, "missed")
	e.post(a, side, "sync")
	cb.waitFor("the sync message", func() bool {
		for _, f := range cb.frames {
			if f.T == parley.EventMessageCreated && json.Valid(f.D) {
				var d eventData
				json.Unmarshal(f.D, &d)
				if d.ChannelID == side.ID {
					return true
				}
			}
		}
		return false
	})
	cg.waitEvents(parley.EventMessageCreated, 1)
	for _, f := range cb.events() {
		if d := f.data(t); d.ChannelID == priv.ID || (d.Message != nil && d.Message.Text == "missed") {
			t.Fatalf("b got %s %+v out of a preview", f.T, d)
		}
	}
	for _, f := range cg.events() {
		if f.data(t).ChannelID == pub.ID {
			t.Fatalf("a guest previewed a public channel: %s", f.T)
		}
	}
	if n := counterValue(t, e.reg, "parley_gateway_previews_total"); n != 1 {
		t.Fatalf("previews %v, want 1", n)
	}

	// Joining while previewing: a member from then on, in focus or not.
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{pub.ID}})
	waitUntil(t, "b previews #news again", func() bool {
		ok := false
		e.onSession(rb.SessionID, func(_ *partition, s *session) { ok = s.chans[pub.ID] != nil })
		return ok
	})
	if _, err := e.store.JoinChannel(context.Background(), b.ID, pub.ID); err != nil {
		t.Fatal(err)
	}
	cb.waitEvents(parley.EventMemberJoined, 1)
	cb.send(map[string]any{"op": "focus", "channel_ids": []string{}})
	e.viewing(rb.SessionID)
	e.post(a, pub, "as a member")
	cb.waitFor("the message as a member", func() bool {
		for _, f := range cb.frames {
			var d eventData
			if f.T == parley.EventMessageCreated && json.Unmarshal(f.D, &d) == nil && d.Message != nil && d.Message.Text == "as a member" {
				return true
			}
		}
		return false
	})
}

// TestWorkspaceJoinsToAdmins: workspace.member_joined reaches the admins'
// sessions only; a promotion or demotion takes effect on live sessions.
func TestWorkspaceJoinsToAdmins(t *testing.T) {
	e := newEnv(t, nil)
	owner, m := e.user("owner"), e.user("m")
	ws := e.workspace(owner, m)
	side := e.channel(ws, owner, "side", parley.KindPrivate)
	e.addMembers(owner, side, m)
	co, _ := e.identify(owner, ws)
	cm, _ := e.identify(m, ws)

	e.workspaceJoin(ws, owner, e.user("n1"))
	co.waitEvents(parley.EventWorkspaceMemberJoined, 1)
	e.post(owner, side, "sync")
	cm.waitEvents(parley.EventMessageCreated, 1)
	if n := len(eventsOf(cm, parley.EventWorkspaceMemberJoined)); n != 0 {
		t.Fatalf("a member got %d workspace joins", n)
	}

	// Promoted: the next join reaches m's live session.
	if err := e.store.SetMemberRole(context.Background(), owner.ID, ws.ID, m.ID, parley.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "m follows the admins' topic", func() bool { return hubRefs(e, parley.TopicAdmins(ws.ID)) == 2 })
	e.workspaceJoin(ws, owner, e.user("n2"))
	cm.waitEvents(parley.EventWorkspaceMemberJoined, 1)
	co.waitEvents(parley.EventWorkspaceMemberJoined, 2)

	// Demoted: no more.
	if err := e.store.SetMemberRole(context.Background(), owner.ID, ws.ID, m.ID, parley.RoleMember); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "m leaves the admins' topic", func() bool { return hubRefs(e, parley.TopicAdmins(ws.ID)) == 1 })
	e.workspaceJoin(ws, owner, e.user("n3"))
	co.waitEvents(parley.EventWorkspaceMemberJoined, 3)
	e.post(owner, side, "sync 2")
	cm.waitEvents(parley.EventMessageCreated, 2)
	if n := len(eventsOf(cm, parley.EventWorkspaceMemberJoined)); n != 1 {
		t.Fatalf("m got %d workspace joins, want 1 (while an admin)", n)
	}
	for _, f := range cm.events() {
		if f.T == parley.EventWorkspaceMemberUpdated {
			t.Fatal("an internal event reached a client")
		}
	}
}

func eventsOf(c *client, typ string) []frame {
	var out []frame
	for _, f := range c.events() {
		if f.T == typ {
			out = append(out, f)
		}
	}
	return out
}
