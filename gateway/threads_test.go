package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"parley"
)

// TestThreadEventsReachFollowers: thread and read-state events go on user
// topics, so a follower's sessions get the replies of a thread whether or
// not they look at its channel, and a user's reads reach their other
// devices (real store, real bus, real sockets).
func TestThreadEventsReachFollowers(t *testing.T) {
	e := newEnv(t, nil)
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	ch := e.channel(ws, a, "threads", parley.KindPublic)
	for _, u := range []*tuser{b, c} {
		if _, err := e.store.JoinChannel(context.Background(), u.ID, ch.ID); err != nil {
			t.Fatal(err)
		}
	}
	ca, _ := e.identify(a, ws)
	cb1, _ := e.identify(b, ws) // b's two devices
	cb2, _ := e.identify(b, ws)
	cc, _ := e.identify(c, ws)

	root := e.post(a, ch, "root")
	reply, _, err := e.store.PostMessage(context.Background(), b.ID, ch.ID, parley.NewMessage{Text: "reply @" + c.Handle, ThreadRootID: root.ID})
	if err != nil {
		t.Fatal(err)
	}
	threadData := func(f frame) parley.ThreadEventData {
		t.Helper()
		var d parley.ThreadEventData
		if err := json.Unmarshal(f.D, &d); err != nil || d.Thread == nil {
			t.Fatalf("%s payload %s: %v", f.T, f.D, err)
		}
		return d
	}
	// a (the root's author) follows now, with one unread reply and the
	// reply itself; c was mentioned, follows and has a mention event.
	d := threadData(ca.waitEvents(parley.EventThreadUpdated, 1)[0])
	if d.Thread.RootID != root.ID || d.Thread.UnreadReplies != 1 || d.Message == nil || d.Message.ID != reply.ID {
		t.Fatalf("a's thread.updated = %+v / %+v", d.Thread, d.Message)
	}
	if d := threadData(cc.waitEvents(parley.EventThreadUpdated, 1)[0]); d.Thread.UnreadMentions != 1 {
		t.Fatalf("c's thread.updated = %+v", d.Thread)
	}
	var m parley.MentionEventData
	if err := json.Unmarshal(cc.waitEvents(parley.EventMention, 1)[0].D, &m); err != nil || m.Message.ID != reply.ID || m.ThreadRootID != root.ID {
		t.Fatalf("c's mention = %+v (%v)", m, err)
	}
	// Both of b's devices hear of b's own reply.
	cb1.waitEvents(parley.EventThreadUpdated, 1)
	cb2.waitEvents(parley.EventThreadUpdated, 1)

	// A reply by a counts for b; b reads the thread on one device and
	// both hear of it.
	if _, _, err := e.store.PostMessage(context.Background(), a.ID, ch.ID, parley.NewMessage{Text: "thanks", ThreadRootID: root.ID}); err != nil {
		t.Fatal(err)
	}
	if d := threadData(cb2.waitEvents(parley.EventThreadUpdated, 2)[1]); d.Thread.UnreadReplies != 1 {
		t.Fatalf("b's second thread.updated = %+v", d.Thread)
	}
	if _, err := e.store.MarkThreadRead(context.Background(), b.ID, root.ID); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{cb1, cb2} {
		if d := threadData(cl.waitEvents(parley.EventThreadRead, 1)[0]); d.Thread.RootID != root.ID || d.Thread.UnreadReplies != 0 {
			t.Fatalf("thread.read = %+v", d.Thread)
		}
	}
	// b reads the channel on one device: channel.read reaches both.
	if _, err := e.store.MarkRead(context.Background(), b.ID, ch.ID, 1<<40); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{cb1, cb2} {
		var rd parley.ReadEventData
		if err := json.Unmarshal(cl.waitEvents(parley.EventChannelRead, 1)[0].D, &rd); err != nil || rd.ChannelID != ch.ID {
			t.Fatalf("channel.read = %+v (%v)", rd, err)
		}
	}
	// Nobody else got b's reads.
	for _, cl := range []*client{ca, cc} {
		for _, f := range cl.events() {
			if f.T == parley.EventChannelRead || f.T == parley.EventThreadRead {
				t.Fatalf("another user got b's %s", f.T)
			}
		}
	}
}

// TestJITThreadUpdated: a follower who is not in the channel learns of a
// reply only through thread.updated, so that frame carries its author.
func TestJITThreadUpdated(t *testing.T) {
	e, dir := jitEnv(t, nil)
	a, b, c := e.user("a"), e.user("b"), e.user("c")
	ws := e.workspace(a, b, c)
	dir.actor = a.ID
	ch := e.channel(ws, a, "public", parley.KindPublic)
	if _, err := e.store.JoinChannel(context.Background(), b.ID, ch.ID); err != nil {
		t.Fatal(err)
	}
	root := e.post(a, ch, "root")
	if _, err := e.store.FollowThread(context.Background(), c.ID, root.ID); err != nil { // c is not in the channel
		t.Fatal(err)
	}
	cc, _ := e.identify(c, ws)
	if _, _, err := e.store.PostMessage(context.Background(), b.ID, ch.ID, parley.NewMessage{Text: "hi", ThreadRootID: root.ID}); err != nil {
		t.Fatal(err)
	}
	cc.waitEvents(parley.EventThreadUpdated, 1)
	var f jitFrame
	if err := json.Unmarshal(cc.rawEvents(parley.EventThreadUpdated)[0], &f); err != nil {
		t.Fatal(err)
	}
	wantUsers(t, "c's thread.updated", f, b.ID)
}
