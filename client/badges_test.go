package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"testing"
	"time"

	"parley"
)

// After a fresh identify, boot and the threads list give the badges that
// the events a session missed would have given (issue 19, item 7). One of
// alice's sessions stays connected and keeps badges from its events, as a
// client does; the other is dropped before each kind of change and comes
// back with a fresh identify, then reads boot and /threads. The two must
// agree, for every kind: a message, an @handle, @channel and @here
// mention, a DM, a reply and a mention in a followed thread, a read on
// another device, being added to a channel.

// badges is what a client shows: per channel the unread and mention
// counts, per followed thread the unread replies and mentions.
type badges struct {
	unread, mentions map[string]int64 // by channel
	threads          map[string][2]int
}

func (b badges) String() string {
	return fmt.Sprintf("unread %v mentions %v threads %v", b.unread, b.mentions, b.threads)
}

func (b badges) equal(o badges) bool {
	nz := func(m map[string]int64) map[string]int64 {
		out := map[string]int64{}
		for k, v := range m {
			if v != 0 {
				out[k] = v
			}
		}
		return out
	}
	nzt := func(m map[string][2]int) map[string][2]int {
		out := map[string][2]int{}
		for k, v := range m {
			if v != [2]int{} {
				out[k] = v
			}
		}
		return out
	}
	return maps.Equal(nz(b.unread), nz(o.unread)) && maps.Equal(nz(b.mentions), nz(o.mentions)) &&
		maps.Equal(nzt(b.threads), nzt(o.threads))
}

