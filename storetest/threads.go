package storetest

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"parley"
)

// Contract tests of collapsed reply threads, mentions and the live
// configuration that governs them. They need more than the Store
// interface (a configuration changed at run time, and the rows a call
// writes, counted by the database itself), so they run through a Harness.

// LiveSwitch is a parley.LiveConfigSource that a test changes at run time.
type LiveSwitch struct {
	v atomic.Pointer[parley.LiveConfig]
}

// NewLiveSwitch returns a switch holding c.
func NewLiveSwitch(c parley.LiveConfig) *LiveSwitch {
	l := &LiveSwitch{}
	l.Set(c)
	return l
}

// LiveConfig returns the configuration now.
func (l *LiveSwitch) LiveConfig() parley.LiveConfig { return *l.v.Load() }

// Set replaces the configuration; the next write sees it.
func (l *LiveSwitch) Set(c parley.LiveConfig) { l.v.Store(&c) }

// Collapsed turns collapsed threads on or off, the rest unchanged.
func (l *LiveSwitch) Collapsed(on bool) {
	c := l.LiveConfig()
	c.CollapsedThreads = on
	l.Set(c)
}

// Harness opens stores for the tests that need it.
type Harness struct {
	// Open returns a new, empty store publishing to pub and reading its
	// live configuration from live; closed when tb ends.
	Open func(tb testing.TB, pub parley.EventPublisher, live parley.LiveConfigSource) parley.Store
	// RowWrites starts counting, in the database, the rows inserted into
	// or updated in table (of a store made by Open), and returns what reads
	// the count so far.
	RowWrites func(tb testing.TB, s parley.Store, table string) func() int64
	// Rows returns how many rows table holds.
	Rows func(tb testing.TB, s parley.Store, table string) int64
	// SetPresence gives a store made by Open the source @here asks who is
	// active (nil: none). Nil when the store cannot take one: the @here
	// tests are then skipped.
	SetPresence func(tb testing.TB, s parley.Store, p parley.PresenceSnapshot)
}

var harnessRegistry = map[string]func(t *testing.T, h Harness){}

func registerHarness(name string, fn func(t *testing.T, h Harness)) {
	if _, dup := harnessRegistry[name]; dup {
		panic("storetest: duplicate test " + name)
	}
	harnessRegistry[name] = fn
}

// RunHarness runs the tests that need a Harness.
func RunHarness(t *testing.T, h Harness) {
	names := make([]string, 0, len(harnessRegistry))
	for n := range harnessRegistry {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fn := harnessRegistry[n]
		t.Run(n, func(t *testing.T) {
			t.Parallel() // each on a store of its own
			fn(t, h)
		})
	}
}

func init() {
	registerHarness("Threads/FollowReplyRead", testThreadsFollowReplyRead)
	registerHarness("Threads/Visibility", testThreadsVisibility)
	registerHarness("Threads/MarkChannelReadWritesOnlyChanged", testMarkChannelReadWritesOnlyChanged)
	registerHarness("Threads/FlagOff", testThreadsFlagOff)
	registerHarness("Threads/ConcurrentReplies", testThreadsConcurrentReplies)
	registerHarness("Mentions/EventsAndCap", testMentionsEventsAndCap)
	registerHarness("Threads/DeletedRootLeavesSummary", testThreadsDeletedRoot)
	registerHarness("Threads/CursorBytes", testThreadsCursorBytes)
	registerHarness("Threads/ReplyCountAcrossFlag", testThreadsReplyCountAcrossFlag)
	registerHarness("Threads/FlagOffBootSummary", testThreadsFlagOffBootSummary)
	register("Reads/ChannelReadReachesOtherDevices", testChannelReadEvent)
}

// threadEnv is msgEnv on a store with a live switch.
type threadEnv struct {
	*msgEnv
	h    Harness
	live *LiveSwitch
	dave *parley.User // in the channel too
}

func newThreadEnv(t *testing.T, h Harness) *threadEnv {
	t.Helper()
	live := NewLiveSwitch(parley.DefaultLiveConfig())
	e := &threadEnv{h: h, live: live}
	e.msgEnv = newMsgEnv(t, func(tb testing.TB, pub parley.EventPublisher) parley.Store { return h.Open(tb, pub, live) })
	e.dave = MustUser(t, e.s, "dave")
	MustJoinWorkspace(t, e.s, e.ws, e.owner, e.dave)
	_, err := e.s.JoinChannel(ctx(t), e.dave.ID, e.ch.ID)
	NoErr(t, err)
	return e
}

