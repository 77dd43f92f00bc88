package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"parley"
)

// Contract tests of channel memberships, member counts and read markers.

func init() {
	register("Members/JoinLeave", testJoinLeave)
	register("Members/Add", testAddMembers)
	register("Members/AddRules", testAddMembersRules)
	register("Members/Remove", testRemoveMember)
	register("Members/List", testListMembers)
	register("Members/MarkRead", testMarkRead)
	register("Members/CountExact", testMemberCountExact)
	register("Members/ConcurrentJoins", testConcurrentJoins)
}

// memberCount reads the channel's member count as u sees it.
func (e *chanEnv) memberCount(t *testing.T, u *parley.User, ch *parley.Channel) int64 {
	t.Helper()
	return e.get(t, u, ch).MemberCount
}

func testJoinLeave(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)

	got, err := e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	if !got.IsMember || got.MemberCount != 2 || got.LastSeq != 2 || got.LastReadSeq != 2 {
		t.Fatalf("joined channel = %+v", got)
	}
	if g := e.get(t, e.member2, ch); !g.IsMember || g.MemberCount != 2 || g.LastReadSeq != 2 || g.LastSeq != 2 {
		t.Fatalf("get after join = %+v", g)
	}
	// Joining again changes nothing.
	again, err := e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	if !again.IsMember || again.MemberCount != 2 || again.LastSeq != 2 {
		t.Fatalf("join again = %+v", again)
	}
	evs := chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined)
	d := chData[parley.MemberEventData](t, evs[1])
	if d.UserID != e.member2.ID || d.ActorID != "" || d.MemberCount != 2 {
		t.Fatalf("member.joined payload = %s", evs[1].Data)
	}
	// To the channel's members, the user concerned and the caches: no
	// workspace-wide copy.
	chTopicsExactly(t, evs[1], parley.TopicChannel(ch.ID), parley.TopicUser(e.member2.ID), parley.TopicDirectory(e.ws.ID))

	// Guests and outsiders cannot see the channel, so cannot join it.
	for _, u := range []*parley.User{e.guest, e.outsider} {
		_, err := e.s.JoinChannel(ctx(t), u.ID, ch.ID)
		Code(t, err, parley.ENOTFOUND)
	}
	_, err = e.s.JoinChannel(ctx(t), e.member2.ID, "Cnope")
	Code(t, err, parley.ENOTFOUND)

	NoErr(t, e.s.LeaveChannel(ctx(t), e.member2.ID, ch.ID))
	if g := e.get(t, e.member2, ch); g.IsMember || g.MemberCount != 1 || g.LastReadSeq != 0 || g.LastSeq != 3 {
		t.Fatalf("get after leave = %+v", g)
	}
	// Leaving again, or a channel never joined, is a no-op.
	NoErr(t, e.s.LeaveChannel(ctx(t), e.member2.ID, ch.ID))
	NoErr(t, e.s.LeaveChannel(ctx(t), e.owner.ID, ch.ID))
	Code(t, e.s.LeaveChannel(ctx(t), e.guest.ID, ch.ID), parley.ENOTFOUND)
	evs = chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberLeft)
	d = chData[parley.MemberEventData](t, evs[2])
	if d.UserID != e.member2.ID || d.ActorID != "" || d.MemberCount != 1 {
		t.Fatalf("member.left payload = %s", evs[2].Data)
	}
	chTopicsExactly(t, evs[2], parley.TopicChannel(ch.ID), parley.TopicUser(e.member2.ID), parley.TopicDirectory(e.ws.ID))

	// A private channel's last member may leave it; it then vanishes for them.
	priv := MustChannel(t, e.s, e.ws, e.member, "priv", parley.KindPrivate)
	NoErr(t, e.s.LeaveChannel(ctx(t), e.member.ID, priv.ID))
	_, err = e.s.GetChannel(ctx(t), e.member.ID, priv.ID)
	Code(t, err, parley.ENOTFOUND)
	evs = chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventMemberLeft)
	chTopicsExactly(t, evs[1], parley.TopicChannel(priv.ID), parley.TopicUser(e.member.ID), parley.TopicDirectory(e.ws.ID))

	// Rejoining starts with nothing unread.
	got, err = e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	if got.LastSeq != 4 || got.LastReadSeq != 4 || got.MemberCount != 2 {
		t.Fatalf("rejoined = %+v", got)
	}
}