// fetchBadges reads boot and the threads list as a fresh client does.
func fetchBadges(t *testing.T, u *account, ws string) badges {
	t.Helper()
	ctx := context.Background()
	b, err := u.Client.Boot(ctx, parley.BootQuery{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	out := badges{unread: map[string]int64{}, mentions: map[string]int64{}, threads: map[string][2]int{}}
	for _, ch := range slices.Concat(b.Channels, b.DMs) {
		out.unread[ch.ID], out.mentions[ch.ID] = ch.UnreadCount, ch.MentionCount
	}
	var list struct {
		Threads []parley.Thread `json:"threads"`
	}
	if err := u.Client.do(ctx, call{method: "GET", path: "/workspaces/" + url.PathEscape(ws) + "/threads"}, &list); err != nil {
		t.Fatal(err)
	}
	var unreadThreads, threadMentions int64
	for _, th := range list.Threads {
		out.threads[th.RootID] = [2]int{th.UnreadReplies, th.UnreadMentions}
		if th.UnreadReplies > 0 {
			unreadThreads++
		}
		threadMentions += int64(th.UnreadMentions)
	}
	if b.Threads != nil && (b.Threads.UnreadThreads != unreadThreads || b.Threads.UnreadMentions != threadMentions) {
		t.Fatalf("boot's threads summary %+v disagrees with the list (%d unread, %d mentions)", *b.Threads, unreadThreads, threadMentions)
	}
	return out
}

// tally applies events to badges the way a client does: top-level messages
// by others count in their channel, mention events in their channel or
// thread, a read resets the channel, a thread event carries the thread's
// counts, and the user's own join starts a channel at zero.
type tally struct {
	me   string
	b    badges
	msgs map[string][]int64 // by channel: seqs of the counted messages
}

func (ta *tally) apply(t *testing.T, ev Event) {
	switch ev.Type {
	case parley.EventMessageCreated:
		var d struct {
			Message parley.Message `json:"message"`
		}
		mustJSON(t, ev.Data, &d)
		if d.Message.UserID != ta.me && d.Message.ThreadRootID == "" {
			ta.b.unread[ev.ChannelID]++
			ta.msgs[ev.ChannelID] = append(ta.msgs[ev.ChannelID], ev.Seq)
		}
	case parley.EventMention:
		var d parley.MentionEventData
		mustJSON(t, ev.Data, &d)
		if d.ThreadRootID == "" {
			ta.b.mentions[d.ChannelID]++
		}
	case parley.EventChannelRead:
		var d parley.ReadEventData
		mustJSON(t, ev.Data, &d)
		n := int64(0)
		for _, s := range ta.msgs[d.ChannelID] {
			if s > d.LastReadSeq {
				n++
			}
		}
		ta.b.unread[d.ChannelID] = n
		if n == 0 {
			ta.b.mentions[d.ChannelID] = 0
		}
	case parley.EventThreadUpdated, parley.EventThreadFollowed, parley.EventThreadUnfollowed, parley.EventThreadRead:
		var d parley.ThreadEventData
		mustJSON(t, ev.Data, &d)
		if d.Thread.Following {
			ta.b.threads[d.Thread.RootID] = [2]int{d.Thread.UnreadReplies, d.Thread.UnreadMentions}
		} else {
			delete(ta.b.threads, d.Thread.RootID)
		}
	case parley.EventMemberJoined:
		var d parley.MemberEventData
		mustJSON(t, ev.Data, &d)
		if d.UserID == ta.me {
			ta.b.unread[ev.ChannelID], ta.b.mentions[ev.ChannelID] = 0, 0
		}
	}
}

func mustJSON(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

func TestFreshIdentifyBadgesMatchEvents(t *testing.T) {
	e := newNode(t, nil)
	ctx := context.Background()
	alice, bob, carol := e.mustAccount("alice"), e.mustAccount("bob"), e.mustAccount("carol")
	ws := e.mustWorkspace(alice, bob, carol)
	pub := e.mustChannel(ws, alice, parley.KindPublic)
	for _, u := range []*account{bob, carol} {
		if _, err := u.Client.JoinChannel(ctx, pub.ID); err != nil {
			t.Fatal(err)
		}
	}
	root, err := alice.Client.PostMessage(ctx, pub.ID, parley.NewMessage{Text: "a thread"})
	if err != nil {
		t.Fatal(err)
	}
	dm, err := bob.Client.OpenDM(ctx, ws.ID, []string{alice.ID})
	if err != nil {
		t.Fatal(err)
	}

	// The watching session: its badges start from boot, then follow its
	// events, one at a time (the Handler is never called concurrently).
	rec := newRecorder()
	watcher := dial(t, alice, ws, ConnectOptions{Handler: rec.handle})
	defer watcher.Close()
	ta := &tally{me: alice.ID, b: fetchBadges(t, alice, ws.ID), msgs: map[string][]int64{}}
	applied := 0
	catchUp := func() {
		evs := rec.snapshot()
		for _, ev := range evs[applied:] {
			ta.apply(t, ev)
		}
		applied = len(evs)
	}

	post := func(u *account, ch, text, root string) {
		t.Helper()
		if _, err := u.Client.PostMessage(ctx, ch, parley.NewMessage{Text: text, ThreadRootID: root}); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []struct {
		name  string
		cause func()
	}{
		{"message", func() { post(bob, pub.ID, "hello", "") }},
		{"@handle", func() { post(bob, pub.ID, "hey @"+alice.Handle, "") }},
		{"@channel", func() { post(carol, pub.ID, "all of you @channel", "") }},
		{"@here", func() { post(bob, pub.ID, "anyone @here?", "") }},
		{"dm", func() { post(bob, dm.ID, "psst", "") }},
		{"thread reply", func() { post(bob, pub.ID, "a reply", root.ID) }},
		{"thread mention", func() { post(carol, pub.ID, "@"+alice.Handle+" see this", root.ID) }},
		{"read on another device", func() {
			last := e.log(pub.ID, 0)
			if _, err := alice.Client.MarkRead(ctx, pub.ID, last[len(last)-1].Seq); err != nil {
				t.Fatal(err)
			}
		}},
		{"added to a channel", func() {
			priv := e.mustChannel(ws, bob, parley.KindPrivate)
			if _, err := bob.Client.AddMembers(ctx, priv.ID, []string{alice.ID}); err != nil {
				t.Fatal(err)
			}
			post(bob, priv.ID, "welcome", "")
			post(bob, priv.ID, "@"+alice.Handle+" read this", "")
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			// Disconnect, cause it, identify afresh, compare.
			away := dial(t, alice, ws, ConnectOptions{Handler: func(Event) {}})
			away.Close()
			k.cause()
			fresh := dial(t, alice, ws, ConnectOptions{Handler: func(Event) {}})
			defer fresh.Close()
			var got badges
			deadline := time.Now().Add(10 * time.Second)
			for {
				catchUp()
				got = fetchBadges(t, alice, ws.ID)
				if got.equal(ta.b) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after %s, a fresh identify shows %v; the events gave %v", k.name, got, ta.b)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// Every kind changed something: the badges are not trivially equal.
	if len(ta.b.threads) == 0 || ta.b.unread[dm.ID] == 0 {
		t.Fatalf("badges %v: the causes did not count", ta.b)
	}
}