// userEvents returns the published events of type typ on u's topic.
func (e *msgEnv) userEvents(u *parley.User, typ string) []parley.Event {
	var out []parley.Event
	for _, ev := range e.rec.OfType(typ) {
		if slices.Contains(ev.Topics, parley.TopicUser(u.ID)) {
			out = append(out, ev)
		}
	}
	return out
}

// lastThreadEvent returns the thread in the last event of type typ on u's
// topic.
func (e *msgEnv) lastThreadEvent(t *testing.T, u *parley.User, typ string) parley.ThreadEventData {
	t.Helper()
	evs := e.userEvents(u, typ)
	if len(evs) == 0 {
		t.Fatalf("no %s event on %s's topic", typ, u.Handle)
	}
	d := chData[parley.ThreadEventData](t, evs[len(evs)-1])
	if d.Thread == nil {
		t.Fatalf("%s event without a thread", typ)
	}
	return d
}

// threads returns u's followed threads in the workspace, by root id.
func (e *msgEnv) threads(t *testing.T, u *parley.User, unread bool) map[string]parley.Thread {
	t.Helper()
	out := map[string]parley.Thread{}
	q := parley.ThreadQuery{Unread: unread, Limit: 200}
	for {
		page, err := e.s.ListThreads(ctx(t), u.ID, e.ws.ID, q)
		NoErr(t, err)
		for _, th := range page.Threads {
			out[th.RootID] = th
		}
		if page.NextCursor == "" {
			return out
		}
		q.Cursor = page.NextCursor
	}
}

func wantThread(t *testing.T, who string, th parley.Thread, ok bool, replies, mentions int) {
	t.Helper()
	if !ok {
		t.Fatalf("%s does not follow the thread", who)
	}
	if th.UnreadReplies != replies || th.UnreadMentions != mentions {
		t.Fatalf("%s: unread replies %d, mentions %d; want %d, %d", who, th.UnreadReplies, th.UnreadMentions, replies, mentions)
	}
}

