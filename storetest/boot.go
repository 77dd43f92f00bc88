package storetest

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"parley"
)

// Contract tests of boot and of the unread and mention counters the writes
// maintain for it.

func init() {
	register("Boot/Counts", testBootCounts)
	register("Boot/CountsDeleteEditLeave", testBootCountsDeleteEditLeave)
	register("Boot/Lists", testBootLists)
	register("Boot/Since", testBootSince)
	register("Boot/SinceInvalid", testBootSinceInvalid)
	register("Boot/OneChannel", testBootOneChannel)
	register("Boot/Errors", testBootErrors)
}

func mustBoot(t *testing.T, s parley.Store, u *parley.User, q parley.BootQuery) *parley.Boot {
	t.Helper()
	b, err := s.Boot(ctx(t), u.ID, q)
	if err != nil {
		t.Fatalf("boot as %s: %v", u.Handle, err)
	}
	return b
}

// bootRow finds a channel or DM in a boot (nil when absent).
func bootRow(b *parley.Boot, id string) *parley.BootChannel {
	for _, list := range [][]parley.BootChannel{b.Channels, b.DMs} {
		for i := range list {
			if list[i].ID == id {
				return &list[i]
			}
		}
	}
	return nil
}

// wantCounts checks u's unread and mention counts in ch, through boot and
// through GetChannel.
func (e *msgEnv) wantCounts(t *testing.T, u *parley.User, ch *parley.Channel, unread, mentions int64) {
	t.Helper()
	b := mustBoot(t, e.s, u, parley.BootQuery{WorkspaceID: e.ws.ID})
	r := bootRow(b, ch.ID)
	if r == nil {
		t.Fatalf("%s's boot has no channel %s", u.Handle, ch.ID)
	}
	if r.UnreadCount != unread || r.MentionCount != mentions {
		t.Fatalf("%s in %s: unread %d, mentions %d; want %d, %d", u.Handle, ch.Name, r.UnreadCount, r.MentionCount, unread, mentions)
	}
	got, err := e.s.GetChannel(ctx(t), u.ID, ch.ID)
	NoErr(t, err)
	if got.UnreadCount != unread || got.MentionCount != mentions || got.LastReadSeq != r.LastReadSeq || got.LastSeq != r.LastSeq {
		t.Fatalf("GetChannel as %s = unread %d, mentions %d, read %d/%d; boot says %+v",
			u.Handle, got.UnreadCount, got.MentionCount, got.LastReadSeq, got.LastSeq, r)
	}
}

func (e *msgEnv) post(t *testing.T, u *parley.User, ch *parley.Channel, text string) *parley.Message {
	t.Helper()
	return MustPost(t, e.s, u, ch, text)
}

func (e *msgEnv) markRead(t *testing.T, u *parley.User, ch *parley.Channel, seq int64) {
	t.Helper()
	_, err := e.s.MarkRead(ctx(t), u.ID, ch.ID, seq)
	NoErr(t, err)
}