func testAddMembers(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	priv := MustChannel(t, e.s, e.ws, e.member, "priv", parley.KindPrivate)

	got, err := e.s.AddMembers(ctx(t), e.member.ID, priv.ID, []string{e.member2.ID, e.guest.ID, e.member2.ID, e.member.ID})
	NoErr(t, err)
	if got.MemberCount != 3 || got.LastSeq != 3 || !got.IsMember || got.LastReadSeq != 1 {
		t.Fatalf("after add = %+v", got)
	}
	evs := chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined)
	var joined []string
	for i, ev := range evs[1:] {
		d := chData[parley.MemberEventData](t, ev)
		if d.ActorID != e.member.ID || d.MemberCount != int64(i+2) {
			t.Fatalf("member.joined payload = %s", ev.Data)
		}
		chTopicsExactly(t, ev, parley.TopicChannel(ev.ChannelID), parley.TopicUser(d.UserID), parley.TopicDirectory(e.ws.ID))
		joined = append(joined, d.UserID)
	}
	slices.Sort(joined)
	want := []string{e.member2.ID, e.guest.ID}
	slices.Sort(want)
	if !slices.Equal(joined, want) {
		t.Fatalf("joined %v, want %v", joined, want)
	}
	// The added see it as members with nothing unread.
	for _, u := range []*parley.User{e.member2, e.guest} {
		g := e.get(t, u, priv)
		if !g.IsMember || g.MemberCount != 3 || g.LastReadSeq < 2 || g.LastReadSeq > g.LastSeq {
			t.Fatalf("added member %s sees %+v", u.Handle, g)
		}
	}

	// Adding members again is a no-op; any non-guest member may add.
	got, err = e.s.AddMembers(ctx(t), e.member2.ID, priv.ID, []string{e.member.ID, e.guest.ID})
	NoErr(t, err)
	if got.MemberCount != 3 || got.LastSeq != 3 {
		t.Fatalf("add existing = %+v", got)
	}
	got, err = e.s.AddMembers(ctx(t), e.member2.ID, priv.ID, []string{e.owner.ID})
	NoErr(t, err)
	if got.MemberCount != 4 || got.LastSeq != 4 || got.LastReadSeq != e.get(t, e.member2, priv).LastReadSeq {
		t.Fatalf("add owner = %+v", got)
	}
	chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined,
		parley.EventMemberJoined)

	// Public channels announce additions to their members and the user
	// added, like private ones.
	pub := MustChannel(t, e.s, e.ws, e.member, "pub", parley.KindPublic)
	_, err = e.s.AddMembers(ctx(t), e.member.ID, pub.ID, []string{e.guest.ID})
	NoErr(t, err)
	evs = chLog(t, e.rec, pub.ID, parley.EventChannelCreated, parley.EventMemberJoined)
	chTopicsExactly(t, evs[1], parley.TopicChannel(pub.ID), parley.TopicUser(e.guest.ID), parley.TopicDirectory(e.ws.ID))
	if g := e.get(t, e.guest, pub); !g.IsMember || g.MemberCount != 2 {
		t.Fatalf("guest added to public channel sees %+v", g)
	}
}

