package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"parley"
)

// Contract tests of channels: creation, DMs, visibility, updates and
// archiving. Membership and read markers are in members.go.

// chanEnv is a workspace with one user of each role, plus a user of another
// workspace.
type chanEnv struct {
	s        parley.Store
	rec      *Recorder
	ws       *parley.Workspace
	owner    *parley.User // the workspace's owner (an admin)
	member   *parley.User
	member2  *parley.User
	guest    *parley.User
	outsider *parley.User // owner of another workspace, not in ws
	otherWS  *parley.Workspace
}

func newChanEnv(t *testing.T, open Opener) *chanEnv {
	t.Helper()
	rec := &Recorder{}
	s := open(t, rec)
	e := &chanEnv{s: s, rec: rec}
	e.owner = MustUser(t, s, "owner")
	e.ws = MustWorkspace(t, s, e.owner)
	e.member = e.join(t, "member")
	e.member2 = e.join(t, "member")
	e.guest = e.join(t, "guest")
	NoErr(t, s.SetMemberRole(ctx(t), e.owner.ID, e.ws.ID, e.guest.ID, parley.RoleGuest))
	e.outsider = MustUser(t, s, "outsider")
	e.otherWS = MustWorkspace(t, s, e.outsider)
	return e
}

// join makes a new user and adds them to the workspace as a member.
func (e *chanEnv) join(t *testing.T, name string) *parley.User {
	t.Helper()
	u := MustUser(t, e.s, name)
	MustJoinWorkspace(t, e.s, e.ws, e.owner, u)
	return u
}

func (e *chanEnv) get(t *testing.T, u *parley.User, ch *parley.Channel) *parley.Channel {
	t.Helper()
	got, err := e.s.GetChannel(ctx(t), u.ID, ch.ID)
	if err != nil {
		t.Fatalf("get channel %s as %s: %v", ch.ID, u.Handle, err)
	}
	return got
}