func testThreadsFollowReplyRead(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	root := e.post(t, e.alice, e.ch, "a question")
	if got := e.threads(t, e.alice, false); len(got) != 0 {
		t.Fatalf("a root without replies is no thread yet: %v", got)
	}

	// bob replies: bob follows (read), alice (the root's author) follows
	// with one unread reply; both hear of it on their own topics.
	r1 := e.reply(t, e.bob, root, "an answer")
	th, ok := e.threads(t, e.alice, true)[root.ID]
	wantThread(t, "alice", th, ok, 1, 0)
	if th.ReplyCount != 1 || th.ChannelID != e.ch.ID || th.Root == nil || th.Root.ID != root.ID ||
		!slices.Equal(th.Participants, []string{e.bob.ID}) || !th.LastReplyAt.Equal(r1.CreatedAt) {
		t.Fatalf("alice's thread = %+v", th)
	}
	th, ok = e.threads(t, e.bob, false)[root.ID]
	wantThread(t, "bob", th, ok, 0, 0)
	if d := e.lastThreadEvent(t, e.alice, parley.EventThreadUpdated); d.Thread.UnreadReplies != 1 || d.Message == nil || d.Message.ID != r1.ID {
		t.Fatalf("alice's thread.updated = %+v / %+v", d.Thread, d.Message)
	}
	if d := e.lastThreadEvent(t, e.bob, parley.EventThreadUpdated); d.Thread.UnreadReplies != 0 || d.Message.ID != r1.ID {
		t.Fatalf("bob's thread.updated = %+v", d.Thread)
	}
	if e.userEvents(e.carol, parley.EventThreadUpdated) != nil {
		t.Fatal("carol follows nothing but heard of the thread")
	}
	// Replies count in their thread, not in the channel.
	e.wantCounts(t, e.alice, e.ch, 0, 0)

	// dave is mentioned in a reply: he follows, with a mention; the others
	// count one more reply; dave gets a mention event naming the thread.
	r2 := e.reply(t, e.bob, root, "what do you think @"+e.dave.Handle+"?")
	wantThread(t, "alice", e.threads(t, e.alice, true)[root.ID], true, 2, 0)
	th, ok = e.threads(t, e.dave, true)[root.ID]
	wantThread(t, "dave", th, ok, 1, 1)
	men := e.userEvents(e.dave, parley.EventMention)
	if len(men) != 1 {
		t.Fatalf("dave got %d mention events", len(men))
	}
	if d := chData[parley.MentionEventData](t, men[0]); d.ThreadRootID != root.ID || d.Message.ID != r2.ID || d.ChannelID != e.ch.ID {
		t.Fatalf("mention event = %+v", d)
	}
	e.wantCounts(t, e.dave, e.ch, 1, 0) // alice's root; the reply counts in the thread
	if b := mustBoot(t, e.s, e.dave, parley.BootQuery{WorkspaceID: e.ws.ID}); b.Threads == nil ||
		b.Threads.UnreadThreads != 1 || b.Threads.UnreadMentions != 1 {
		t.Fatalf("dave's boot threads summary = %+v", b.Threads)
	}

	// alice reads the thread: her counts clear, her devices hear of it.
	th2, err := e.s.MarkThreadRead(ctx(t), e.alice.ID, root.ID)
	NoErr(t, err)
	if th2.UnreadReplies != 0 || !th2.Following || th2.ReplyCount != 2 || th2.Root == nil {
		t.Fatalf("MarkThreadRead = %+v", th2)
	}
	if d := e.lastThreadEvent(t, e.alice, parley.EventThreadRead); d.Thread.RootID != root.ID || d.Thread.UnreadReplies != 0 {
		t.Fatalf("thread.read = %+v", d.Thread)
	}
	if got := e.threads(t, e.alice, true); len(got) != 0 {
		t.Fatalf("alice still has unread threads: %v", got)
	}
	wantThread(t, "alice (all)", e.threads(t, e.alice, false)[root.ID], true, 0, 0)

	// bob unfollows: no longer listed, not counted, told.
	th2, err = e.s.UnfollowThread(ctx(t), e.bob.ID, root.ID)
	NoErr(t, err)
	if th2.Following {
		t.Fatal("still following after unfollow")
	}
	if d := e.lastThreadEvent(t, e.bob, parley.EventThreadUnfollowed); d.Thread.Following {
		t.Fatalf("thread.unfollowed = %+v", d.Thread)
	}
	before := len(e.userEvents(e.bob, parley.EventThreadUpdated))
	e.reply(t, e.alice, root, "thanks")
	if _, ok := e.threads(t, e.bob, false)[root.ID]; ok {
		t.Fatal("bob still lists the thread he unfollowed")
	}
	if len(e.userEvents(e.bob, parley.EventThreadUpdated)) != before {
		t.Fatal("bob heard of a reply in a thread he unfollowed")
	}
	// carol follows explicitly (she has not taken part): from now on she
	// counts replies.
	th2, err = e.s.FollowThread(ctx(t), e.carol.ID, root.ID)
	NoErr(t, err)
	if !th2.Following || th2.UnreadReplies != 0 || th2.ReplyCount != 3 {
		t.Fatalf("FollowThread = %+v", th2)
	}
	if d := e.lastThreadEvent(t, e.carol, parley.EventThreadFollowed); !d.Thread.Following {
		t.Fatalf("thread.followed = %+v", d.Thread)
	}
	e.reply(t, e.dave, root, "agreed")
	wantThread(t, "carol", e.threads(t, e.carol, true)[root.ID], true, 1, 0)
	// Replying follows again.
	e.reply(t, e.bob, root, "back")
	wantThread(t, "bob", e.threads(t, e.bob, false)[root.ID], true, 0, 0)
	wantThread(t, "carol", e.threads(t, e.carol, true)[root.ID], true, 2, 0)

	// A deleted reply leaves the thread's count.
	NoErr(t, e.s.DeleteMessage(ctx(t), e.bob.ID, r1.ID))
	if th := e.threads(t, e.carol, false)[root.ID]; th.ReplyCount != 4 {
		t.Fatalf("reply count after a delete = %d, want 4", th.ReplyCount)
	}

	// Paging: most recent reply first, cursors cover every thread once.
	var roots []*parley.Message
	for i := range 5 {
		r := e.post(t, e.alice, e.ch, fmt.Sprintf("root %d", i))
		e.reply(t, e.bob, r, "re")
		roots = append(roots, r)
	}
	page, err := e.s.ListThreads(ctx(t), e.alice.ID, e.ws.ID, parley.ThreadQuery{Limit: 2})
	NoErr(t, err)
	if len(page.Threads) != 2 || page.NextCursor == "" || page.Threads[0].RootID != roots[4].ID || page.Threads[1].RootID != roots[3].ID {
		t.Fatalf("first page = %d threads, cursor %q", len(page.Threads), page.NextCursor)
	}
	if got := e.threads(t, e.alice, false); len(got) != 6 {
		t.Fatalf("alice follows %d threads, want 6", len(got))
	}
	_, err = e.s.ListThreads(ctx(t), e.alice.ID, e.ws.ID, parley.ThreadQuery{Cursor: "!!"})
	Code(t, err, parley.EINVALID)
}

