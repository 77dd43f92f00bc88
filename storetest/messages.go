package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"parley"
)

// Contract tests of messages: posting (idempotency, threads), history
// paging, edits, deletes, reactions and pins. The event log itself is
// tested in events.go.

// msgEnv is a workspace with a public channel that owner (an admin), alice
// and bob have joined; carol is in the workspace but not the channel, and
// outsider is in another workspace.
type msgEnv struct {
	s        parley.Store
	rec      *Recorder
	ws       *parley.Workspace
	owner    *parley.User
	alice    *parley.User
	bob      *parley.User
	carol    *parley.User
	outsider *parley.User
	ch       *parley.Channel
}

func newMsgEnv(t *testing.T, open Opener) *msgEnv {
	t.Helper()
	rec := &Recorder{}
	s := open(t, rec)
	e := &msgEnv{s: s, rec: rec}
	e.owner = MustUser(t, s, "owner")
	e.ws = MustWorkspace(t, s, e.owner)
	for _, u := range []**parley.User{&e.alice, &e.bob, &e.carol} {
		*u = MustUser(t, s, "user")
		MustJoinWorkspace(t, s, e.ws, e.owner, *u)
	}
	e.outsider = MustUser(t, s, "outsider")
	MustWorkspace(t, s, e.outsider)
	e.ch = e.channel(t, "msgs", parley.KindPublic, e.alice, e.bob)
	return e
}

// channel creates a channel as owner and joins the given users to it.
func (e *msgEnv) channel(t *testing.T, name string, kind parley.ChannelKind, users ...*parley.User) *parley.Channel {
	t.Helper()
	ch := MustChannel(t, e.s, e.ws, e.owner, name, kind)
	for _, u := range users {
		var err error
		if kind == parley.KindPublic {
			_, err = e.s.JoinChannel(ctx(t), u.ID, ch.ID)
		} else {
			_, err = e.s.AddMembers(ctx(t), e.owner.ID, ch.ID, []string{u.ID})
		}
		NoErr(t, err)
	}
	return ch
}

// reply posts a reply to root as u.
func (e *msgEnv) reply(t *testing.T, u *parley.User, root *parley.Message, text string) *parley.Message {
	t.Helper()
	m, _, err := e.s.PostMessage(ctx(t), u.ID, root.ChannelID, parley.NewMessage{Text: text, ThreadRootID: root.ID})
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	return m
}

func (e *msgEnv) get(t *testing.T, u *parley.User, id string) *parley.Message {
	t.Helper()
	m, err := e.s.GetMessage(ctx(t), u.ID, id)
	if err != nil {
		t.Fatalf("get message %s as %s: %v", id, u.Handle, err)
	}
	return m
}

func (e *msgEnv) lastSeq(t *testing.T, ch *parley.Channel) int64 {
	t.Helper()
	got, err := e.s.GetChannel(ctx(t), e.owner.ID, ch.ID)
	NoErr(t, err)
	return got.LastSeq
}