func testBootCounts(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	ch := e.ch // alice and bob are members; carol joins
	_, err := e.s.JoinChannel(ctx(t), e.carol.ID, ch.ID)
	NoErr(t, err)
	// Joining leaves nothing unread, whatever came before.
	e.wantCounts(t, e.bob, ch, 0, 0)

	// Posts by others count; one's own do not.
	m1 := e.post(t, e.alice, ch, "one")
	e.post(t, e.alice, ch, "two")
	e.wantCounts(t, e.bob, ch, 2, 0)
	e.wantCounts(t, e.alice, ch, 0, 0)

	// An @handle mention counts for the one mentioned, a member, and not
	// for a non-member nor the author; the trailing dot is punctuation.
	toBob := e.post(t, e.carol, ch, "hey @"+e.bob.Handle+". and @"+e.owner.Handle+" and @"+e.carol.Handle)
	e.wantCounts(t, e.bob, ch, 3, 1)
	e.wantCounts(t, e.alice, ch, 1, 0)
	e.wantCounts(t, e.carol, ch, 0, 0)

	// Replies count in their thread, not the channel, mentions included.
	e.reply(t, e.alice, m1, "a reply to @"+e.bob.Handle)
	e.reply(t, e.carol, m1, "@channel in a thread")
	e.wantCounts(t, e.bob, ch, 3, 1)

	// @channel, @here and @everyone mention every member but the author,
	// once per message however often they appear.
	all := e.post(t, e.carol, ch, "@channel @here @everyone @"+e.bob.Handle+" look")
	e.wantCounts(t, e.bob, ch, 4, 2)
	e.wantCounts(t, e.alice, ch, 2, 1)
	e.wantCounts(t, e.carol, ch, 0, 0)
	e.post(t, e.alice, ch, "@here once more")
	e.wantCounts(t, e.bob, ch, 5, 3)
	e.wantCounts(t, e.carol, ch, 1, 1)

	// The read marker clears what is up to it: partly...
	e.markRead(t, e.bob, ch, m1.Seq+1) // m1 and the seq after it (two)
	e.wantCounts(t, e.bob, ch, 3, 3)
	e.markRead(t, e.bob, ch, toBob.Seq)
	e.wantCounts(t, e.bob, ch, 2, 2)
	// ...at a seq that is no message (a reply's) ...
	e.markRead(t, e.bob, ch, all.Seq-1)
	e.wantCounts(t, e.bob, ch, 2, 2)
	e.markRead(t, e.bob, ch, all.Seq)
	e.wantCounts(t, e.bob, ch, 1, 1)
	// ...and fully.
	e.markRead(t, e.bob, ch, 1<<40)
	e.wantCounts(t, e.bob, ch, 0, 0)

	// Posting marks the channel read for the poster.
	e.post(t, e.carol, ch, "for alice")
	e.post(t, e.carol, ch, "@"+e.alice.Handle)
	e.wantCounts(t, e.alice, ch, 2, 1)
	own := e.post(t, e.alice, ch, "caught up")
	e.wantCounts(t, e.alice, ch, 0, 0)
	if g, err := e.s.GetChannel(ctx(t), e.alice.ID, ch.ID); err != nil || g.LastReadSeq != own.Seq {
		t.Fatalf("alice's marker after posting = %+v, %v; want %d", g, err, own.Seq)
	}
	// A reply does not move the poster's marker.
	e.post(t, e.bob, ch, "bob speaks")
	e.reply(t, e.alice, m1, "late reply")
	e.wantCounts(t, e.alice, ch, 1, 0)

	// Counts in a DM: every message of the other side is unread.
	dm, _, err := e.s.OpenDM(ctx(t), e.alice.ID, e.ws.ID, []string{e.bob.ID})
	NoErr(t, err)
	e.post(t, e.alice, dm, "psst")
	e.post(t, e.alice, dm, "@"+e.bob.Handle+" psst")
	e.wantCounts(t, e.bob, dm, 2, 1)
	e.wantCounts(t, e.alice, dm, 0, 0)

	// A newcomer starts with nothing unread.
	dave := MustUser(t, e.s, "dave")
	MustJoinWorkspace(t, e.s, e.ws, e.owner, dave)
	_, err = e.s.JoinChannel(ctx(t), dave.ID, ch.ID)
	NoErr(t, err)
	e.wantCounts(t, dave, ch, 0, 0)
	e.post(t, e.carol, ch, "@channel welcome")
	e.wantCounts(t, dave, ch, 1, 1)
}