func testThreadsVisibility(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	root := e.post(t, e.alice, e.ch, "root")
	reply := e.reply(t, e.bob, root, "reply")
	priv := e.channel(t, "secret", parley.KindPrivate, e.alice, e.bob)
	proot := e.post(t, e.alice, priv, "private root")
	e.reply(t, e.bob, proot, "private reply")

	// Outsiders (another workspace) and non-members of a private channel
	// see nothing; a reply is no root; an unknown id is not found.
	_, err := e.s.FollowThread(ctx(t), e.outsider.ID, root.ID)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.FollowThread(ctx(t), e.carol.ID, proot.ID)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.MarkThreadRead(ctx(t), e.carol.ID, proot.ID)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.UnfollowThread(ctx(t), e.outsider.ID, root.ID)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.FollowThread(ctx(t), e.alice.ID, reply.ID)
	Code(t, err, parley.EINVALID)
	_, err = e.s.FollowThread(ctx(t), e.alice.ID, "msg_nosuch")
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.ListThreads(ctx(t), e.outsider.ID, e.ws.ID, parley.ThreadQuery{})
	Code(t, err, parley.ENOTFOUND)
	// carol, in the workspace but not the public channel, may follow it.
	_, err = e.s.FollowThread(ctx(t), e.carol.ID, root.ID)
	NoErr(t, err)

	// bob leaves the private channel: its thread leaves his list, and its
	// replies neither count for him nor reach him.
	NoErr(t, e.s.LeaveChannel(ctx(t), e.bob.ID, priv.ID))
	if _, ok := e.threads(t, e.bob, false)[proot.ID]; ok {
		t.Fatal("bob still lists a thread of a private channel he left")
	}
	before := len(e.userEvents(e.bob, parley.EventThreadUpdated))
	e.reply(t, e.alice, proot, "after bob left")
	if len(e.userEvents(e.bob, parley.EventThreadUpdated)) != before {
		t.Fatal("a reply in a private channel reached a follower who left it")
	}
	if _, ok := e.threads(t, e.bob, false)[root.ID]; !ok {
		t.Fatal("bob lost the public thread")
	}
}

// testMarkChannelReadWritesOnlyChanged is the Mattermost lesson: alice
// follows 1,000 threads in a channel, 3 of which have replies she has not
// seen; marking the channel read writes exactly those 3 memberships, as
// counted by the database, not 1,000.
func testMarkChannelReadWritesOnlyChanged(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	const followed, fresh = 1000, 3
	roots := make([]*parley.Message, followed)
	parallel(t, followed, func(i int) error {
		m, _, err := e.s.PostMessage(ctx(t), e.alice.ID, e.ch.ID, parley.NewMessage{Text: fmt.Sprintf("root %d", i)})
		roots[i] = m
		return err
	})
	// Every thread has a reply by bob: alice follows all of them.
	parallel(t, followed, func(i int) error {
		_, _, err := e.s.PostMessage(ctx(t), e.bob.ID, e.ch.ID, parley.NewMessage{Text: "re", ThreadRootID: roots[i].ID})
		return err
	})
	if n := len(e.threads(t, e.alice, true)); n != followed {
		t.Fatalf("alice has %d unread threads, want %d", n, followed)
	}
	ch, err := e.s.GetChannel(ctx(t), e.alice.ID, e.ch.ID)
	NoErr(t, err)
	e.markRead(t, e.alice, e.ch, ch.LastSeq) // all read
	if n := len(e.threads(t, e.alice, true)); n != 0 {
		t.Fatalf("alice has %d unread threads after reading the channel", n)
	}
	for i := range fresh {
		e.reply(t, e.bob, roots[i*300], "news")
	}
	if n := len(e.threads(t, e.alice, true)); n != fresh {
		t.Fatalf("alice has %d unread threads, want %d", n, fresh)
	}

	written := h.RowWrites(t, e.s, "thread_memberships")
	readsBefore := len(e.userEvents(e.alice, parley.EventThreadRead))
	e.markRead(t, e.alice, e.ch, 1<<40)
	if n := written(); n != fresh {
		t.Fatalf("marking the channel read wrote %d thread_memberships rows, want exactly %d", n, fresh)
	}
	reads := e.userEvents(e.alice, parley.EventThreadRead)[readsBefore:]
	if n := len(reads); n != fresh {
		t.Fatalf("%d thread.read events, want %d", n, fresh)
	}
	// Each carries the whole thread: a client shows its reply count as it is.
	for _, ev := range reads {
		d := chData[parley.ThreadEventData](t, ev)
		if d.Thread == nil || d.Thread.ReplyCount != 2 || d.Thread.LastReplyAt.IsZero() || len(d.Thread.Participants) != 1 || !d.Thread.Following {
			t.Fatalf("thread.read after a channel read = %+v, want 2 replies, a last reply, bob as participant, followed", d.Thread)
		}
	}
	if n := len(e.threads(t, e.alice, true)); n != 0 {
		t.Fatalf("alice still has %d unread threads", n)
	}
	// Nothing new: marking read again writes nothing at all.
	written = h.RowWrites(t, e.s, "thread_memberships")
	e.markRead(t, e.alice, e.ch, 1<<40)
	if n := written(); n != 0 {
		t.Fatalf("marking a read channel read again wrote %d thread_memberships rows", n)
	}
}