// published returns the published events of type typ in channel ch.
func (e *msgEnv) published(ch *parley.Channel, typ string) []parley.Event {
	var out []parley.Event
	for _, ev := range e.rec.OfChannel(ch.ID) {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// msgSeqs returns the seqs of msgs.
func msgSeqs(msgs []parley.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

// wantReactions asserts m's reactions.
func wantReactions(t *testing.T, m *parley.Message, want ...parley.Reaction) {
	t.Helper()
	if want == nil {
		want = []parley.Reaction{}
	}
	if m.Reactions == nil || !slices.Equal(m.Reactions, want) {
		t.Fatalf("reactions of %s = %+v, want %+v", m.ID, m.Reactions, want)
	}
}

func init() {
	register("Messages/Post", testPostMessage)
	register("Messages/PostRules", testPostRules)
	register("Messages/Idempotent", testIdempotentPost)
	register("Messages/IdempotentRace", testIdempotentRace)
	register("Messages/History", testHistory)
	register("Messages/Threads", testThreads)
	register("Messages/Edit", testEditMessage)
	register("Messages/Delete", testDeleteMessage)
	register("Messages/Reactions", testReactions)
	register("Messages/Pins", testPins)
}

func testPostMessage(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	before := e.lastSeq(t, e.ch)
	m, created, err := e.s.PostMessage(ctx(t), e.alice.ID, e.ch.ID, parley.NewMessage{Text: "hello @bob", ClientMsgID: "c-1"})
	NoErr(t, err)
	if !created || !strings.HasPrefix(m.ID, parley.PrefixMessage) || m.ChannelID != e.ch.ID ||
		m.WorkspaceID != e.ws.ID || m.UserID != e.alice.ID || m.Text != "hello @bob" || m.ClientMsgID != "c-1" ||
		m.Seq != before+1 || m.CreatedAt.IsZero() || m.EditedAt != nil || m.ThreadRootID != "" ||
		m.ReplyCount != 0 || m.Pinned {
		t.Fatalf("posted = %+v, created %v (last seq before %d)", m, created, before)
	}
	wantReactions(t, m)
	if raw, _ := json.Marshal(m); !strings.Contains(string(raw), `"reactions":[]`) {
		t.Fatalf("message JSON %s lacks empty reactions", raw)
	}
	if got := e.lastSeq(t, e.ch); got != m.Seq {
		t.Fatalf("channel last_seq = %d, want %d", got, m.Seq)
	}

	// Others read it back as it was returned.
	got := e.get(t, e.carol, m.ID)
	if got.ID != m.ID || got.Seq != m.Seq || got.Text != m.Text || !got.CreatedAt.Equal(m.CreatedAt) ||
		got.UserID != m.UserID || got.ClientMsgID != m.ClientMsgID {
		t.Fatalf("get = %+v, want %+v", got, m)
	}
	wantReactions(t, got)

	evs := e.published(e.ch, parley.EventMessageCreated)
	if len(evs) != 1 || evs[0].Seq != m.Seq || evs[0].WorkspaceID != e.ws.ID ||
		!slices.Contains(evs[0].Topics, parley.TopicChannel(e.ch.ID)) {
		t.Fatalf("message.created events = %+v", evs)
	}
	var d parley.MessageEventData
	NoErr(t, json.Unmarshal(evs[0].Data, &d))
	if d.ChannelID != e.ch.ID || d.Seq != m.Seq || d.Message == nil || d.Message.ID != m.ID ||
		d.Message.Seq != m.Seq || d.Message.Text != m.Text || d.Message.Reactions == nil {
		t.Fatalf("message.created payload = %s", evs[0].Data)
	}
}

func testPostRules(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	post := func(u *parley.User, ch *parley.Channel, nm parley.NewMessage) error {
		_, _, err := e.s.PostMessage(ctx(t), u.ID, ch.ID, nm)
		return err
	}
	hi := parley.NewMessage{Text: "hi"}
	// Seeing a public channel is not enough to post in it.
	Code(t, post(e.carol, e.ch, hi), parley.EFORBIDDEN)
	Code(t, post(e.outsider, e.ch, hi), parley.ENOTFOUND)
	Code(t, post(e.alice, &parley.Channel{ID: "Cunknown"}, hi), parley.ENOTFOUND)
	priv := e.channel(t, "secret", parley.KindPrivate, e.bob)
	Code(t, post(e.alice, priv, hi), parley.ENOTFOUND)
	NoErr(t, post(e.bob, priv, hi))

	Code(t, post(e.alice, e.ch, parley.NewMessage{}), parley.EINVALID)
	Code(t, post(e.alice, e.ch, parley.NewMessage{Text: " \n\t "}), parley.EINVALID)
	Code(t, post(e.alice, e.ch, parley.NewMessage{Text: string([]byte{0xff, 'a'})}), parley.EINVALID)
	Code(t, post(e.alice, e.ch, parley.NewMessage{Text: strings.Repeat("a", parley.MaxMessageLen+1)}), parley.ETOOLARGE)
	Code(t, post(e.alice, e.ch, parley.NewMessage{Text: "x", ClientMsgID: strings.Repeat("c", parley.MaxClientMsgID+1)}), parley.EINVALID)
	// The limit counts characters, not bytes.
	NoErr(t, post(e.alice, e.ch, parley.NewMessage{Text: strings.Repeat("é", parley.MaxMessageLen)}))

	old := e.channel(t, "old", parley.KindPublic, e.alice)
	NoErr(t, post(e.alice, old, hi))
	_, err := e.s.ArchiveChannel(ctx(t), e.owner.ID, old.ID)
	NoErr(t, err)
	Code(t, post(e.alice, old, hi), parley.ECONFLICT)

	if n := len(e.published(e.ch, parley.EventMessageCreated)); n != 1 {
		t.Fatalf("%d message.created events in the channel, want 1", n)
	}
	if n := len(e.published(old, parley.EventMessageCreated)); n != 1 {
		t.Fatalf("%d message.created events in the archived channel, want 1", n)
	}
}

func testIdempotentPost(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	post := func(u *parley.User, ch *parley.Channel, text, cid string) (*parley.Message, bool) {
		t.Helper()
		m, created, err := e.s.PostMessage(ctx(t), u.ID, ch.ID, parley.NewMessage{Text: text, ClientMsgID: cid})
		NoErr(t, err)
		return m, created
	}
	first, created := post(e.alice, e.ch, "first", "abc")
	if !created {
		t.Fatal("first post not created")
	}
	// The same id again returns the first message, whatever the text (even
	// text that would be refused).
	for _, text := range []string{"second", "first", ""} {
		again, created := post(e.alice, e.ch, text, "abc")
		if created || again.ID != first.ID || again.Text != "first" || again.Seq != first.Seq {
			t.Fatalf("repost with %q = %+v, created %v; want the first message", text, again, created)
		}
	}
	// The id is scoped to (channel, sender).
	bobs, created := post(e.bob, e.ch, "bob's", "abc")
	if !created || bobs.ID == first.ID {
		t.Fatalf("another sender's post with the same id = %+v, created %v", bobs, created)
	}
	other := e.channel(t, "other", parley.KindPublic, e.alice)
	elsewhere, created := post(e.alice, other, "elsewhere", "abc")
	if !created || elsewhere.ID == first.ID {
		t.Fatalf("the same id in another channel = %+v, created %v", elsewhere, created)
	}
	// No client id: every post is new.
	a, _ := post(e.alice, e.ch, "plain", "")
	b, created := post(e.alice, e.ch, "plain", "")
	if !created || a.ID == b.ID {
		t.Fatal("posts without client_msg_id were merged")
	}

	// A retry returns the message as it is now: edited, with reactions.
	_, err := e.s.EditMessage(ctx(t), e.alice.ID, first.ID, "edited")
	NoErr(t, err)
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, first.ID, "tada")
	NoErr(t, err)
	again, created := post(e.alice, e.ch, "first", "abc")
	if created || again.ID != first.ID || again.Text != "edited" || again.EditedAt == nil {
		t.Fatalf("repost after edit = %+v, created %v", again, created)
	}
	wantReactions(t, again, parley.Reaction{Emoji: "tada", Count: 1, Me: true})

	if n := len(e.published(e.ch, parley.EventMessageCreated)); n != 4 {
		t.Fatalf("%d message.created events, want 4", n)
	}

	// Once deleted, the id is spent: a retry is a conflict, not a new post.
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, first.ID))
	_, _, err = e.s.PostMessage(ctx(t), e.alice.ID, e.ch.ID, parley.NewMessage{Text: "first", ClientMsgID: "abc"})
	Code(t, err, parley.ECONFLICT)
}