func testAddMembersRules(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)
	_, err := e.s.AddMembers(ctx(t), e.member.ID, ch.ID, []string{e.guest.ID})
	NoErr(t, err)
	add := func(u *parley.User, ids ...string) error {
		_, err := e.s.AddMembers(ctx(t), u.ID, ch.ID, ids)
		return err
	}
	Code(t, add(e.member2, e.owner.ID), parley.EFORBIDDEN) // visible, not joined
	Code(t, add(e.owner, e.member2.ID), parley.EFORBIDDEN) // admins too must join first
	Code(t, add(e.guest, e.member2.ID), parley.EFORBIDDEN) // guests never add
	Code(t, add(e.outsider, e.outsider.ID), parley.ENOTFOUND)

	Code(t, add(e.member), parley.EINVALID)
	Code(t, add(e.member, e.outsider.ID), parley.EINVALID)
	Code(t, add(e.member, "Unobody"), parley.EINVALID)
	too := make([]string, parley.MaxAddMembers+1)
	for i := range too {
		too[i] = fmt.Sprintf("U%06d", i)
	}
	Code(t, add(e.member, too...), parley.EINVALID)

	// One bad id spoils the whole request, and is named.
	err = add(e.member, e.member2.ID, e.owner.ID, e.outsider.ID)
	Code(t, err, parley.EINVALID)
	if !strings.Contains(parley.ErrorMessage(err), e.outsider.ID) {
		t.Fatalf("error %q does not name %s", parley.ErrorMessage(err), e.outsider.ID)
	}
	if n := e.memberCount(t, e.member, ch); n != 2 {
		t.Fatalf("member count after rejected add = %d, want 2", n)
	}
	chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined)

	// A batch of valid ids is added whole.
	got, err := e.s.AddMembers(ctx(t), e.member.ID, ch.ID, []string{e.member2.ID, e.owner.ID})
	NoErr(t, err)
	if got.MemberCount != 4 {
		t.Fatalf("member count = %d, want 4", got.MemberCount)
	}
}

func testRemoveMember(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	priv := MustChannel(t, e.s, e.ws, e.member, "priv", parley.KindPrivate)
	_, err := e.s.AddMembers(ctx(t), e.member.ID, priv.ID, []string{e.member2.ID, e.guest.ID})
	NoErr(t, err)

	// Only the creator and workspace admins manage members.
	Code(t, e.s.RemoveMember(ctx(t), e.member2.ID, priv.ID, e.guest.ID), parley.EFORBIDDEN)
	Code(t, e.s.RemoveMember(ctx(t), e.guest.ID, priv.ID, e.member2.ID), parley.EFORBIDDEN)
	Code(t, e.s.RemoveMember(ctx(t), e.owner.ID, priv.ID, e.guest.ID), parley.ENOTFOUND) // cannot see it
	Code(t, e.s.RemoveMember(ctx(t), e.outsider.ID, priv.ID, e.guest.ID), parley.ENOTFOUND)

	NoErr(t, e.s.RemoveMember(ctx(t), e.member.ID, priv.ID, e.guest.ID))
	if n := e.memberCount(t, e.member, priv); n != 2 {
		t.Fatalf("member count after remove = %d, want 2", n)
	}
	_, err = e.s.GetChannel(ctx(t), e.guest.ID, priv.ID)
	Code(t, err, parley.ENOTFOUND)
	Code(t, e.s.RemoveMember(ctx(t), e.member.ID, priv.ID, e.guest.ID), parley.ENOTFOUND)
	Code(t, e.s.RemoveMember(ctx(t), e.member.ID, priv.ID, "Unobody"), parley.ENOTFOUND)
	evs := chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined,
		parley.EventMemberLeft)
	d := chData[parley.MemberEventData](t, evs[3])
	if d.UserID != e.guest.ID || d.ActorID != e.member.ID || d.MemberCount != 2 {
		t.Fatalf("member.left payload = %s", evs[3].Data)
	}
	chTopics(t, evs[3], parley.TopicUser(e.guest.ID))

	// Removing oneself is leaving, allowed to anyone.
	NoErr(t, e.s.RemoveMember(ctx(t), e.member2.ID, priv.ID, e.member2.ID))
	evs = chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined,
		parley.EventMemberLeft, parley.EventMemberLeft)
	if d := chData[parley.MemberEventData](t, evs[4]); d.UserID != e.member2.ID || d.ActorID != "" || d.MemberCount != 1 {
		t.Fatalf("self-remove payload = %s", evs[4].Data)
	}

	// Admins manage public channels without being in them.
	pub := MustChannel(t, e.s, e.ws, e.member, "pub", parley.KindPublic)
	_, err = e.s.JoinChannel(ctx(t), e.member2.ID, pub.ID)
	NoErr(t, err)
	NoErr(t, e.s.RemoveMember(ctx(t), e.owner.ID, pub.ID, e.member2.ID))
	if n := e.memberCount(t, e.owner, pub); n != 1 {
		t.Fatalf("public member count = %d, want 1", n)
	}
	// Even the creator may be removed by an admin.
	NoErr(t, e.s.RemoveMember(ctx(t), e.owner.ID, pub.ID, e.member.ID))
	if n := e.memberCount(t, e.owner, pub); n != 0 {
		t.Fatalf("public member count = %d, want 0", n)
	}

	// Nobody is removed from a DM.
	dm, _, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, []string{e.member2.ID, e.guest.ID})
	NoErr(t, err)
	Code(t, e.s.RemoveMember(ctx(t), e.member.ID, dm.ID, e.guest.ID), parley.EINVALID)
}