// parallel runs fn(0..n-1) on a few goroutines (group commit batches
// them) and fails on the first error.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Pointer[error]
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		t.Fatal(*p)
	}
}

// testThreadsFlagOff: with collapsed threads off (changed at run time, no
// restart) no thread bookkeeping is written at all, replies show inline
// and count in the channel; turning it back on resumes the bookkeeping.
func testThreadsFlagOff(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	e.live.Collapsed(false)
	threadWrites := h.RowWrites(t, e.s, "threads")
	memberWrites := h.RowWrites(t, e.s, "thread_memberships")

	root := e.post(t, e.alice, e.ch, "root")
	e.markRead(t, e.alice, e.ch, root.Seq)
	reply := e.reply(t, e.bob, root, "inline @"+e.alice.Handle)
	e.reply(t, e.dave, root, "me too")
	// Inline: the channel's history has the replies, and they count in
	// the channel (alice: two unread, one mention).
	page, err := e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{})
	NoErr(t, err)
	if n := len(page.Messages); n != 3 || page.Messages[1].ID != reply.ID {
		t.Fatalf("history with collapsed threads off has %d messages, want the root and two replies", n)
	}
	e.wantCounts(t, e.alice, e.ch, 2, 1)
	if b := mustBoot(t, e.s, e.alice, parley.BootQuery{WorkspaceID: e.ws.ID, ChannelID: e.ch.ID}); len(b.Messages) != 3 {
		t.Fatalf("one-channel boot with collapsed threads off has %d messages, want 3", len(b.Messages))
	}
	if n := len(e.userEvents(e.alice, parley.EventMention)); n != 1 {
		t.Fatalf("alice got %d mention events, want 1", n)
	}
	e.markRead(t, e.alice, e.ch, 1<<40)
	e.wantCounts(t, e.alice, e.ch, 0, 0)
	_, err = e.s.FollowThread(ctx(t), e.carol.ID, root.ID)
	Code(t, err, parley.ECONFLICT)
	_, err = e.s.MarkThreadRead(ctx(t), e.alice.ID, root.ID)
	Code(t, err, parley.ECONFLICT)
	if n, m := threadWrites(), memberWrites(); n != 0 || m != 0 {
		t.Fatalf("collapsed threads off wrote %d threads and %d thread_memberships rows", n, m)
	}
	if n, m := h.Rows(t, e.s, "threads"), h.Rows(t, e.s, "thread_memberships"); n != 0 || m != 0 {
		t.Fatalf("collapsed threads off: %d threads and %d thread_memberships rows", n, m)
	}
	if len(e.rec.OfType(parley.EventThreadUpdated)) != 0 {
		t.Fatal("thread.updated published with collapsed threads off")
	}

	// On again, same store: the bookkeeping resumes and replies leave the
	// channel's history and counts.
	e.live.Collapsed(true)
	root2 := e.post(t, e.bob, e.ch, "root 2")
	e.markRead(t, e.alice, e.ch, root2.Seq)
	threaded := e.reply(t, e.dave, root2, "threaded")
	wantThread(t, "bob", e.threads(t, e.bob, true)[root2.ID], true, 1, 0)
	e.wantCounts(t, e.alice, e.ch, 0, 0)
	page, err = e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{})
	NoErr(t, err)
	if n := len(page.Messages); n != 2 {
		t.Fatalf("history with collapsed threads on has %d messages, want the two roots", n)
	}
	if b := mustBoot(t, e.s, e.alice, parley.BootQuery{WorkspaceID: e.ws.ID, ChannelID: e.ch.ID}); len(b.Messages) != 2 {
		t.Fatalf("one-channel boot with collapsed threads on has %d messages, want the two roots", len(b.Messages))
	}

	// Off again while bob has an unread thread: reading the channel must
	// not touch thread memberships (Mattermost's flag that was not checked).
	e.live.Collapsed(false)
	memberWrites = h.RowWrites(t, e.s, "thread_memberships")
	threadWrites = h.RowWrites(t, e.s, "threads")
	e.markRead(t, e.bob, e.ch, 1<<40)
	whileOff := e.reply(t, e.alice, root2, "while off")
	if n, m := threadWrites(), memberWrites(); n != 0 || m != 0 {
		t.Fatalf("collapsed threads off again: wrote %d threads and %d thread_memberships rows", n, m)
	}
	// A message keeps how it counted when the setting changes: editing in
	// a mention counts it in the channel only for a reply that counts there.
	e.wantCounts(t, e.bob, e.ch, 1, 0)
	_, err = e.s.EditMessage(ctx(t), e.dave.ID, threaded.ID, "threaded @"+e.bob.Handle)
	NoErr(t, err)
	e.wantCounts(t, e.bob, e.ch, 1, 0)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, whileOff.ID, "while off @"+e.bob.Handle)
	NoErr(t, err)
	e.wantCounts(t, e.bob, e.ch, 1, 1)
}