func testIdempotentRace(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	const n = 8
	var (
		wg      sync.WaitGroup
		ids     [n]string
		created [n]bool
		errs    [n]error
	)
	for i := range n {
		wg.Go(func() {
			m, c, err := e.s.PostMessage(ctx(t), e.alice.ID, e.ch.ID, parley.NewMessage{Text: "once", ClientMsgID: "race"})
			errs[i], created[i] = err, c
			if err == nil {
				ids[i] = m.ID
			}
		})
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		NoErr(t, errs[i])
		if ids[i] != ids[0] {
			t.Fatalf("racing posts returned different messages: %v", ids)
		}
		if created[i] {
			nCreated++
		}
	}
	if nCreated != 1 {
		t.Fatalf("%d racing posts say created, want 1", nCreated)
	}
	page, err := e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{})
	NoErr(t, err)
	if len(page.Messages) != 1 || page.Messages[0].ID != ids[0] {
		t.Fatalf("history after race = %+v", page.Messages)
	}
	if got := len(e.published(e.ch, parley.EventMessageCreated)); got != 1 {
		t.Fatalf("%d message.created events, want 1", got)
	}
}

func testHistory(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	// 130 top-level messages, replies to every fifth, every seventh deleted,
	// and a join in the middle: message seqs are not contiguous.
	var want []parley.Message
	for i := range 130 {
		m := MustPost(t, e.s, e.alice, e.ch, "m"+itoa(int64(i)))
		if i%5 == 0 {
			e.reply(t, e.bob, m, "reply")
		}
		if i%7 == 3 {
			NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, m.ID))
			continue
		}
		if i == 60 {
			_, err := e.s.JoinChannel(ctx(t), e.carol.ID, e.ch.ID)
			NoErr(t, err)
		}
		want = append(want, *m)
	}
	wantSeqs := msgSeqs(want)
	list := func(u *parley.User, q parley.HistoryQuery) *parley.MessagePage {
		t.Helper()
		page, err := e.s.ListMessages(ctx(t), u.ID, e.ch.ID, q)
		NoErr(t, err)
		for i, m := range page.Messages {
			if m.ThreadRootID != "" || m.Reactions == nil || (i > 0 && m.Seq <= page.Messages[i-1].Seq) {
				t.Fatalf("history page entry %d = %+v", i, m)
			}
		}
		return page
	}

	// Latest, then back with before_seq until the start.
	page := list(e.bob, parley.HistoryQuery{})
	if !slices.Equal(msgSeqs(page.Messages), wantSeqs[len(wantSeqs)-50:]) {
		t.Fatalf("latest page = %v, want %v", msgSeqs(page.Messages), wantSeqs[len(wantSeqs)-50:])
	}
	if page.Messages[0].Text != want[len(want)-50].Text {
		t.Fatalf("latest page starts with %q", page.Messages[0].Text)
	}
	var back []int64
	for {
		back = append(msgSeqs(page.Messages), back...)
		if page.NextCursor == "" {
			break
		}
		if page.NextCursor != itoa(page.Messages[0].Seq) {
			t.Fatalf("next cursor %q, want the first seq %d", page.NextCursor, page.Messages[0].Seq)
		}
		page = list(e.bob, parley.HistoryQuery{BeforeSeq: page.Messages[0].Seq, Limit: 50})
	}
	if !slices.Equal(back, wantSeqs) {
		t.Fatalf("paging back = %v, want %v", back, wantSeqs)
	}

	// Forward with after_seq from the channel's first event. Carol reads a
	// public channel, having joined; a non-member could too (below).
	var fwd []int64
	for after := int64(1); ; {
		page := list(e.carol, parley.HistoryQuery{AfterSeq: after, Limit: 40})
		fwd = append(fwd, msgSeqs(page.Messages)...)
		if page.NextCursor == "" {
			break
		}
		after = page.Messages[len(page.Messages)-1].Seq
	}
	if !slices.Equal(fwd, wantSeqs) {
		t.Fatalf("paging forward = %v, want %v", fwd, wantSeqs)
	}

	// A page in the middle is the limit messages just before / after.
	mid := wantSeqs[60]
	page = list(e.alice, parley.HistoryQuery{BeforeSeq: mid, Limit: 10})
	if !slices.Equal(msgSeqs(page.Messages), wantSeqs[50:60]) {
		t.Fatalf("before %d = %v, want %v", mid, msgSeqs(page.Messages), wantSeqs[50:60])
	}
	page = list(e.alice, parley.HistoryQuery{AfterSeq: mid, Limit: 10})
	if !slices.Equal(msgSeqs(page.Messages), wantSeqs[61:71]) {
		t.Fatalf("after %d = %v, want %v", mid, msgSeqs(page.Messages), wantSeqs[61:71])
	}
	if page := list(e.alice, parley.HistoryQuery{AfterSeq: 1 << 40}); len(page.Messages) != 0 || page.NextCursor != "" {
		t.Fatalf("after the end = %+v", page)
	}
	if page := list(e.alice, parley.HistoryQuery{Limit: 1000}); len(page.Messages) != len(want) {
		t.Fatalf("limit 1000 gave %d messages, want all %d", len(page.Messages), len(want))
	}

	// Rules.
	_, err := e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{BeforeSeq: 10, AfterSeq: 2})
	Code(t, err, parley.EINVALID)
	_, err = e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{BeforeSeq: -1})
	Code(t, err, parley.EINVALID)
	_, err = e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{AfterSeq: -1})
	Code(t, err, parley.EINVALID)
	_, err = e.s.ListMessages(ctx(t), e.outsider.ID, e.ch.ID, parley.HistoryQuery{})
	Code(t, err, parley.ENOTFOUND)
	pub := e.channel(t, "readable", parley.KindPublic, e.alice)
	MustPost(t, e.s, e.alice, pub, "anyone in the workspace may read this")
	if page, err := e.s.ListMessages(ctx(t), e.carol.ID, pub.ID, parley.HistoryQuery{}); err != nil || len(page.Messages) != 1 {
		t.Fatalf("non-member reading a public channel: %+v, %v", page, err)
	}
	priv := e.channel(t, "private", parley.KindPrivate, e.alice)
	_, err = e.s.ListMessages(ctx(t), e.carol.ID, priv.ID, parley.HistoryQuery{})
	Code(t, err, parley.ENOTFOUND)
}