func testListMembers(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)
	want := []string{e.member.ID}
	var ids []string
	for range 6 {
		u := e.join(t, "lister")
		ids = append(ids, u.ID)
	}
	_, err := e.s.AddMembers(ctx(t), e.member.ID, ch.ID, ids)
	NoErr(t, err)
	want = append(want, ids...)
	slices.Sort(want)

	// A non-member of a public channel may page through its members.
	var got []string
	cursor := ""
	pages := 0
	for {
		page, err := e.s.ListMembers(ctx(t), e.member2.ID, ch.ID, cursor, 3)
		NoErr(t, err)
		pages++
		if len(page.Members) > 3 {
			t.Fatalf("page of %d members, limit 3", len(page.Members))
		}
		for _, m := range page.Members {
			if m.User == nil || m.User.ID != m.UserID || m.User.Handle == "" || m.User.Email != "" || m.JoinedAt.IsZero() {
				t.Fatalf("member = %+v (user %+v)", m, m.User)
			}
			got = append(got, m.UserID)
		}
		if page.NextCursor == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = page.NextCursor
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %v in 3", got, pages, want)
	}

	// Default limit: everything in one page, no cursor.
	page, err := e.s.ListMembers(ctx(t), e.member.ID, ch.ID, "", 0)
	NoErr(t, err)
	if len(page.Members) != len(want) || page.NextCursor != "" {
		t.Fatalf("default page = %d members, cursor %q", len(page.Members), page.NextCursor)
	}
	// Exactly a page's worth: no further cursor promised past the end.
	page, err = e.s.ListMembers(ctx(t), e.member.ID, ch.ID, "", len(want))
	NoErr(t, err)
	if len(page.Members) != len(want) || page.NextCursor != "" {
		t.Fatalf("exact page = %d members, cursor %q", len(page.Members), page.NextCursor)
	}

	_, err = e.s.ListMembers(ctx(t), e.member.ID, ch.ID, "!!not-a-cursor!!", 3)
	Code(t, err, parley.EINVALID)
	for _, u := range []*parley.User{e.guest, e.outsider} {
		_, err = e.s.ListMembers(ctx(t), u.ID, ch.ID, "", 0)
		Code(t, err, parley.ENOTFOUND)
	}

	// An empty channel lists as an empty page, not null.
	NoErr(t, e.s.RemoveMember(ctx(t), e.owner.ID, ch.ID, e.member.ID))
	for _, id := range ids {
		NoErr(t, e.s.RemoveMember(ctx(t), e.owner.ID, ch.ID, id))
	}
	page, err = e.s.ListMembers(ctx(t), e.owner.ID, ch.ID, "", 0)
	NoErr(t, err)
	if page.Members == nil || len(page.Members) != 0 || page.NextCursor != "" {
		t.Fatalf("empty channel page = %+v", page)
	}
}