func testMentionsEventsAndCap(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	// @handle: a mention event on the handle's topic only.
	m := e.post(t, e.alice, e.ch, "hey @"+e.bob.Handle)
	evs := e.userEvents(e.bob, parley.EventMention)
	if len(evs) != 1 {
		t.Fatalf("bob got %d mention events, want 1", len(evs))
	}
	if d := chData[parley.MentionEventData](t, evs[0]); d.Message == nil || d.Message.ID != m.ID || d.ChannelID != e.ch.ID || d.ThreadRootID != "" {
		t.Fatalf("mention = %+v", d)
	}
	if len(e.rec.OfType(parley.EventMention)) != 1 {
		t.Fatal("a mention event went to someone not mentioned")
	}
	// @channel: every member but the poster.
	e.post(t, e.alice, e.ch, "@channel standup")
	for _, u := range []*parley.User{e.owner, e.bob, e.dave} {
		if n := len(e.userEvents(u, parley.EventMention)); n < 1 {
			t.Fatalf("%s got no mention for @channel", u.Handle)
		}
	}
	if n := len(e.userEvents(e.alice, parley.EventMention)); n != 0 {
		t.Fatalf("alice was told of her own @channel")
	}
	// Above the cap (the channel has 4 members: owner, alice, bob, dave),
	// @channel, @here and @everyone need an admin; below or at it anyone.
	e.live.Set(parley.LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 3})
	for _, h := range parley.BroadcastMentions {
		_, _, err := e.s.PostMessage(ctx(t), e.alice.ID, e.ch.ID, parley.NewMessage{Text: "@" + h + " hi"})
		Code(t, err, parley.EFORBIDDEN)
	}
	_, _, err := e.s.PostMessage(ctx(t), e.alice.ID, e.ch.ID, parley.NewMessage{Text: "@channel hi", ThreadRootID: m.ID})
	Code(t, err, parley.EFORBIDDEN)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, m.ID, "now @channel")
	Code(t, err, parley.EFORBIDDEN)
	e.post(t, e.alice, e.ch, "plain @"+e.bob.Handle+" is fine")
	e.post(t, e.owner, e.ch, "@channel from an admin")
	e.live.Set(parley.LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 4})
	e.post(t, e.alice, e.ch, "@here at the cap")
	e.live.Set(parley.LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 0})
	e.post(t, e.alice, e.ch, "@everyone with no cap")

	// @channel in a thread reaches its followers (with a mention each).
	e.live.Set(parley.DefaultLiveConfig())
	root := e.post(t, e.dave, e.ch, "thread")
	e.reply(t, e.bob, root, "first")
	before := len(e.userEvents(e.dave, parley.EventMention))
	e.reply(t, e.bob, root, "@channel look")
	if n := len(e.userEvents(e.dave, parley.EventMention)) - before; n != 1 {
		t.Fatalf("dave got %d mentions for @channel in his thread", n)
	}
	wantThread(t, "dave", e.threads(t, e.dave, true)[root.ID], true, 2, 1)
}