// chLog asserts that the published events of channel id are exactly the
// given types with seqs 1..n, and that every payload carries channel_id and
// its own seq. It returns the events.
func chLog(t *testing.T, rec *Recorder, id string, types ...string) []parley.Event {
	t.Helper()
	evs := rec.OfChannel(id)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = ev.Type
	}
	if !slices.Equal(got, types) {
		t.Fatalf("channel %s log = %v, want %v", id, got, types)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d (%s) seq = %d, want %d", i, ev.Type, ev.Seq, i+1)
		}
		var d struct {
			ChannelID string `json:"channel_id"`
			Seq       int64  `json:"seq"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("decode %s payload: %v", ev.Type, err)
		}
		if d.ChannelID != id || d.Seq != ev.Seq {
			t.Fatalf("%s payload has channel_id %q seq %d, want %q %d", ev.Type, d.ChannelID, d.Seq, id, ev.Seq)
		}
		if !slices.Contains(ev.Topics, parley.TopicChannel(id)) {
			t.Fatalf("%s topics %v lack the channel topic", ev.Type, ev.Topics)
		}
	}
	return evs
}

// chData decodes an event payload.
func chData[T any](t *testing.T, ev parley.Event) T {
	t.Helper()
	var d T
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatalf("decode %s payload: %v", ev.Type, err)
	}
	return d
}

func chTopics(t *testing.T, ev parley.Event, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(ev.Topics, w) {
			t.Fatalf("%s topics %v lack %s", ev.Type, ev.Topics, w)
		}
	}
}

func chNoTopic(t *testing.T, ev parley.Event, topic string) {
	t.Helper()
	if slices.Contains(ev.Topics, topic) {
		t.Fatalf("%s topics %v include %s", ev.Type, ev.Topics, topic)
	}
}

// chTopicsExactly checks that ev goes to the topics want and no others.
func chTopicsExactly(t *testing.T, ev parley.Event, want ...string) {
	t.Helper()
	got := slices.Sorted(slices.Values(ev.Topics))
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(slices.Compact(got), want) || len(got) != len(want) {
		t.Fatalf("%s topics %v, want exactly %v", ev.Type, ev.Topics, want)
	}
}

func ptr[T any](v T) *T { return &v }

func init() {
	register("Channels/Create", testCreateChannel)
	register("Channels/CreateRules", testCreateChannelRules)
	register("Channels/Visibility", testChannelVisibility)
	register("Channels/Update", testUpdateChannel)
	register("Channels/UpdateRules", testUpdateChannelRules)
	register("Channels/Archive", testArchiveChannel)
	register("Channels/OpenDM", testOpenDM)
	register("Channels/GroupDM", testGroupDM)
	register("Channels/OpenDMRules", testOpenDMRules)
	register("Channels/OpenDMConcurrent", testOpenDMConcurrent)
}

func testCreateChannel(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch, err := e.s.CreateChannel(ctx(t), e.member.ID, e.ws.ID, parley.NewChannel{
		Name: "eng", Kind: parley.KindPublic, Topic: "builds", Purpose: "making things"})
	NoErr(t, err)
	if ch.ID == "" || ch.WorkspaceID != e.ws.ID || ch.Name != "eng" || ch.Kind != parley.KindPublic ||
		ch.Topic != "builds" || ch.Purpose != "making things" || ch.CreatedBy != e.member.ID {
		t.Fatalf("created channel = %+v", ch)
	}
	if !ch.IsMember || ch.MemberCount != 1 || ch.LastSeq != 1 || ch.LastReadSeq != 1 || ch.ArchivedAt != nil {
		t.Fatalf("created channel state = %+v", ch)
	}
	got := e.get(t, e.member, ch)
	if got.Name != "eng" || !got.IsMember || got.MemberCount != 1 || got.LastSeq != 1 || got.LastReadSeq != 1 ||
		!got.CreatedAt.Equal(ch.CreatedAt) {
		t.Fatalf("get = %+v, want %+v", got, ch)
	}
	evs := chLog(t, e.rec, ch.ID, parley.EventChannelCreated)
	d := chData[parley.ChannelEventData](t, evs[0])
	if d.Channel == nil || d.Channel.Name != "eng" || d.Channel.LastSeq != 1 || d.UserID != e.member.ID || d.Channel.IsMember {
		t.Fatalf("channel.created payload = %s", evs[0].Data)
	}
	// A public channel is announced to its creator and the servers'
	// directory only: nobody else's sessions hear of it.
	chTopicsExactly(t, evs[0], parley.TopicChannel(ch.ID), parley.TopicUser(e.member.ID), parley.TopicDirectory(e.ws.ID))

	// Private channels are announced to their members.
	priv, err := e.s.CreateChannel(ctx(t), e.owner.ID, e.ws.ID, parley.NewChannel{Name: "secret", Kind: parley.KindPrivate})
	NoErr(t, err)
	if priv.Kind != parley.KindPrivate || !priv.IsMember || priv.MemberCount != 1 {
		t.Fatalf("private channel = %+v", priv)
	}
	evs = chLog(t, e.rec, priv.ID, parley.EventChannelCreated)
	// Private: the members' user topics and the servers' directory.
	chTopicsExactly(t, evs[0], parley.TopicChannel(priv.ID), parley.TopicUser(e.owner.ID), parley.TopicDirectory(e.ws.ID))

	// Maximum lengths are accepted.
	long := strings.Repeat("x", parley.MaxNameLen)
	_, err = e.s.CreateChannel(ctx(t), e.owner.ID, e.ws.ID, parley.NewChannel{Name: long, Kind: parley.KindPublic,
		Topic: strings.Repeat("é", parley.MaxTopicLen), Purpose: strings.Repeat("p", parley.MaxPurposeLen)})
	NoErr(t, err)
}

func testCreateChannelRules(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	create := func(u *parley.User, wsID string, nc parley.NewChannel) error {
		_, err := e.s.CreateChannel(ctx(t), u.ID, wsID, nc)
		return err
	}
	ok := parley.NewChannel{Name: "ok", Kind: parley.KindPublic}
	Code(t, create(e.guest, e.ws.ID, ok), parley.EFORBIDDEN)
	Code(t, create(e.outsider, e.ws.ID, ok), parley.ENOTFOUND)
	Code(t, create(e.owner, e.otherWS.ID, ok), parley.ENOTFOUND)
	Code(t, create(e.owner, "Wnope", ok), parley.ENOTFOUND)

	for _, kind := range []parley.ChannelKind{parley.KindDM, parley.KindGroupDM, "", "secret"} {
		Code(t, create(e.owner, e.ws.ID, parley.NewChannel{Name: "k", Kind: kind}), parley.EINVALID)
	}
	for _, name := range []string{"", "Eng", "has space", "-dash", strings.Repeat("x", parley.MaxNameLen+1), "#eng"} {
		Code(t, create(e.owner, e.ws.ID, parley.NewChannel{Name: name, Kind: parley.KindPublic}), parley.EINVALID)
	}
	Code(t, create(e.owner, e.ws.ID, parley.NewChannel{Name: "t", Kind: parley.KindPublic,
		Topic: strings.Repeat("x", parley.MaxTopicLen+1)}), parley.EINVALID)
	Code(t, create(e.owner, e.ws.ID, parley.NewChannel{Name: "p", Kind: parley.KindPrivate,
		Purpose: strings.Repeat("x", parley.MaxPurposeLen+1)}), parley.EINVALID)

	// Names are unique per workspace across kinds and archiving.
	Code(t, create(e.member, e.ws.ID, parley.NewChannel{Name: "general", Kind: parley.KindPublic}), parley.ECONFLICT)
	NoErr(t, create(e.member, e.ws.ID, parley.NewChannel{Name: "dup", Kind: parley.KindPublic}))
	Code(t, create(e.owner, e.ws.ID, parley.NewChannel{Name: "dup", Kind: parley.KindPrivate}), parley.ECONFLICT)
	old := MustChannel(t, e.s, e.ws, e.owner, "old", parley.KindPublic)
	_, err := e.s.ArchiveChannel(ctx(t), e.owner.ID, old.ID)
	NoErr(t, err)
	Code(t, create(e.owner, e.ws.ID, parley.NewChannel{Name: "old", Kind: parley.KindPublic}), parley.ECONFLICT)
	// …but another workspace may use them.
	NoErr(t, create(e.outsider, e.otherWS.ID, parley.NewChannel{Name: "dup", Kind: parley.KindPublic}))

	// Failed creations leave no trace in any log.
	for _, ev := range e.rec.OfType(parley.EventChannelCreated) {
		d := chData[parley.ChannelEventData](t, ev)
		if n := d.Channel.Name; n != "general" && n != "dup" && n != "old" {
			t.Fatalf("unexpected channel.created for %q", n)
		}
	}
}

func testChannelVisibility(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	pub := MustChannel(t, e.s, e.ws, e.member, "pub", parley.KindPublic)
	priv := MustChannel(t, e.s, e.ws, e.member, "priv", parley.KindPrivate)

	// Public: any workspace member but a guest sees it without joining.
	got := e.get(t, e.member2, pub)
	if got.IsMember || got.LastReadSeq != 0 || got.MemberCount != 1 || got.LastSeq != 1 {
		t.Fatalf("public channel seen by non-member = %+v", got)
	}
	e.get(t, e.owner, pub)
	for _, u := range []*parley.User{e.guest, e.outsider} {
		_, err := e.s.GetChannel(ctx(t), u.ID, pub.ID)
		Code(t, err, parley.ENOTFOUND)
	}
	_, err := e.s.GetChannel(ctx(t), e.owner.ID, "Cnope")
	Code(t, err, parley.ENOTFOUND)

	// Private: only members, whatever their workspace role.
	e.get(t, e.member, priv)
	for _, u := range []*parley.User{e.owner, e.member2, e.guest, e.outsider} {
		_, err := e.s.GetChannel(ctx(t), u.ID, priv.ID)
		Code(t, err, parley.ENOTFOUND)
		_, err = e.s.ListMembers(ctx(t), u.ID, priv.ID, "", 0)
		Code(t, err, parley.ENOTFOUND)
		_, err = e.s.JoinChannel(ctx(t), u.ID, priv.ID)
		Code(t, err, parley.ENOTFOUND)
		Code(t, e.s.LeaveChannel(ctx(t), u.ID, priv.ID), parley.ENOTFOUND)
		_, err = e.s.UpdateChannel(ctx(t), u.ID, priv.ID, parley.ChannelPatch{Topic: ptr("x")})
		Code(t, err, parley.ENOTFOUND)
		_, err = e.s.ArchiveChannel(ctx(t), u.ID, priv.ID)
		Code(t, err, parley.ENOTFOUND)
		_, err = e.s.AddMembers(ctx(t), u.ID, priv.ID, []string{u.ID})
		Code(t, err, parley.ENOTFOUND)
		Code(t, e.s.RemoveMember(ctx(t), u.ID, priv.ID, e.member.ID), parley.ENOTFOUND)
		_, err = e.s.MarkRead(ctx(t), u.ID, priv.ID, 1)
		Code(t, err, parley.ENOTFOUND)
	}
	// A guest added to a private channel sees it, and nothing else.
	_, err = e.s.AddMembers(ctx(t), e.member.ID, priv.ID, []string{e.guest.ID})
	NoErr(t, err)
	if got := e.get(t, e.guest, priv); !got.IsMember || got.MemberCount != 2 {
		t.Fatalf("private channel seen by added guest = %+v", got)
	}
	_, err = e.s.GetChannel(ctx(t), e.guest.ID, pub.ID)
	Code(t, err, parley.ENOTFOUND)
	chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventMemberJoined)
	chLog(t, e.rec, pub.ID, parley.EventChannelCreated)
}

func testUpdateChannel(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)

	// The creator renames.
	got, err := e.s.UpdateChannel(ctx(t), e.member.ID, ch.ID, parley.ChannelPatch{Name: ptr("engineering"), Topic: ptr("ship it")})
	NoErr(t, err)
	if got.Name != "engineering" || got.Topic != "ship it" || got.Purpose != "" || got.LastSeq != 2 ||
		!got.IsMember || got.LastReadSeq != 1 || got.MemberCount != 1 {
		t.Fatalf("updated channel = %+v", got)
	}
	if g := e.get(t, e.member, ch); g.Name != "engineering" || g.Topic != "ship it" || g.LastSeq != 2 {
		t.Fatalf("get after update = %+v", g)
	}
	evs := chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventChannelUpdated)
	d := chData[parley.ChannelEventData](t, evs[1])
	if d.Channel == nil || d.Channel.Name != "engineering" || d.Channel.Topic != "ship it" || d.Channel.LastSeq != 2 ||
		d.Channel.IsMember || d.Channel.LastReadSeq != 0 || d.UserID != e.member.ID {
		t.Fatalf("channel.updated payload = %s", evs[1].Data)
	}
	// A public channel's members follow its topic; the caches read the
	// directory; no one else gets it.
	chTopicsExactly(t, evs[1], parley.TopicChannel(ch.ID), parley.TopicDirectory(e.ws.ID))

	// Any member may set the topic and purpose; an admin may rename.
	_, err = e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	got, err = e.s.UpdateChannel(ctx(t), e.member2.ID, ch.ID, parley.ChannelPatch{Purpose: ptr("why we exist")})
	NoErr(t, err)
	if got.Purpose != "why we exist" || got.Name != "engineering" || got.LastSeq != 4 {
		t.Fatalf("purpose update = %+v", got)
	}
	_, err = e.s.JoinChannel(ctx(t), e.owner.ID, ch.ID)
	NoErr(t, err)
	got, err = e.s.UpdateChannel(ctx(t), e.owner.ID, ch.ID, parley.ChannelPatch{Name: ptr("eng2")})
	NoErr(t, err)
	if got.Name != "eng2" {
		t.Fatalf("admin rename = %+v", got)
	}

	// Nothing changed: no event.
	for _, p := range []parley.ChannelPatch{{}, {Name: ptr("eng2"), Topic: ptr("ship it"), Purpose: ptr("why we exist")}} {
		got, err = e.s.UpdateChannel(ctx(t), e.member2.ID, ch.ID, p)
		NoErr(t, err)
		if got.Name != "eng2" || got.LastSeq != 6 {
			t.Fatalf("no-op update = %+v", got)
		}
	}
	chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventChannelUpdated, parley.EventMemberJoined,
		parley.EventChannelUpdated, parley.EventMemberJoined, parley.EventChannelUpdated)

	// Clearing the topic is a change.
	got, err = e.s.UpdateChannel(ctx(t), e.member.ID, ch.ID, parley.ChannelPatch{Topic: ptr("")})
	NoErr(t, err)
	if got.Topic != "" || got.LastSeq != 7 {
		t.Fatalf("cleared topic = %+v", got)
	}

	// Private channels announce changes to each member's user topic.
	priv := MustChannel(t, e.s, e.ws, e.member, "priv", parley.KindPrivate)
	_, err = e.s.AddMembers(ctx(t), e.member.ID, priv.ID, []string{e.guest.ID})
	NoErr(t, err)
	_, err = e.s.UpdateChannel(ctx(t), e.guest.ID, priv.ID, parley.ChannelPatch{Topic: ptr("hush")})
	NoErr(t, err)
	evs = chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventChannelUpdated)
	chTopicsExactly(t, evs[2], parley.TopicChannel(priv.ID), parley.TopicUser(e.member.ID), parley.TopicUser(e.guest.ID), parley.TopicDirectory(e.ws.ID))
}

func testUpdateChannelRules(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)
	MustChannel(t, e.s, e.ws, e.owner, "taken", parley.KindPrivate)
	update := func(u *parley.User, p parley.ChannelPatch) error {
		_, err := e.s.UpdateChannel(ctx(t), u.ID, ch.ID, p)
		return err
	}
	// Visible but not joined, or not visible at all.
	Code(t, update(e.member2, parley.ChannelPatch{Topic: ptr("x")}), parley.EFORBIDDEN)
	Code(t, update(e.owner, parley.ChannelPatch{Topic: ptr("x")}), parley.EFORBIDDEN)
	Code(t, update(e.guest, parley.ChannelPatch{Topic: ptr("x")}), parley.ENOTFOUND)
	Code(t, update(e.outsider, parley.ChannelPatch{Topic: ptr("x")}), parley.ENOTFOUND)

	// A plain member may not rename a channel they did not create.
	_, err := e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	Code(t, update(e.member2, parley.ChannelPatch{Name: ptr("mine")}), parley.EFORBIDDEN)
	_, err = e.s.AddMembers(ctx(t), e.member.ID, ch.ID, []string{e.guest.ID})
	NoErr(t, err)
	Code(t, update(e.guest, parley.ChannelPatch{Name: ptr("mine")}), parley.EFORBIDDEN)

	Code(t, update(e.member, parley.ChannelPatch{Name: ptr("Bad Name")}), parley.EINVALID)
	Code(t, update(e.member, parley.ChannelPatch{Name: ptr("")}), parley.EINVALID)
	Code(t, update(e.member, parley.ChannelPatch{Topic: ptr(strings.Repeat("x", parley.MaxTopicLen+1))}), parley.EINVALID)
	Code(t, update(e.member, parley.ChannelPatch{Purpose: ptr(strings.Repeat("x", parley.MaxPurposeLen+1))}), parley.EINVALID)
	Code(t, update(e.member, parley.ChannelPatch{Name: ptr("taken")}), parley.ECONFLICT)
	Code(t, update(e.member, parley.ChannelPatch{Name: ptr("general")}), parley.ECONFLICT)
	// A rejected patch changes nothing, not even its valid fields.
	Code(t, update(e.member, parley.ChannelPatch{Topic: ptr("new"), Name: ptr("taken")}), parley.ECONFLICT)
	if g := e.get(t, e.member, ch); g.Name != "eng" || g.Topic != "" {
		t.Fatalf("channel after rejected updates = %+v", g)
	}
	chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined)

	// DMs have no name, but their topic may be set.
	dm, _, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, []string{e.member2.ID})
	NoErr(t, err)
	_, err = e.s.UpdateChannel(ctx(t), e.member.ID, dm.ID, parley.ChannelPatch{Name: ptr("chat")})
	Code(t, err, parley.EINVALID)
	got, err := e.s.UpdateChannel(ctx(t), e.member2.ID, dm.ID, parley.ChannelPatch{Topic: ptr("lunch")})
	NoErr(t, err)
	if got.Topic != "lunch" || got.Name != "" {
		t.Fatalf("dm topic update = %+v", got)
	}
	evs := chLog(t, e.rec, dm.ID, parley.EventChannelCreated, parley.EventChannelUpdated)
	chTopics(t, evs[1], parley.TopicUser(e.member.ID), parley.TopicUser(e.member2.ID))
}

func testArchiveChannel(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	ch := MustChannel(t, e.s, e.ws, e.member, "eng", parley.KindPublic)
	_, err := e.s.JoinChannel(ctx(t), e.member2.ID, ch.ID)
	NoErr(t, err)
	_, err = e.s.AddMembers(ctx(t), e.member.ID, ch.ID, []string{e.guest.ID})
	NoErr(t, err)

	for _, u := range []*parley.User{e.member2, e.guest} {
		_, err = e.s.ArchiveChannel(ctx(t), u.ID, ch.ID)
		Code(t, err, parley.EFORBIDDEN)
	}
	_, err = e.s.ArchiveChannel(ctx(t), e.outsider.ID, ch.ID)
	Code(t, err, parley.ENOTFOUND)

	got, err := e.s.ArchiveChannel(ctx(t), e.member.ID, ch.ID)
	NoErr(t, err)
	if got.ArchivedAt == nil || got.LastSeq != 4 || !got.IsMember {
		t.Fatalf("archived channel = %+v", got)
	}
	if g := e.get(t, e.member2, ch); g.ArchivedAt == nil || !g.ArchivedAt.Equal(*got.ArchivedAt) || g.LastSeq != 4 {
		t.Fatalf("get archived = %+v", g)
	}
	evs := chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined,
		parley.EventChannelArchived)
	d := chData[parley.ChannelEventData](t, evs[3])
	if d.Channel == nil || d.Channel.ArchivedAt == nil || d.UserID != e.member.ID || d.Channel.IsMember {
		t.Fatalf("channel.archived payload = %s", evs[3].Data)
	}
	chTopicsExactly(t, evs[3], parley.TopicChannel(ch.ID), parley.TopicDirectory(e.ws.ID))

	// Archiving again changes nothing.
	again, err := e.s.ArchiveChannel(ctx(t), e.owner.ID, ch.ID)
	NoErr(t, err)
	if again.ArchivedAt == nil || !again.ArchivedAt.Equal(*got.ArchivedAt) {
		t.Fatalf("archive again = %+v", again)
	}

	// An archived channel takes no writes, but may be left.
	_, err = e.s.UpdateChannel(ctx(t), e.member.ID, ch.ID, parley.ChannelPatch{Topic: ptr("x")})
	Code(t, err, parley.ECONFLICT)
	_, err = e.s.JoinChannel(ctx(t), e.owner.ID, ch.ID)
	Code(t, err, parley.ECONFLICT)
	_, err = e.s.AddMembers(ctx(t), e.member.ID, ch.ID, []string{e.owner.ID})
	Code(t, err, parley.ECONFLICT)
	NoErr(t, e.s.LeaveChannel(ctx(t), e.member2.ID, ch.ID))
	chLog(t, e.rec, ch.ID, parley.EventChannelCreated, parley.EventMemberJoined, parley.EventMemberJoined,
		parley.EventChannelArchived, parley.EventMemberLeft)
	if g := e.get(t, e.member, ch); g.MemberCount != 2 {
		t.Fatalf("member count after leaving archived = %d, want 2", g.MemberCount)
	}

	// Workspace admins may archive channels they are not in; private
	// channel archives go to the members' topics.
	priv := MustChannel(t, e.s, e.ws, e.member2, "priv", parley.KindPrivate)
	pub := MustChannel(t, e.s, e.ws, e.member2, "pub", parley.KindPublic)
	got, err = e.s.ArchiveChannel(ctx(t), e.owner.ID, pub.ID)
	NoErr(t, err)
	if got.ArchivedAt == nil || got.IsMember {
		t.Fatalf("admin archive = %+v", got)
	}
	_, err = e.s.ArchiveChannel(ctx(t), e.member2.ID, priv.ID)
	NoErr(t, err)
	evs = chLog(t, e.rec, priv.ID, parley.EventChannelCreated, parley.EventChannelArchived)
	chTopicsExactly(t, evs[1], parley.TopicChannel(priv.ID), parley.TopicUser(e.member2.ID), parley.TopicDirectory(e.ws.ID))

	// DMs are never archived.
	dm, _, err := e.s.OpenDM(ctx(t), e.owner.ID, e.ws.ID, []string{e.member.ID})
	NoErr(t, err)
	_, err = e.s.ArchiveChannel(ctx(t), e.owner.ID, dm.ID)
	Code(t, err, parley.EINVALID)
}

func testOpenDM(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	dm, created, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, []string{e.member2.ID})
	NoErr(t, err)
	want := []string{e.member.ID, e.member2.ID}
	slices.Sort(want)
	if !created || dm.Kind != parley.KindDM || dm.Name != "" || !slices.Equal(dm.DMUserIDs, want) ||
		!dm.IsMember || dm.MemberCount != 2 || dm.LastSeq != 1 || dm.LastReadSeq != 1 || dm.WorkspaceID != e.ws.ID {
		t.Fatalf("new dm = %+v (created %v)", dm, created)
	}
	evs := chLog(t, e.rec, dm.ID, parley.EventChannelCreated)
	chTopicsExactly(t, evs[0], parley.TopicChannel(dm.ID), parley.TopicUser(e.member.ID), parley.TopicUser(e.member2.ID), parley.TopicDirectory(e.ws.ID))
	opened := e.rec.OfType(parley.EventDMOpened)
	if len(opened) != 1 || opened[0].Seq != 0 || opened[0].ChannelID != "" || opened[0].WorkspaceID != e.ws.ID {
		t.Fatalf("dm.opened events = %+v", opened)
	}
	chTopics(t, opened[0], parley.TopicUser(e.member.ID), parley.TopicUser(e.member2.ID))
	if od := chData[parley.DMOpenedData](t, opened[0]); od.Channel == nil || od.Channel.ID != dm.ID ||
		!slices.Equal(od.Channel.DMUserIDs, want) {
		t.Fatalf("dm.opened payload = %s", opened[0].Data)
	}

	// The same pair, however asked, is the same DM.
	for _, tc := range []struct {
		actor *parley.User
		ids   []string
	}{
		{e.member, []string{e.member2.ID}},
		{e.member2, []string{e.member.ID}},
		{e.member, []string{e.member2.ID, e.member.ID, e.member2.ID}},
	} {
		again, created, err := e.s.OpenDM(ctx(t), tc.actor.ID, e.ws.ID, tc.ids)
		NoErr(t, err)
		if created || again.ID != dm.ID || !again.IsMember || again.MemberCount != 2 {
			t.Fatalf("reopen as %s with %v = %+v (created %v), want %s", tc.actor.Handle, tc.ids, again, created, dm.ID)
		}
	}
	if n := len(e.rec.OfType(parley.EventDMOpened)); n != 1 {
		t.Fatalf("%d dm.opened events, want 1", n)
	}
	chLog(t, e.rec, dm.ID, parley.EventChannelCreated)

	// Only its participants see it; a one-to-one DM cannot be left.
	if g := e.get(t, e.member2, dm); g.Kind != parley.KindDM || !g.IsMember {
		t.Fatalf("dm seen by participant = %+v", g)
	}
	for _, u := range []*parley.User{e.owner, e.guest, e.outsider} {
		_, err := e.s.GetChannel(ctx(t), u.ID, dm.ID)
		Code(t, err, parley.ENOTFOUND)
	}
	Code(t, e.s.LeaveChannel(ctx(t), e.member.ID, dm.ID), parley.EINVALID)
	_, err = e.s.AddMembers(ctx(t), e.member.ID, dm.ID, []string{e.owner.ID})
	Code(t, err, parley.EINVALID)
	Code(t, e.s.RemoveMember(ctx(t), e.member.ID, dm.ID, e.member2.ID), parley.EINVALID)
	_, err = e.s.JoinChannel(ctx(t), e.member.ID, dm.ID) // already in: a no-op
	NoErr(t, err)
	chLog(t, e.rec, dm.ID, parley.EventChannelCreated)

	// Guests may open DMs; a different pair is a different DM.
	gdm, created, err := e.s.OpenDM(ctx(t), e.guest.ID, e.ws.ID, []string{e.owner.ID})
	NoErr(t, err)
	if !created || gdm.ID == dm.ID || gdm.Kind != parley.KindDM {
		t.Fatalf("guest dm = %+v (created %v)", gdm, created)
	}
}

func testGroupDM(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	others := []string{e.member2.ID, e.guest.ID}
	g, created, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, others)
	NoErr(t, err)
	if !created || g.Kind != parley.KindGroupDM || len(g.DMUserIDs) != 3 || g.MemberCount != 3 || !g.IsMember {
		t.Fatalf("group dm = %+v (created %v)", g, created)
	}
	opened := e.rec.OfType(parley.EventDMOpened)
	if len(opened) != 1 {
		t.Fatalf("%d dm.opened events, want 1", len(opened))
	}
	chTopics(t, opened[0], parley.TopicUser(e.member.ID), parley.TopicUser(e.member2.ID), parley.TopicUser(e.guest.ID))

	// Any participant, in any order, gets the same group.
	again, created, err := e.s.OpenDM(ctx(t), e.guest.ID, e.ws.ID, []string{e.member.ID, e.member2.ID})
	NoErr(t, err)
	if created || again.ID != g.ID {
		t.Fatalf("reopen group = %+v (created %v)", again, created)
	}
	// A subset is a different conversation.
	pair, created, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, []string{e.member2.ID})
	NoErr(t, err)
	if !created || pair.ID == g.ID || pair.Kind != parley.KindDM {
		t.Fatalf("pair dm = %+v (created %v)", pair, created)
	}

	// Group DMs may be left; opening it again brings the leaver back.
	NoErr(t, e.s.LeaveChannel(ctx(t), e.guest.ID, g.ID))
	_, err = e.s.GetChannel(ctx(t), e.guest.ID, g.ID)
	Code(t, err, parley.ENOTFOUND)
	if c := e.get(t, e.member, g); c.MemberCount != 2 {
		t.Fatalf("group after leave: member_count %d, want 2", c.MemberCount)
	}
	back, created, err := e.s.OpenDM(ctx(t), e.guest.ID, e.ws.ID, []string{e.member.ID, e.member2.ID})
	NoErr(t, err)
	if created || back.ID != g.ID || !back.IsMember || back.MemberCount != 3 || back.LastReadSeq != back.LastSeq {
		t.Fatalf("rejoined group = %+v (created %v)", back, created)
	}
	evs := chLog(t, e.rec, g.ID, parley.EventChannelCreated, parley.EventMemberLeft, parley.EventMemberJoined)
	if d := chData[parley.MemberEventData](t, evs[2]); d.UserID != e.guest.ID || d.MemberCount != 3 {
		t.Fatalf("member.joined payload = %s", evs[2].Data)
	}

	// Size limit: up to MaxGroupDMOthers others.
	var many []string
	for range parley.MaxGroupDMOthers + 1 {
		many = append(many, e.join(t, "crowd").ID)
	}
	_, _, err = e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, many)
	Code(t, err, parley.EINVALID)
	big, created, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, many[:parley.MaxGroupDMOthers])
	NoErr(t, err)
	if !created || big.Kind != parley.KindGroupDM || big.MemberCount != parley.MaxGroupDMOthers+1 {
		t.Fatalf("largest group = %+v (created %v)", big, created)
	}
	// The actor listed among the others does not count against the limit.
	again, created, err = e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, append([]string{e.member.ID}, many[:parley.MaxGroupDMOthers]...))
	NoErr(t, err)
	if created || again.ID != big.ID {
		t.Fatalf("largest group reopened = %+v (created %v)", again, created)
	}
}

func testOpenDMRules(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	openDM := func(actor *parley.User, wsID string, ids ...string) error {
		_, _, err := e.s.OpenDM(ctx(t), actor.ID, wsID, ids)
		return err
	}
	Code(t, openDM(e.member, e.ws.ID), parley.EINVALID)
	Code(t, openDM(e.member, e.ws.ID, e.member.ID), parley.EINVALID)
	Code(t, openDM(e.member, e.ws.ID, e.outsider.ID), parley.EINVALID)
	Code(t, openDM(e.member, e.ws.ID, "Unobody"), parley.EINVALID)
	err := openDM(e.member, e.ws.ID, e.member2.ID, "Unobody")
	Code(t, err, parley.EINVALID)
	if !strings.Contains(parley.ErrorMessage(err), "Unobody") {
		t.Fatalf("error %q does not name the bad user", parley.ErrorMessage(err))
	}
	Code(t, openDM(e.outsider, e.ws.ID, e.member.ID), parley.ENOTFOUND)
	Code(t, openDM(e.member, e.otherWS.ID, e.outsider.ID), parley.ENOTFOUND)
	Code(t, openDM(e.member, "Wnope", e.member2.ID), parley.ENOTFOUND)
	if n := len(e.rec.OfType(parley.EventDMOpened)); n != 0 {
		t.Fatalf("%d dm.opened events after failures, want 0", n)
	}

	// The same pair in two workspaces is two DMs.
	MustJoinWorkspace(t, e.s, e.otherWS, e.outsider, e.member)
	a, _, err := e.s.OpenDM(ctx(t), e.member.ID, e.ws.ID, []string{e.owner.ID})
	NoErr(t, err)
	MustJoinWorkspace(t, e.s, e.otherWS, e.outsider, e.owner)
	b, created, err := e.s.OpenDM(ctx(t), e.member.ID, e.otherWS.ID, []string{e.owner.ID})
	NoErr(t, err)
	if !created || a.ID == b.ID || b.WorkspaceID != e.otherWS.ID {
		t.Fatalf("dm in second workspace = %+v (created %v), first %s", b, created, a.ID)
	}
}

// testOpenDMConcurrent races participants opening the same group DM: one
// channel results, created once, announced once.
func testOpenDMConcurrent(t *testing.T, open Opener) {
	e := newChanEnv(t, open)
	people := []*parley.User{e.owner, e.member, e.member2, e.guest}
	type result struct {
		ch      *parley.Channel
		created bool
		err     error
	}
	results := make(chan result, 4*len(people))
	var wg sync.WaitGroup
	start := make(chan struct{}) // released at once, to make them collide
	for range 4 {
		for _, u := range people {
			wg.Go(func() {
				<-start
				var others []string
				for _, p := range people {
					others = append(others, p.ID) // the actor is among them
				}
				ch, created, err := e.s.OpenDM(ctx(t), u.ID, e.ws.ID, others)
				results <- result{ch, created, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)
	id, created := "", 0
	for r := range results {
		if r.err != nil {
			t.Fatalf("concurrent open: %v", r.err)
		}
		if id == "" {
			id = r.ch.ID
		}
		if r.ch.ID != id || !r.ch.IsMember || r.ch.MemberCount != int64(len(people)) {
			t.Fatalf("concurrent open = %+v, want channel %s", r.ch, id)
		}
		if r.created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("created reported %d times, want 1", created)
	}
	if n := len(e.rec.OfType(parley.EventDMOpened)); n != 1 {
		t.Fatalf("%d dm.opened events, want 1", n)
	}
	chLog(t, e.rec, id, parley.EventChannelCreated)
}