func testBootCountsDeleteEditLeave(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	ch := e.ch
	read := e.post(t, e.alice, ch, "old news @"+e.bob.Handle)
	e.markRead(t, e.bob, ch, read.Seq)
	a := e.post(t, e.alice, ch, "a")
	b := e.post(t, e.alice, ch, "b @"+e.bob.Handle)
	e.post(t, e.alice, ch, "c")
	e.wantCounts(t, e.bob, ch, 3, 1)

	// Deleting an unread message takes it out of both counts; deleting a
	// read one changes nothing.
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, b.ID))
	e.wantCounts(t, e.bob, ch, 2, 0)
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, read.ID))
	e.wantCounts(t, e.bob, ch, 2, 0)

	// An edit that adds a mention counts it; one that removes it uncounts.
	_, err := e.s.EditMessage(ctx(t), e.alice.ID, a.ID, "a, @"+e.bob.Handle)
	NoErr(t, err)
	e.wantCounts(t, e.bob, ch, 2, 1)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, a.ID, "a, @"+e.bob.Handle+" again")
	NoErr(t, err)
	e.wantCounts(t, e.bob, ch, 2, 1)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, a.ID, "a")
	NoErr(t, err)
	e.wantCounts(t, e.bob, ch, 2, 0)

	// Deleted messages stay out once read past, and after more posts.
	e.post(t, e.alice, ch, "@"+e.bob.Handle+" d")
	e.wantCounts(t, e.bob, ch, 3, 1)
	e.markRead(t, e.bob, ch, b.Seq)
	e.wantCounts(t, e.bob, ch, 2, 1)

	// Leaving drops the channel from boot; coming back finds nothing
	// unread, however much was mentioned meanwhile.
	NoErr(t, e.s.LeaveChannel(ctx(t), e.bob.ID, ch.ID))
	if r := bootRow(mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID}), ch.ID); r != nil {
		t.Fatalf("boot after leaving still has %+v", r)
	}
	e.post(t, e.alice, ch, "@channel while bob is away")
	_, err = e.s.JoinChannel(ctx(t), e.bob.ID, ch.ID)
	NoErr(t, err)
	e.wantCounts(t, e.bob, ch, 0, 0)
	e.post(t, e.alice, ch, "welcome back @"+e.bob.Handle)
	e.wantCounts(t, e.bob, ch, 1, 1)
}

func testBootLists(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	priv := e.channel(t, "zz-private", parley.KindPrivate, e.bob)
	e.channel(t, "aa-secret", parley.KindPrivate) // owner's only
	e.channel(t, "mm-unjoined", parley.KindPublic)
	_, err := e.s.ArchiveChannel(ctx(t), e.owner.ID, e.channel(t, "archived", parley.KindPublic, e.bob).ID)
	NoErr(t, err)
	dm1, _, err := e.s.OpenDM(ctx(t), e.bob.ID, e.ws.ID, []string{e.alice.ID})
	NoErr(t, err)
	group, _, err := e.s.OpenDM(ctx(t), e.carol.ID, e.ws.ID, []string{e.alice.ID, e.bob.ID})
	NoErr(t, err)
	e.post(t, e.alice, dm1, "later") // dm1 is now the most recent

	b := mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID})
	if b.Self == nil || b.Self.ID != e.bob.ID || b.Self.Email == "" {
		t.Fatalf("self = %+v, want bob with his email", b.Self)
	}
	if b.Workspace == nil || b.Workspace.ID != e.ws.ID || b.Workspace.Role != parley.RoleMember {
		t.Fatalf("workspace = %+v", b.Workspace)
	}
	var names []string
	for _, c := range b.Channels {
		names = append(names, c.Name)
		if c.Kind.IsDM() || c.MemberCount == 0 || c.LastSeq == 0 || c.LastReadSeq == 0 || c.UpdatedAt.IsZero() {
			t.Errorf("channel row %+v", c)
		}
		if (c.Name == "archived") != (c.ArchivedAt != nil) {
			t.Errorf("archived_at of %s = %v", c.Name, c.ArchivedAt)
		}
	}
	if want := []string{"archived", "general", e.ch.Name, priv.Name}; !slices.Equal(names, want) {
		t.Fatalf("channels = %v, want %v (by name, the caller's only)", names, want)
	}
	if len(b.DMs) != 2 || b.DMs[0].ID != dm1.ID || b.DMs[1].ID != group.ID {
		t.Fatalf("dms = %+v, want %s then %s (most recent first)", b.DMs, dm1.ID, group.ID)
	}
	if !slices.Equal(b.DMs[1].DMUserIDs, group.DMUserIDs) || b.DMs[1].Kind != parley.KindGroupDM || b.DMs[1].MemberCount != 3 {
		t.Fatalf("group dm row = %+v", b.DMs[1])
	}
	if b.Version == "" || b.ChannelIDs != nil || b.Channel != nil || b.Messages != nil || b.Users != nil || b.UserIDs != nil {
		t.Fatalf("full boot has version %q, channel_ids %v, channel %v, messages %v, users %v",
			b.Version, b.ChannelIDs, b.Channel, b.Messages, b.Users)
	}
	// Never a user list: the JSON has no users key at all.
	raw, err := json.Marshal(b)
	NoErr(t, err)
	if strings.Contains(string(raw), `"users"`) || !strings.Contains(string(raw), `"prefs":{}`) {
		t.Fatalf("boot JSON %s", raw)
	}

	// A user in no channel gets empty lists, not null.
	loner := MustUser(t, e.s, "loner")
	MustJoinWorkspace(t, e.s, e.ws, e.owner, loner)
	gen := bootRow(mustBoot(t, e.s, loner, parley.BootQuery{WorkspaceID: e.ws.ID}), b.Channels[1].ID)
	NoErr(t, e.s.LeaveChannel(ctx(t), loner.ID, gen.ID))
	lb := mustBoot(t, e.s, loner, parley.BootQuery{WorkspaceID: e.ws.ID})
	if lb.Channels == nil || lb.DMs == nil || len(lb.Channels)+len(lb.DMs) != 0 {
		t.Fatalf("loner's boot = %+v", lb)
	}
}