func testChannelReadEvent(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	m := e.post(t, e.bob, e.ch, "hello")
	e.markRead(t, e.alice, e.ch, m.Seq)
	evs := e.userEvents(e.alice, parley.EventChannelRead)
	if len(evs) != 1 {
		t.Fatalf("%d channel.read events on alice's topic, want 1", len(evs))
	}
	if d := chData[parley.ReadEventData](t, evs[0]); d.ChannelID != e.ch.ID || d.LastReadSeq != m.Seq {
		t.Fatalf("channel.read = %+v", d)
	}
	chNoTopic(t, evs[0], parley.TopicChannel(e.ch.ID)) // nobody else's business
}

// testThreadsConcurrentReplies: replies from several posters at once, while
// the root's author keeps reading the channel, lose no count.
func testThreadsConcurrentReplies(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	root := e.post(t, e.alice, e.ch, "root")
	posters := []*parley.User{e.bob, e.dave, e.owner}
	const each = 20
	var wg sync.WaitGroup
	wg.Add(1)
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() { // alice reads the channel over and over meanwhile
		defer wg.Done()
		for {
			select {
			case <-stop:
				readErr <- nil
				return
			default:
			}
			if _, err := e.s.MarkRead(ctx(t), e.alice.ID, e.ch.ID, 1<<40); err != nil {
				readErr <- err
				return
			}
		}
	}()
	parallel(t, len(posters)*each, func(i int) error {
		_, _, err := e.s.PostMessage(ctx(t), posters[i%len(posters)].ID, e.ch.ID,
			parley.NewMessage{Text: fmt.Sprintf("reply %d", i), ThreadRootID: root.ID})
		return err
	})
	close(stop)
	wg.Wait()
	NoErr(t, <-readErr)
	// carol follows now and counts exactly the replies after that.
	_, err := e.s.FollowThread(ctx(t), e.carol.ID, root.ID)
	NoErr(t, err)
	e.reply(t, e.bob, root, "one more")
	th, ok := e.threads(t, e.carol, false)[root.ID]
	wantThread(t, "carol", th, ok, 1, 0)
	if th.ReplyCount != len(posters)*each+1 || len(th.Participants) != len(posters) {
		t.Fatalf("thread = %d replies, participants %v; want %d and %d distinct", th.ReplyCount, th.Participants, len(posters)*each+1, len(posters))
	}
	// Each poster has exactly the replies by others after their own last
	// one, in seq order (a reply marks the thread read for its poster).
	var replies []parley.Message
	for after := int64(0); ; {
		page, err := e.s.ListReplies(ctx(t), e.alice.ID, root.ID, after, 200)
		NoErr(t, err)
		replies = append(replies, page.Messages...)
		if page.NextCursor == "" {
			break
		}
		after = page.Messages[len(page.Messages)-1].Seq
	}
	for _, u := range posters {
		want := 0
		for _, r := range replies {
			if r.UserID == u.ID {
				want = 0
			} else {
				want++
			}
		}
		wantThread(t, u.Handle, e.threads(t, u, false)[root.ID], true, want, 0)
	}
	e.markRead(t, e.alice, e.ch, 1<<40)
	if got := e.threads(t, e.alice, true); len(got) != 0 {
		t.Fatalf("alice has unread threads after reading the channel: %+v", got)
	}
	th2, err := e.s.MarkThreadRead(ctx(t), e.dave.ID, root.ID)
	NoErr(t, err)
	if th2.UnreadReplies != 0 || th2.ReplyCount != len(posters)*each+1 {
		t.Fatalf("dave after reading: %+v", th2)
	}
}

