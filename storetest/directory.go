package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"parley"
)

// Contract tests of the bulk directory reads that feed the query caches.

func init() {
	register("Directory/Read", testReadDirectory)
	register("Directory/ReadIsOneSnapshot", testReadDirectorySnapshot)
	register("Directory/ChannelWorkspace", testChannelWorkspace)
	register("Directory/RoleChangeEvent", testRoleChangeEvent)
}

// dirSnapshot is what one ReadDirectory delivered, in call order.
type dirSnapshot struct {
	order    []string // "user", "channel", "member" as the calls came
	roles    map[string]parley.Role
	users    map[string]parley.User
	channels map[string]parley.Channel
	members  map[string][]string // channel → users, in call order
	chOrder  []string            // channel ids of Member calls, in call order
}

func readDirectory(t *testing.T, s parley.Store, workspaceID string) (*dirSnapshot, error) {
	t.Helper()
	d := &dirSnapshot{
		roles: map[string]parley.Role{}, users: map[string]parley.User{},
		channels: map[string]parley.Channel{}, members: map[string][]string{},
	}
	note := func(kind string) {
		if len(d.order) == 0 || d.order[len(d.order)-1] != kind {
			d.order = append(d.order, kind)
		}
	}
	err := s.ReadDirectory(ctx(t), workspaceID, parley.DirectoryVisitor{
		User: func(u *parley.User, role parley.Role) {
			note("user")
			d.users[u.ID], d.roles[u.ID] = *u, role
		},
		Channel: func(c *parley.Channel) {
			note("channel")
			d.channels[c.ID] = *c
		},
		Member: func(channelID, userID string) {
			note("member")
			d.members[channelID] = append(d.members[channelID], userID)
			d.chOrder = append(d.chOrder, channelID)
		},
	})
	return d, err
}

// testReadDirectory: every member with their role, every channel of every
// kind with its counts, every membership; nothing of other workspaces.
func testReadDirectory(t *testing.T, open Opener) {
	s := open(t, nil)
	c := ctx(t)
	a, b, x := MustUser(t, s, "a"), MustUser(t, s, "b"), MustUser(t, s, "x")
	ws := MustWorkspace(t, s, a)
	MustJoinWorkspace(t, s, ws, a, b)
	other := MustWorkspace(t, s, x)
	MustChannel(t, s, other, x, "elsewhere", parley.KindPublic)

	pub := MustChannel(t, s, ws, a, "pub", parley.KindPublic)
	priv := MustChannel(t, s, ws, a, "priv", parley.KindPrivate)
	secret := MustChannel(t, s, ws, a, "secret", parley.KindPrivate)
	_, err := s.AddMembers(c, a.ID, priv.ID, []string{b.ID})
	NoErr(t, err)
	dm, _, err := s.OpenDM(c, a.ID, ws.ID, []string{b.ID})
	NoErr(t, err)
	archived := MustChannel(t, s, ws, a, "old", parley.KindPublic)
	_, err = s.ArchiveChannel(c, a.ID, archived.ID)
	NoErr(t, err)
	_, err = s.SetStatus(c, b.ID, parley.Status{Emoji: "palm_tree", Text: "away"})
	NoErr(t, err)
	MustPost(t, s, a, pub, "moves last_seq")

	d, err := readDirectory(t, s, ws.ID)
	NoErr(t, err)
	if !slices.Equal(d.order, []string{"user", "channel", "member"}) {
		t.Errorf("call order %v, want users, then channels, then members", d.order)
	}
	if len(d.users) != 2 || d.roles[a.ID] != parley.RoleOwner || d.roles[b.ID] != parley.RoleMember {
		t.Fatalf("users %v roles %v, want a (owner) and b (member)", handlesOf(mapValues(d.users)), d.roles)
	}
	if u := d.users[b.ID]; u.Handle != b.Handle || u.Email != "" || u.Status == nil || u.Status.Emoji != "palm_tree" {
		t.Errorf("b as read: %+v", u)
	}
	var general parley.Channel
	for _, ch := range d.channels {
		if ch.Name == "general" {
			general = ch
		}
	}
	want := map[string]struct {
		kind    parley.ChannelKind
		members []string
	}{
		general.ID:  {parley.KindPublic, []string{a.ID, b.ID}},
		pub.ID:      {parley.KindPublic, []string{a.ID}},
		priv.ID:     {parley.KindPrivate, []string{a.ID, b.ID}},
		secret.ID:   {parley.KindPrivate, []string{a.ID}},
		dm.ID:       {parley.KindDM, []string{a.ID, b.ID}},
		archived.ID: {parley.KindPublic, []string{a.ID}},
	}
	if len(d.channels) != len(want) {
		t.Fatalf("read %d channels, want %d", len(d.channels), len(want))
	}
	for id, w := range want {
		ch, ok := d.channels[id]
		if !ok {
			t.Fatalf("channel %s missing", id)
		}
		got := slices.Clone(d.members[id])
		slices.Sort(got)
		wantMembers := slices.Clone(w.members)
		slices.Sort(wantMembers)
		if ch.Kind != w.kind || ch.WorkspaceID != ws.ID || ch.MemberCount != int64(len(w.members)) || !slices.Equal(got, wantMembers) {
			t.Errorf("channel %s: kind %s count %d members %v; want %s %v", ch.Name, ch.Kind, ch.MemberCount, got, w.kind, wantMembers)
		}
		if ch.IsMember || ch.LastReadSeq != 0 {
			t.Errorf("channel %s carries caller fields: %+v", ch.Name, ch)
		}
		seen, err := s.GetChannel(c, a.ID, id)
		NoErr(t, err)
		if ch.LastSeq != seen.LastSeq || !ch.UpdatedAt.Equal(seen.UpdatedAt) {
			t.Errorf("channel %s: last_seq %d updated %v, GetChannel says %d %v", ch.Name, ch.LastSeq, ch.UpdatedAt, seen.LastSeq, seen.UpdatedAt)
		}
	}
	if got := d.channels[dm.ID].DMUserIDs; len(got) != 2 {
		t.Errorf("dm participants %v", got)
	}
	if d.channels[archived.ID].ArchivedAt == nil {
		t.Errorf("archived channel read without archived_at")
	}
	// Memberships come grouped by channel.
	done := map[string]bool{}
	for i, id := range d.chOrder {
		if i > 0 && d.chOrder[i-1] != id {
			if done[id] {
				t.Fatalf("memberships of %s are not contiguous: %v", id, d.chOrder)
			}
			done[d.chOrder[i-1]] = true
		}
	}

	_, err = readDirectory(t, s, "Wnosuch")
	Code(t, err, parley.ENOTFOUND)
}