func testBootSince(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	ws := parley.BootQuery{WorkspaceID: e.ws.ID}
	posted := e.channel(t, "posted", parley.KindPublic, e.bob, e.alice)
	read := e.channel(t, "read", parley.KindPublic, e.bob)
	topic := e.channel(t, "topic", parley.KindPublic, e.bob)
	left := e.channel(t, "left", parley.KindPublic, e.bob)
	quiet := e.channel(t, "quiet", parley.KindPublic, e.bob)
	joined := e.channel(t, "joined", parley.KindPublic)
	dm, _, err := e.s.OpenDM(ctx(t), e.alice.ID, e.ws.ID, []string{e.bob.ID})
	NoErr(t, err)
	quietDM, _, err := e.s.OpenDM(ctx(t), e.carol.ID, e.ws.ID, []string{e.bob.ID})
	NoErr(t, err)
	unread := e.post(t, e.owner, read, "unread")
	e.post(t, e.owner, quiet, "seen")
	e.markRead(t, e.bob, quiet, 1<<40)

	v1 := mustBoot(t, e.s, e.bob, ws)
	if again := mustBoot(t, e.s, e.bob, ws); again.Version != v1.Version {
		t.Fatalf("version changed with nothing changed: %q then %q", v1.Version, again.Version)
	}
	// Nothing changed: nothing returned, every id listed.
	same := mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID, Since: v1.Version})
	if len(same.Channels)+len(same.DMs) != 0 || same.Version != v1.Version || len(same.ChannelIDs) != len(v1.Channels)+len(v1.DMs) {
		t.Fatalf("since with no change = %+v", same)
	}

	e.post(t, e.alice, posted, "new")
	e.markRead(t, e.bob, read, unread.Seq)
	_, err = e.s.UpdateChannel(ctx(t), e.owner.ID, topic.ID, parley.ChannelPatch{Topic: ptr("new topic")})
	NoErr(t, err)
	NoErr(t, e.s.LeaveChannel(ctx(t), e.bob.ID, left.ID))
	_, err = e.s.JoinChannel(ctx(t), e.bob.ID, joined.ID)
	NoErr(t, err)
	e.post(t, e.alice, dm, "hi bob")
	// Someone else's read marker is not bob's change.
	e.markRead(t, e.alice, posted, 1<<40)

	v2 := mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID, Since: v1.Version})
	var got []string
	for _, c := range append(slices.Clone(v2.Channels), v2.DMs...) {
		got = append(got, c.ID)
	}
	slices.Sort(got)
	want := []string{posted.ID, read.ID, topic.ID, joined.ID, dm.ID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("since v1 returned %v, want %v (posted, read, topic, joined, dm)", got, want)
	}
	if r := bootRow(v2, posted.ID); r.UnreadCount != 1 {
		t.Fatalf("changed row %+v, want its fresh counts", r)
	}
	if r := bootRow(v2, topic.ID); r.Topic != "new topic" {
		t.Fatalf("changed row %+v, want its fresh topic", r)
	}
	full := mustBoot(t, e.s, e.bob, ws)
	var ids []string
	for _, c := range append(slices.Clone(full.Channels), full.DMs...) {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(v2.ChannelIDs, ids) || slices.Contains(ids, left.ID) || !slices.Contains(ids, quiet.ID) || !slices.Contains(ids, quietDM.ID) {
		t.Fatalf("channel_ids = %v, want every channel bob is in now: %v", v2.ChannelIDs, ids)
	}
	if v2.Version != full.Version || v2.Version == v1.Version {
		t.Fatalf("since-boot version %q, full boot %q, old %q", v2.Version, full.Version, v1.Version)
	}
	// From the new version, nothing again.
	v3 := mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID, Since: v2.Version})
	if len(v3.Channels)+len(v3.DMs) != 0 || len(v3.ChannelIDs) != len(ids) {
		t.Fatalf("since v2 = %+v", v3)
	}
	// Since-boots of a user with no channels list none, as an empty list.
	loner := MustUser(t, e.s, "loner")
	MustJoinWorkspace(t, e.s, e.ws, e.owner, loner)
	var general string
	for _, c := range full.Channels {
		if c.Name == "general" {
			general = c.ID
		}
	}
	NoErr(t, e.s.LeaveChannel(ctx(t), loner.ID, general))
	lv := mustBoot(t, e.s, loner, parley.BootQuery{WorkspaceID: e.ws.ID})
	lb := mustBoot(t, e.s, loner, parley.BootQuery{WorkspaceID: e.ws.ID, Since: lv.Version})
	if lb.ChannelIDs == nil || len(lb.ChannelIDs) != 0 {
		t.Fatalf("loner's channel_ids = %#v, want []", lb.ChannelIDs)
	}
}