func testMarkRead(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)
	// Seqs: 1 created, 2 and 3 joins, 4 topic change.
	for _, u := range []*parley.User{e.member2, e.owner} {
		_, err := e.s.JoinChannel(ctx(t), u.ID, ch.ID)
		NoErr(t, err)
	}
	_, err := e.s.UpdateChannel(ctx(t), e.member2.ID, ch.ID, parley.ChannelPatch{Topic: ptr("t")})
	NoErr(t, err)
	if g := e.get(t, e.member, ch); g.LastSeq != 4 || g.LastReadSeq != 1 {
		t.Fatalf("before marking = %+v", g)
	}
	readEvents := func() []parley.Event { return e.rec.OfType(parley.EventChannelRead) }

	rs, err := e.s.MarkRead(ctx(t), e.member.ID, ch.ID, 3)
	NoErr(t, err)
	if rs.ChannelID != ch.ID || rs.LastReadSeq != 3 {
		t.Fatalf("mark read 3 = %+v", rs)
	}
	if g := e.get(t, e.member, ch); g.LastReadSeq != 3 {
		t.Fatalf("marker after mark = %d, want 3", g.LastReadSeq)
	}
	evs := readEvents()
	if len(evs) != 1 || evs[0].Seq != 0 || evs[0].ChannelID != "" || evs[0].WorkspaceID != e.ws.ID ||
		!slices.Equal(evs[0].Topics, []string{parley.TopicUser(e.member.ID)}) {
		t.Fatalf("channel.read events = %+v", evs)
	}
	if d := chData[parley.ReadEventData](t, evs[0]); d.ChannelID != ch.ID || d.LastReadSeq != 3 {
		t.Fatalf("channel.read payload = %s", evs[0].Data)
	}

	// Never backwards, and no event when nothing moved.
	for _, seq := range []int64{2, 0, 3} {
		rs, err = e.s.MarkRead(ctx(t), e.member.ID, ch.ID, seq)
		NoErr(t, err)
		if rs.LastReadSeq != 3 {
			t.Fatalf("mark read %d = %d, want 3", seq, rs.LastReadSeq)
		}
	}
	if n := len(readEvents()); n != 1 {
		t.Fatalf("%d channel.read events, want 1", n)
	}

	// Beyond the end is clamped to the channel's last seq.
	rs, err = e.s.MarkRead(ctx(t), e.member.ID, ch.ID, 1000)
	NoErr(t, err)
	if rs.LastReadSeq != 4 {
		t.Fatalf("clamped marker = %d, want 4", rs.LastReadSeq)
	}
	rs, err = e.s.MarkRead(ctx(t), e.member.ID, ch.ID, 1001)
	NoErr(t, err)
	if rs.LastReadSeq != 4 || len(readEvents()) != 2 {
		t.Fatalf("clamped again = %+v with %d events", rs, len(readEvents()))
	}
	if d := chData[parley.ReadEventData](t, readEvents()[1]); d.LastReadSeq != 4 {
		t.Fatalf("clamped channel.read payload = %s", readEvents()[1].Data)
	}
	// The read marker is personal and writes nothing to the channel log.
	if g := e.get(t, e.member2, ch); g.LastReadSeq != 2 {
		t.Fatalf("other member's marker = %d, want 2 (their join)", g.LastReadSeq)
	}
	chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined,
		parley.EventChannelUpdated)

	_, err = e.s.MarkRead(ctx(t), e.member.ID, ch.ID, -1)
	Code(t, err, parley.EINVALID)
	_, err = e.s.MarkRead(ctx(t), e.guest.ID, ch.ID, 1)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.MarkRead(ctx(t), e.outsider.ID, ch.ID, 1)
	Code(t, err, parley.ENOTFOUND)
	NoErr(t, e.s.LeaveChannel(ctx(t), e.owner.ID, ch.ID))
	_, err = e.s.MarkRead(ctx(t), e.owner.ID, ch.ID, 1)
	Code(t, err, parley.EFORBIDDEN)

	// Marking read works in archived channels and DMs too.
	_, err = e.s.ArchiveChannel(ctx(t), e.member.ID, ch.ID)
	NoErr(t, err)
	rs, err = e.s.MarkRead(ctx(t), e.member.ID, ch.ID, 1000)
	NoErr(t, err)
	if rs.LastReadSeq != 6 {
		t.Fatalf("marker in archived channel = %d, want 6", rs.LastReadSeq)
	}
	dm, _, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, []string{e.member2.ID})
	NoErr(t, err)
	rs, err = e.s.MarkRead(ctx(t), e.member2.ID, dm.ID, 1)
	NoErr(t, err)
	if rs.LastReadSeq != 1 {
		t.Fatalf("dm marker = %d, want 1", rs.LastReadSeq)
	}
}