func testThreads(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	root := MustPost(t, e.s, e.alice, e.ch, "root")
	r1 := e.reply(t, e.bob, root, "one")
	r2 := e.reply(t, e.alice, root, "two")
	if r1.ThreadRootID != root.ID || r2.Seq <= r1.Seq {
		t.Fatalf("replies = %+v, %+v", r1, r2)
	}
	got := e.get(t, e.carol, root.ID)
	if got.ReplyCount != 2 || got.LastReplyAt == nil || got.LastReplyAt.Before(got.CreatedAt) {
		t.Fatalf("root after two replies = %+v", got)
	}
	replies := func(u *parley.User, after int64, limit int) *parley.MessagePage {
		t.Helper()
		page, err := e.s.ListReplies(ctx(t), u.ID, root.ID, after, limit)
		NoErr(t, err)
		return page
	}
	if page := replies(e.carol, 0, 0); !slices.Equal(msgSeqs(page.Messages), []int64{r1.Seq, r2.Seq}) ||
		page.Messages[0].Text != "one" || page.NextCursor != "" {
		t.Fatalf("replies = %+v", page)
	}
	if page := replies(e.alice, r1.Seq, 0); !slices.Equal(msgSeqs(page.Messages), []int64{r2.Seq}) {
		t.Fatalf("replies after %d = %v", r1.Seq, msgSeqs(page.Messages))
	}
	if page := replies(e.alice, 0, 1); !slices.Equal(msgSeqs(page.Messages), []int64{r1.Seq}) ||
		page.NextCursor != itoa(r1.Seq) {
		t.Fatalf("first reply page = %+v", page)
	}
	// Replies stay out of the channel's history.
	page, err := e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{})
	NoErr(t, err)
	if len(page.Messages) != 1 || page.Messages[0].ID != root.ID || page.Messages[0].ReplyCount != 2 {
		t.Fatalf("history with a thread = %+v", page.Messages)
	}

	// Roots must be live top-level messages of the same channel.
	replyTo := func(rootID string) error {
		_, _, err := e.s.PostMessage(ctx(t), e.alice.ID, e.ch.ID, parley.NewMessage{Text: "x", ThreadRootID: rootID})
		return err
	}
	Code(t, replyTo(r1.ID), parley.EINVALID)
	Code(t, replyTo("Mnope"), parley.ENOTFOUND)
	other := e.channel(t, "other", parley.KindPublic, e.alice)
	Code(t, replyTo(MustPost(t, e.s, e.alice, other, "elsewhere").ID), parley.EINVALID)
	// A root alice cannot see (a private channel she is not in) is not
	// found: the answer must not tell her that the message exists.
	secret := e.channel(t, "secret-roots", parley.KindPrivate, e.bob)
	Code(t, replyTo(MustPost(t, e.s, e.bob, secret, "hidden").ID), parley.ENOTFOUND)

	_, err = e.s.ListReplies(ctx(t), e.outsider.ID, root.ID, 0, 0)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.ListReplies(ctx(t), e.alice.ID, "Mnope", 0, 0)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.ListReplies(ctx(t), e.alice.ID, root.ID, -1, 0)
	Code(t, err, parley.EINVALID)

	// Deleting a reply uncounts it; a deleted root has no thread.
	NoErr(t, e.s.DeleteMessage(ctx(t), e.bob.ID, r1.ID))
	if got := e.get(t, e.alice, root.ID); got.ReplyCount != 1 {
		t.Fatalf("reply count after deleting a reply = %d, want 1", got.ReplyCount)
	}
	if page := replies(e.alice, 0, 0); !slices.Equal(msgSeqs(page.Messages), []int64{r2.Seq}) {
		t.Fatalf("replies after delete = %v", msgSeqs(page.Messages))
	}
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, root.ID))
	_, err = e.s.ListReplies(ctx(t), e.alice.ID, root.ID, 0, 0)
	Code(t, err, parley.ENOTFOUND)
	Code(t, replyTo(root.ID), parley.EINVALID)
	if got := e.get(t, e.bob, r2.ID); got.Text != "two" {
		t.Fatalf("a reply of a deleted root = %+v", got)
	}
}