func testBootSinceInvalid(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	v := mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID}).Version
	raw, err := base64.RawURLEncoding.DecodeString(v)
	NoErr(t, err)
	for _, bad := range []string{
		"not a version!",
		base64.RawURLEncoding.EncodeToString([]byte("x")),
		base64.RawURLEncoding.EncodeToString(append([]byte{99}, raw[1:]...)),      // unknown format
		base64.RawURLEncoding.EncodeToString(append(slices.Clone(raw), 1)),        // truncated entry
		mustBoot(t, e.s, e.alice, parley.BootQuery{WorkspaceID: e.ws.ID}).Version, // another user's
	} {
		_, err := e.s.Boot(ctx(t), e.bob.ID, parley.BootQuery{WorkspaceID: e.ws.ID, Since: bad})
		Code(t, err, parley.EINVALID)
	}
	_, err = e.s.Boot(ctx(t), e.bob.ID, parley.BootQuery{WorkspaceID: e.ws.ID, Since: v, ChannelID: e.ch.ID})
	Code(t, err, parley.EINVALID)
}

func testBootOneChannel(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	ch := e.ch
	dave := MustUser(t, e.s, "dave") // in the workspace, not the channel
	MustJoinWorkspace(t, e.s, e.ws, e.owner, dave)
	e.post(t, e.owner, ch, "too old to be on the page")
	e.post(t, e.alice, ch, "hi @"+dave.Handle+" and @"+e.outsider.Handle+" and @nobody-at-all and @channel")
	root := e.post(t, e.alice, ch, "@"+e.alice.Handle+" talks to herself")
	e.reply(t, e.owner, root, "replies are not on the page")
	gone := e.post(t, e.bob, ch, "deleted @"+e.carol.Handle)
	NoErr(t, e.s.DeleteMessage(ctx(t), e.bob.ID, gone.ID))
	last := e.post(t, e.bob, ch, "latest")

	b := mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID, ChannelID: ch.ID, Limit: 3})
	if b.Channel == nil || b.Channel.ID != ch.ID || !b.Channel.IsMember || len(b.Channels) != 1 || b.Channels[0].ID != ch.ID ||
		len(b.DMs) != 0 || b.Version != "" || b.ChannelIDs != nil {
		t.Fatalf("one-channel boot = %+v", b)
	}
	if b.Self.ID != e.bob.ID || b.Workspace.ID != e.ws.ID {
		t.Fatalf("self %+v, workspace %+v", b.Self, b.Workspace)
	}
	var texts []string
	for _, m := range b.Messages {
		texts = append(texts, m.Text)
	}
	if len(b.Messages) != 3 || b.Messages[2].ID != last.ID || b.Messages[1].ID != root.ID {
		t.Fatalf("messages = %q, want the latest 3 live top-level ones, ascending", texts)
	}
	// Exactly the users referenced: authors, then mentioned workspace
	// members; not the outsider, nobody, nor the author of a deleted post's
	// mention.
	if want := []string{e.alice.ID, e.bob.ID, dave.ID}; !slices.Equal(b.UserIDs, want) {
		t.Fatalf("user ids = %v, want %v (alice, bob, dave)", b.UserIDs, want)
	}
	users, err := e.s.WorkspaceUsers(ctx(t), e.ws.ID, append(slices.Clone(b.UserIDs), e.outsider.ID, "Unobody", dave.ID))
	NoErr(t, err)
	if len(users) != 3 || users[0].ID != e.alice.ID || users[2].ID != dave.ID || users[0].Email != "" {
		t.Fatalf("workspace users = %+v", users)
	}

	// A public channel one has not joined may be opened first too.
	open1 := e.channel(t, "open", parley.KindPublic)
	ob := mustBoot(t, e.s, e.carol, parley.BootQuery{WorkspaceID: e.ws.ID, ChannelID: open1.ID})
	if ob.Channel.IsMember || ob.Messages == nil || len(ob.Messages) != 0 || ob.UserIDs == nil || len(ob.UserIDs) != 0 {
		t.Fatalf("unjoined public channel boot = %+v", ob)
	}
	// A DM comes under channels.
	dm, _, err := e.s.OpenDM(ctx(t), e.alice.ID, e.ws.ID, []string{e.bob.ID})
	NoErr(t, err)
	e.post(t, e.alice, dm, "psst")
	db := mustBoot(t, e.s, e.bob, parley.BootQuery{WorkspaceID: e.ws.ID, ChannelID: dm.ID})
	if len(db.Channels) != 1 || db.Channels[0].UnreadCount != 1 || len(db.Channels[0].DMUserIDs) != 2 || len(db.DMs) != 0 {
		t.Fatalf("dm boot = %+v", db)
	}

	// Private channels one is not in, DMs of others, channels of another
	// workspace and unknown ids are all not found.
	secret := e.channel(t, "secret", parley.KindPrivate)
	other, _, err := e.s.OpenDM(ctx(t), e.alice.ID, e.ws.ID, []string{e.carol.ID})
	NoErr(t, err)
	otherWS := MustWorkspace(t, e.s, e.bob)
	elsewhere := MustChannel(t, e.s, otherWS, e.bob, "elsewhere", parley.KindPublic)
	for _, id := range []string{secret.ID, other.ID, "Cnope"} {
		_, err := e.s.Boot(ctx(t), e.bob.ID, parley.BootQuery{WorkspaceID: e.ws.ID, ChannelID: id})
		Code(t, err, parley.ENOTFOUND)
	}
	_, err = e.s.Boot(ctx(t), e.bob.ID, parley.BootQuery{WorkspaceID: e.ws.ID, ChannelID: elsewhere.ID})
	Code(t, err, parley.ENOTFOUND)
}