// testThreadsDeletedRoot: a thread whose root was deleted leaves the
// threads list, and so must leave boot's unread summary (else the badge
// counts a thread the user can neither list nor open nor mark read).
func testThreadsDeletedRoot(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	root := e.post(t, e.alice, e.ch, "root")
	e.reply(t, e.bob, root, "@"+e.alice.Handle+" reply")
	if b := mustBoot(t, e.s, e.alice, parley.BootQuery{WorkspaceID: e.ws.ID}); b.Threads == nil ||
		b.Threads.UnreadThreads != 1 || b.Threads.UnreadMentions != 1 {
		t.Fatalf("alice's boot threads summary before the delete = %+v", b.Threads)
	}
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, root.ID))
	if got := e.threads(t, e.alice, true); len(got) != 0 {
		t.Fatalf("a thread of a deleted root is listed: %v", got)
	}
	if b := mustBoot(t, e.s, e.alice, parley.BootQuery{WorkspaceID: e.ws.ID}); b.Threads == nil ||
		b.Threads.UnreadThreads != 0 || b.Threads.UnreadMentions != 0 {
		t.Fatalf("alice's boot threads summary after the root's delete = %+v, want none unread", b.Threads)
	}
}

// testThreadsCursorBytes: a cursor that decodes to bytes no text column
// can hold (invalid UTF-8, NUL) is a bad cursor on both databases, not an
// internal error on PostgreSQL.
func testThreadsCursorBytes(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	for _, raw := range []string{"1:\xff", "1:a\x00b", "msg_\xff", "msg_\x00"} {
		cur := base64.RawURLEncoding.EncodeToString([]byte(raw))
		_, err := e.s.ListThreads(ctx(t), e.alice.ID, e.ws.ID, parley.ThreadQuery{Cursor: cur})
		Code(t, err, parley.EINVALID)
		_, err = e.s.Search(ctx(t), e.alice.ID, e.ws.ID, parley.SearchQuery{Q: "x", Cursor: cur})
		Code(t, err, parley.EINVALID)
	}
}

// testThreadsReplyCountAcrossFlag: replies posted while collapsed threads
// were off are replies all the same; once it is on again the thread's
// reply count agrees with its root's.
func testThreadsReplyCountAcrossFlag(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	e.live.Collapsed(false)
	root := e.post(t, e.alice, e.ch, "root")
	e.reply(t, e.bob, root, "one")
	gone := e.reply(t, e.dave, root, "two")
	e.live.Collapsed(true)
	e.reply(t, e.bob, root, "three")
	want := func(n int) {
		t.Helper()
		th, ok := e.threads(t, e.alice, false)[root.ID]
		if !ok {
			t.Fatal("alice does not follow her thread")
		}
		if got := e.get(t, e.alice, root.ID).ReplyCount; th.ReplyCount != n || got != n {
			t.Fatalf("thread reply count %d, root's %d; want %d", th.ReplyCount, got, n)
		}
	}
	want(3)
	NoErr(t, e.s.DeleteMessage(ctx(t), e.dave.ID, gone.ID))
	want(2)
}

// testThreadsFlagOffBootSummary: with collapsed threads off replies count
// in the channel and thread reads are refused (409), so boot must not
// report unread threads left from before: nothing could clear them. The
// memberships are kept, and count again once it is back on.
func testThreadsFlagOffBootSummary(t *testing.T, h Harness) {
	e := newThreadEnv(t, h)
	root := e.post(t, e.alice, e.ch, "root")
	e.reply(t, e.bob, root, "reply")
	summary := func() parley.ThreadsSummary {
		t.Helper()
		b := mustBoot(t, e.s, e.alice, parley.BootQuery{WorkspaceID: e.ws.ID})
		if b.Threads == nil {
			t.Fatal("boot without a threads summary")
		}
		return *b.Threads
	}
	if got := summary(); got.UnreadThreads != 1 {
		t.Fatalf("threads summary = %+v, want 1 unread thread", got)
	}
	e.live.Collapsed(false)
	_, err := e.s.MarkThreadRead(ctx(t), e.alice.ID, root.ID)
	Code(t, err, parley.ECONFLICT)
	if got := summary(); got.UnreadThreads != 0 || got.UnreadMentions != 0 {
		t.Fatalf("threads summary with collapsed threads off = %+v, want none", got)
	}
	e.live.Collapsed(true)
	if got := summary(); got.UnreadThreads != 1 {
		t.Fatalf("threads summary back on = %+v, want 1 unread thread", got)
	}
}