func testEditMessage(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	m := MustPost(t, e.s, e.alice, e.ch, "draft")
	_, err := e.s.AddReaction(ctx(t), e.bob.ID, m.ID, "eyes")
	NoErr(t, err)
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, m.ID, "eyes")
	NoErr(t, err)

	got, err := e.s.EditMessage(ctx(t), e.alice.ID, m.ID, "final")
	NoErr(t, err)
	if got.Text != "final" || got.EditedAt == nil || got.Seq != m.Seq || !got.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("edited = %+v", got)
	}
	wantReactions(t, got, parley.Reaction{Emoji: "eyes", Count: 2, Me: true})
	if r := e.get(t, e.carol, m.ID); r.Text != "final" || r.EditedAt == nil || !r.EditedAt.Equal(*got.EditedAt) {
		t.Fatalf("read after edit = %+v", r)
	}
	evs := e.published(e.ch, parley.EventMessageUpdated)
	if len(evs) != 1 || evs[0].Seq != e.lastSeq(t, e.ch) {
		t.Fatalf("message.updated events = %+v", evs)
	}
	var d parley.MessageEventData
	NoErr(t, json.Unmarshal(evs[0].Data, &d))
	if d.ChannelID != e.ch.ID || d.Seq != evs[0].Seq || d.Message == nil || d.Message.ID != m.ID ||
		d.Message.Seq != m.Seq || d.Message.Text != "final" || d.Message.EditedAt == nil {
		t.Fatalf("message.updated payload = %s", evs[0].Data)
	}
	wantReactions(t, d.Message, parley.Reaction{Emoji: "eyes", Count: 2, Me: false})

	// The same text again is still an edit.
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, m.ID, "final")
	NoErr(t, err)
	if n := len(e.published(e.ch, parley.EventMessageUpdated)); n != 2 {
		t.Fatalf("%d message.updated events, want 2", n)
	}

	// Only the author, admins included.
	for _, u := range []*parley.User{e.owner, e.bob, e.carol} {
		_, err = e.s.EditMessage(ctx(t), u.ID, m.ID, "hijack")
		Code(t, err, parley.EFORBIDDEN)
	}
	_, err = e.s.EditMessage(ctx(t), e.outsider.ID, m.ID, "x")
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, "Mnope", "x")
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, m.ID, " ")
	Code(t, err, parley.EINVALID)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, m.ID, strings.Repeat("x", parley.MaxMessageLen+1))
	Code(t, err, parley.ETOOLARGE)

	gone := MustPost(t, e.s, e.alice, e.ch, "gone")
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, gone.ID))
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, gone.ID, "back")
	Code(t, err, parley.ENOTFOUND)

	old := e.channel(t, "old", parley.KindPublic, e.alice)
	om := MustPost(t, e.s, e.alice, old, "before")
	_, err = e.s.ArchiveChannel(ctx(t), e.owner.ID, old.ID)
	NoErr(t, err)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, om.ID, "after")
	Code(t, err, parley.ECONFLICT)

	if n := len(e.published(e.ch, parley.EventMessageUpdated)); n != 2 {
		t.Fatalf("%d message.updated events after refused edits, want 2", n)
	}
}