func testBootErrors(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	_, err := e.s.Boot(ctx(t), e.bob.ID, parley.BootQuery{})
	Code(t, err, parley.EINVALID)
	for _, q := range []parley.BootQuery{{WorkspaceID: "Wnope"}, {WorkspaceID: e.ws.ID, ChannelID: e.ch.ID}} {
		_, err := e.s.Boot(ctx(t), e.outsider.ID, q)
		Code(t, err, parley.ENOTFOUND)
	}
}

func init() {
	register("Boot/CountsConcurrent", testBootCountsConcurrent)
}

// testBootCountsConcurrent: counts stay exact under concurrent posts
// (group commit on SQLite, lanes and retries on PostgreSQL).
func testBootCountsConcurrent(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	writers := []*parley.User{e.alice, e.owner, e.carol}
	_, err := e.s.JoinChannel(ctx(t), e.carol.ID, e.ch.ID)
	NoErr(t, err)
	const each = 20
	var wg sync.WaitGroup
	errs := make(chan error, len(writers)*each)
	for _, u := range writers {
		wg.Go(func() {
			for i := range each {
				text := "plain"
				if i%5 == 0 {
					text = "@" + e.bob.Handle + " ping"
				}
				if _, _, err := e.s.PostMessage(ctx(t), u.ID, e.ch.ID, parley.NewMessage{Text: text}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("post: %v", err)
	}
	e.wantCounts(t, e.bob, e.ch, len64(writers)*each, len64(writers)*each/5)
}

func len64[T any](s []T) int64 { return int64(len(s)) }