// testReadDirectorySnapshot: while members join a channel, every read sees
// exactly as many membership rows as the member count it read, and the
// channel's last_seq moves with them: one snapshot for all the queries.
func testReadDirectorySnapshot(t *testing.T, open Opener) {
	s := open(t, nil)
	owner := MustUser(t, s, "owner")
	ws := MustWorkspace(t, s, owner)
	ch := MustChannel(t, s, ws, owner, "busy", parley.KindPublic)
	const joiners = 15
	users := make([]*parley.User, joiners)
	for i := range users {
		users[i] = MustUser(t, s, fmt.Sprintf("j%d", i))
		MustJoinWorkspace(t, s, ws, owner, users[i])
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, u := range users {
			if _, err := s.JoinChannel(ctx(t), u.ID, ch.ID); err != nil {
				t.Errorf("join: %v", err)
				return
			}
		}
	}()
	last := int64(-1)
	for done := false; !done; {
		d, err := readDirectory(t, s, ws.ID)
		NoErr(t, err)
		got := d.channels[ch.ID]
		if n := int64(len(d.members[ch.ID])); n != got.MemberCount {
			t.Fatalf("read %d membership rows of a channel whose member count read %d", n, got.MemberCount)
		}
		if got.LastSeq < last {
			t.Fatalf("last_seq went back from %d to %d", last, got.LastSeq)
		}
		last = got.LastSeq
		done = got.MemberCount == joiners+1
	}
	wg.Wait()
}

// testChannelWorkspace: any channel's workspace, DMs included; unknown ids
// are ENOTFOUND.
func testChannelWorkspace(t *testing.T, open Opener) {
	s := open(t, nil)
	c := ctx(t)
	a, b := MustUser(t, s, "a"), MustUser(t, s, "b")
	ws := MustWorkspace(t, s, a)
	MustJoinWorkspace(t, s, ws, a, b)
	priv := MustChannel(t, s, ws, a, "priv", parley.KindPrivate)
	dm, _, err := s.OpenDM(c, a.ID, ws.ID, []string{b.ID})
	NoErr(t, err)
	for _, id := range []string{priv.ID, dm.ID} {
		got, err := s.ChannelWorkspace(c, id)
		NoErr(t, err)
		if got != ws.ID {
			t.Errorf("workspace of %s: %s, want %s", id, got, ws.ID)
		}
	}
	_, err = s.ChannelWorkspace(c, "Cnosuch")
	Code(t, err, parley.ENOTFOUND)
}

// testRoleChangeEvent: a role change reaches the directory topic (the query
// caches' guest rules need it) and no client topic.
func testRoleChangeEvent(t *testing.T, open Opener) {
	rec := &Recorder{}
	s := open(t, rec)
	owner, u := MustUser(t, s, "owner"), MustUser(t, s, "u")
	ws := MustWorkspace(t, s, owner)
	MustJoinWorkspace(t, s, ws, owner, u)
	NoErr(t, s.SetMemberRole(ctx(t), owner.ID, ws.ID, u.ID, parley.RoleGuest))
	evs := rec.OfType(parley.EventWorkspaceMemberUpdated)
	if len(evs) != 1 {
		t.Fatalf("%d %s events, want 1", len(evs), parley.EventWorkspaceMemberUpdated)
	}
	// The user's own topic (their sessions' gateways follow the admins'
	// topic or stop) and the caches'; never sent to a client.
	if !slices.Equal(evs[0].Topics, []string{parley.TopicUser(u.ID), parley.TopicDirectory(ws.ID)}) {
		t.Errorf("topics %v, want the user's and the directory topic", evs[0].Topics)
	}
	d := chData[parley.WorkspaceMemberData](t, evs[0])
	if d.UserID != u.ID || d.Role != parley.RoleGuest || d.WorkspaceID != ws.ID {
		t.Errorf("payload %+v", d)
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