func testDeleteMessage(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	m1 := MustPost(t, e.s, e.alice, e.ch, "one")
	m2 := MustPost(t, e.s, e.alice, e.ch, "two")
	m3 := MustPost(t, e.s, e.bob, e.ch, "three")

	Code(t, e.s.DeleteMessage(ctx(t), e.bob.ID, m1.ID), parley.EFORBIDDEN)
	Code(t, e.s.DeleteMessage(ctx(t), e.carol.ID, m1.ID), parley.EFORBIDDEN)
	Code(t, e.s.DeleteMessage(ctx(t), e.outsider.ID, m1.ID), parley.ENOTFOUND)
	Code(t, e.s.DeleteMessage(ctx(t), e.alice.ID, "Mnope"), parley.ENOTFOUND)

	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, m1.ID)) // the author
	NoErr(t, e.s.DeleteMessage(ctx(t), e.owner.ID, m2.ID)) // a workspace admin
	Code(t, e.s.DeleteMessage(ctx(t), e.alice.ID, m1.ID), parley.ENOTFOUND)
	_, err := e.s.GetMessage(ctx(t), e.alice.ID, m1.ID)
	Code(t, err, parley.ENOTFOUND)

	evs := e.published(e.ch, parley.EventMessageDeleted)
	if len(evs) != 2 {
		t.Fatalf("%d message.deleted events, want 2", len(evs))
	}
	var d parley.MessageDeletedData
	NoErr(t, json.Unmarshal(evs[1].Data, &d))
	if d.ChannelID != e.ch.ID || d.Seq != evs[1].Seq || d.MessageID != m2.ID || d.UserID != e.owner.ID {
		t.Fatalf("message.deleted payload = %s", evs[1].Data)
	}

	// Its pin and reactions go with it.
	_, err = e.s.Pin(ctx(t), e.alice.ID, m3.ID)
	NoErr(t, err)
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, m3.ID, "wave")
	NoErr(t, err)
	NoErr(t, e.s.DeleteMessage(ctx(t), e.bob.ID, m3.ID))
	pins, err := e.s.ListPins(ctx(t), e.alice.ID, e.ch.ID)
	NoErr(t, err)
	page, err := e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{})
	NoErr(t, err)
	if len(pins.Messages) != 0 || len(page.Messages) != 0 {
		t.Fatalf("after deleting everything: pins %+v, history %+v", pins.Messages, page.Messages)
	}
	_, err = e.s.RemoveReaction(ctx(t), e.alice.ID, m3.ID, "wave")
	Code(t, err, parley.ENOTFOUND)

	old := e.channel(t, "old", parley.KindPublic, e.alice)
	om := MustPost(t, e.s, e.alice, old, "kept")
	_, err = e.s.ArchiveChannel(ctx(t), e.owner.ID, old.ID)
	NoErr(t, err)
	Code(t, e.s.DeleteMessage(ctx(t), e.alice.ID, om.ID), parley.ECONFLICT)
}