// testMemberCountExact walks a channel through every kind of membership
// change and checks the count, the member list and the log after each.
func testMemberCountExact(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)
	extra := e.join(t, "extra")
	check := func(want int64) {
		t.Helper()
		for _, u := range []*parley.User{e.member, e.owner} {
			if n := e.memberCount(t, u, ch); n != want {
				t.Fatalf("member_count seen by %s = %d, want %d", u.Handle, n, want)
			}
		}
		page, err := e.s.ListMembers(ctx(t), e.owner.ID, ch.ID, "", parley.MaxLimit)
		NoErr(t, err)
		if int64(len(page.Members)) != want {
			t.Fatalf("%d members listed, member_count %d", len(page.Members), want)
		}
		evs := e.rec.OfChannel(ch.ID)
		last := evs[len(evs)-1]
		if last.Type == parley.EventMemberJoined || last.Type == parley.EventMemberLeft {
			if d := chData[parley.MemberEventData](t, last); d.MemberCount != want {
				t.Fatalf("%s says member_count %d, want %d", last.Type, d.MemberCount, want)
			}
		}
	}
	check(1)
	_, err := e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	check(2)
	_, err = e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	check(2)
	_, err = e.s.AddMembers(ctx(t), e.member.ID, ch.ID, []string{e.guest.ID, extra.ID, e.member2.ID})
	NoErr(t, err)
	check(4)
	NoErr(t, e.s.LeaveChannel(ctx(t), e.guest.ID, ch.ID))
	check(3)
	NoErr(t, e.s.LeaveChannel(ctx(t), e.owner.ID, ch.ID)) // not a member
	check(3)
	NoErr(t, e.s.RemoveMember(ctx(t), e.member.ID, ch.ID, extra.ID))
	check(2)
	Code(t, e.s.RemoveMember(ctx(t), e.member.ID, ch.ID, extra.ID), parley.ENOTFOUND)
	check(2)
	_, err = e.s.JoinChannel(ctx(t), e.owner.ID, ch.ID)
	NoErr(t, err)
	check(3)
	NoErr(t, e.s.RemoveMember(ctx(t), e.member2.ID, ch.ID, e.member2.ID))
	check(2)
	chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined,
		parley.EventMemberJoined, parley.EventMemberLeft, parley.EventMemberLeft, parley.EventMemberJoined,
		parley.EventMemberLeft)
}

// testConcurrentJoins races joins and leaves on one channel: the count stays
// exact and the log gap-free.
func testConcurrentJoins(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.owner, "busy", parley.KindPublic)
	const n = 12
	users := make([]*parley.User, n)
	for i := range users {
		users[i] = e.join(t, "racer")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, u := range users {
		wg.Go(func() {
			if _, err := e.s.JoinChannel(ctx(t), u.ID, ch.ID); err != nil {
				errs <- err
			}
			if _, err := e.s.JoinChannel(ctx(t), u.ID, ch.ID); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	for _, u := range users[:n/2] {
		wg.Go(func() {
			if err := e.s.LeaveChannel(ctx(t), u.ID, ch.ID); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent membership change: %v", err)
	}
	got := e.get(t, e.owner, ch)
	if got.MemberCount != 1+n/2 || got.LastSeq != 1+n+n/2 {
		t.Fatalf("after races: member_count %d last_seq %d, want %d %d", got.MemberCount, got.LastSeq, 1+n/2, 1+n+n/2)
	}
	// The published events may interleave across transactions; the log
	// itself must hold every seq once.
	evs := e.rec.OfChannel(ch.ID)
	slices.SortFunc(evs, func(a, b parley.Event) int { return int(a.Seq - b.Seq) })
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seqs after races: event %d has seq %d", i, ev.Seq)
		}
	}
	if len(evs) != 1+n+n/2 {
		t.Fatalf("%d events, want %d", len(evs), 1+n+n/2)
	}
}