func testReactions(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	m := MustPost(t, e.s, e.alice, e.ch, "react to me")
	react := func(u *parley.User, emoji string) *parley.Message {
		t.Helper()
		got, err := e.s.AddReaction(ctx(t), u.ID, m.ID, emoji)
		NoErr(t, err)
		return got
	}
	wantReactions(t, react(e.alice, "thumbsup"), parley.Reaction{Emoji: "thumbsup", Count: 1, Me: true})
	react(e.bob, "thumbsup")
	got := react(e.bob, "heart")
	wantReactions(t, got, parley.Reaction{Emoji: "thumbsup", Count: 2, Me: true}, parley.Reaction{Emoji: "heart", Count: 1, Me: true})
	react(e.alice, "thumbsup") // again: nothing changes
	wantReactions(t, e.get(t, e.alice, m.ID),
		parley.Reaction{Emoji: "thumbsup", Count: 2, Me: true}, parley.Reaction{Emoji: "heart", Count: 1, Me: false})
	wantReactions(t, e.get(t, e.carol, m.ID),
		parley.Reaction{Emoji: "thumbsup", Count: 2, Me: false}, parley.Reaction{Emoji: "heart", Count: 1, Me: false})

	evs := e.published(e.ch, parley.EventReactionAdded)
	if len(evs) != 3 {
		t.Fatalf("%d reaction.added events, want 3", len(evs))
	}
	var d parley.ReactionEventData
	NoErr(t, json.Unmarshal(evs[2].Data, &d))
	if d.ChannelID != e.ch.ID || d.Seq != evs[2].Seq || d.MessageID != m.ID || d.Emoji != "heart" || d.UserID != e.bob.ID {
		t.Fatalf("reaction.added payload = %s", evs[2].Data)
	}

	// Removing: absent reactions change nothing.
	got, err := e.s.RemoveReaction(ctx(t), e.alice.ID, m.ID, "heart")
	NoErr(t, err)
	wantReactions(t, got, parley.Reaction{Emoji: "thumbsup", Count: 2, Me: true}, parley.Reaction{Emoji: "heart", Count: 1, Me: false})
	got, err = e.s.RemoveReaction(ctx(t), e.bob.ID, m.ID, "heart")
	NoErr(t, err)
	wantReactions(t, got, parley.Reaction{Emoji: "thumbsup", Count: 2, Me: true})
	evs = e.published(e.ch, parley.EventReactionRemoved)
	if len(evs) != 1 {
		t.Fatalf("%d reaction.removed events, want 1", len(evs))
	}
	NoErr(t, json.Unmarshal(evs[0].Data, &d))
	if d.Emoji != "heart" || d.UserID != e.bob.ID || d.Seq != evs[0].Seq {
		t.Fatalf("reaction.removed payload = %s", evs[0].Data)
	}

	// History is decorated for its reader too.
	page, err := e.s.ListMessages(ctx(t), e.carol.ID, e.ch.ID, parley.HistoryQuery{})
	NoErr(t, err)
	wantReactions(t, &page.Messages[0], parley.Reaction{Emoji: "thumbsup", Count: 2, Me: false})

	// Rules.
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, m.ID, "Thumbs Up")
	Code(t, err, parley.EINVALID)
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, m.ID, "")
	Code(t, err, parley.EINVALID)
	_, err = e.s.AddReaction(ctx(t), e.carol.ID, m.ID, "wave")
	Code(t, err, parley.EFORBIDDEN)
	_, err = e.s.RemoveReaction(ctx(t), e.carol.ID, m.ID, "wave")
	Code(t, err, parley.EFORBIDDEN)
	_, err = e.s.AddReaction(ctx(t), e.outsider.ID, m.ID, "wave")
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, "Mnope", "wave")
	Code(t, err, parley.ENOTFOUND)
	gone := MustPost(t, e.s, e.alice, e.ch, "gone")
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, gone.ID))
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, gone.ID, "wave")
	Code(t, err, parley.ENOTFOUND)

	old := e.channel(t, "old", parley.KindPublic, e.alice)
	om := MustPost(t, e.s, e.alice, old, "frozen")
	_, err = e.s.ArchiveChannel(ctx(t), e.owner.ID, old.ID)
	NoErr(t, err)
	_, err = e.s.AddReaction(ctx(t), e.alice.ID, om.ID, "wave")
	Code(t, err, parley.ECONFLICT)

	if n := len(e.published(e.ch, parley.EventReactionAdded)); n != 3 {
		t.Fatalf("%d reaction.added events after refused reactions, want 3", n)
	}
}

func testPins(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	m1 := MustPost(t, e.s, e.alice, e.ch, "one")
	m2 := MustPost(t, e.s, e.alice, e.ch, "two")
	m3 := MustPost(t, e.s, e.alice, e.ch, "three")
	pin := func(u *parley.User, m *parley.Message) *parley.Message {
		t.Helper()
		got, err := e.s.Pin(ctx(t), u.ID, m.ID)
		NoErr(t, err)
		return got
	}
	if got := pin(e.bob, m2); !got.Pinned || got.ID != m2.ID {
		t.Fatalf("pinned = %+v", got)
	}
	pin(e.alice, m1)
	pin(e.alice, m2) // again: nothing changes
	pins := func(u *parley.User) []int64 {
		t.Helper()
		page, err := e.s.ListPins(ctx(t), u.ID, e.ch.ID)
		NoErr(t, err)
		for _, m := range page.Messages {
			if !m.Pinned {
				t.Fatalf("pinned message %s reads as not pinned", m.ID)
			}
		}
		return msgSeqs(page.Messages)
	}
	if got := pins(e.carol); !slices.Equal(got, []int64{m2.Seq, m1.Seq}) {
		t.Fatalf("pins = %v, want in pin order %v", got, []int64{m2.Seq, m1.Seq})
	}
	page, err := e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{})
	NoErr(t, err)
	if !page.Messages[0].Pinned || !page.Messages[1].Pinned || page.Messages[2].Pinned {
		t.Fatalf("history pin flags = %v %v %v", page.Messages[0].Pinned, page.Messages[1].Pinned, page.Messages[2].Pinned)
	}
	evs := e.published(e.ch, parley.EventPinAdded)
	if len(evs) != 2 {
		t.Fatalf("%d pin.added events, want 2", len(evs))
	}
	var d parley.PinEventData
	NoErr(t, json.Unmarshal(evs[0].Data, &d))
	if d.ChannelID != e.ch.ID || d.Seq != evs[0].Seq || d.MessageID != m2.ID || d.UserID != e.bob.ID {
		t.Fatalf("pin.added payload = %s", evs[0].Data)
	}

	got, err := e.s.Unpin(ctx(t), e.alice.ID, m2.ID)
	NoErr(t, err)
	if got.Pinned {
		t.Fatalf("unpinned = %+v", got)
	}
	_, err = e.s.Unpin(ctx(t), e.alice.ID, m3.ID) // not pinned: nothing changes
	NoErr(t, err)
	if got := pins(e.alice); !slices.Equal(got, []int64{m1.Seq}) {
		t.Fatalf("pins after unpin = %v", got)
	}
	if n := len(e.published(e.ch, parley.EventPinRemoved)); n != 1 {
		t.Fatalf("%d pin.removed events, want 1", n)
	}

	// Rules.
	_, err = e.s.Pin(ctx(t), e.carol.ID, m3.ID)
	Code(t, err, parley.EFORBIDDEN)
	_, err = e.s.Unpin(ctx(t), e.carol.ID, m1.ID)
	Code(t, err, parley.EFORBIDDEN)
	_, err = e.s.Pin(ctx(t), e.outsider.ID, m3.ID)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.ListPins(ctx(t), e.outsider.ID, e.ch.ID)
	Code(t, err, parley.ENOTFOUND)
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, m3.ID))
	_, err = e.s.Pin(ctx(t), e.alice.ID, m3.ID)
	Code(t, err, parley.ENOTFOUND)
	if n := len(e.published(e.ch, parley.EventPinAdded)); n != 2 {
		t.Fatalf("%d pin.added events after refused pins, want 2", n)
	}
}
