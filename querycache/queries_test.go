package querycache

import (
	"fmt"
	"slices"
	"testing"

	"parley"
)

// TestSwitcherRanksUsers: exact before prefix before fuzzy; within a tier
// DM partners first, handle matches before name matches, then by handle.
func TestSwitcherRanksUsers(t *testing.T) {
	n := newNode(t)
	st := n.store
	me := mustUser(t, st, "me", "Me Myself")
	ws := mustWorkspace(t, st, me)
	var others []*parley.User
	for _, u := range [][2]string{
		{"jo", "Joanna Smith"}, // exact handle for "jo"
		{"john.smith", "John Smith"},
		{"jojo", "Jo Jones"},    // exact name for "jo jones"
		{"adam", "Adam Jost"},   // name word prefix "jo"
		{"zed", "Zed Jolly"},    // name word prefix "jo"; becomes a DM partner
		{"kj.o", "Kay Ojo"},     // name word "ojo": fuzzy for "jo" via handle "kj.o"
		{"gone", "Gone Person"}, // no match
	} {
		others = append(others, mustUser(t, st, u[0], u[1]))
	}
	mustJoin(t, st, ws, me, others...)
	_, _, err := st.OpenDM(bg(t), me.ID, ws.ID, []string{others[4].ID})
	noErr(t, err)

	users, _ := switcher(t, n.cache, me.ID, ws.ID, "jo")
	// Exact: jo. Prefix: zed (DM partner) first, then handles (john.smith,
	// jojo), then names by the matched word (adam "jost").
	// Fuzzy: kj.o.
	want := []string{"jo", "zed", "john.smith", "jojo", "adam", "kj.o"}
	if !slices.Equal(users, want) {
		t.Fatalf("switcher jo: %v, want %v", users, want)
	}
	// Fuzzy matches handles only: not Joanna Smith, whose handle is "jo".
	if users, _ := switcher(t, n.cache, me.ID, ws.ID, "jsmth"); !slices.Equal(users, []string{"john.smith"}) {
		t.Errorf("fuzzy jsmth: %v", users)
	}
	if users, _ := switcher(t, n.cache, me.ID, ws.ID, "Jo Jones"); !slices.Equal(users, []string{"jojo"}) {
		t.Errorf("exact name: %v", users)
	}
	r, err := n.cache.Switcher(bg(t), me.ID, ws.ID, "jo", 2)
	noErr(t, err)
	if !slices.Equal(handles(r.Users), []string{"jo", "zed"}) {
		t.Errorf("limit 2: %v", handles(r.Users))
	}
	// "@" looks for people only, "#" for channels only.
	r, err = n.cache.Switcher(bg(t), me.ID, ws.ID, "@gen", 10)
	noErr(t, err)
	if len(r.Channels) != 0 {
		t.Errorf("@ query found channels: %v", channelNames(r.Channels))
	}
	r, err = n.cache.Switcher(bg(t), me.ID, ws.ID, "#gen", 10)
	noErr(t, err)
	if len(r.Users) != 0 || !slices.Equal(channelNames(r.Channels), []string{"general"}) {
		t.Errorf("# query: users %v channels %v", handles(r.Users), channelNames(r.Channels))
	}
}

// TestSwitcherRanksChannels: exact, prefix (also of a word), fuzzy; the
// caller's own channels first, then the most recently active; private ones
// only for members, and guests see only their own.
func TestSwitcherRanksChannels(t *testing.T) {
	n := newNode(t)
	st := n.store
	me := mustUser(t, st, "me", "Me Myself")
	other := mustUser(t, st, "other", "Other Person")
	guest := mustUser(t, st, "guest", "Guest Person")
	ws := mustWorkspace(t, st, me)
	mustJoin(t, st, ws, me, other, guest)
	noErr(t, st.SetMemberRole(bg(t), me.ID, ws.ID, guest.ID, parley.RoleGuest))
	mk := func(creator *parley.User, name string, kind parley.ChannelKind) *parley.Channel {
		return mustChannel(t, st, ws, creator, name, kind)
	}
	mk(other, "eng", parley.KindPublic)
	mk(other, "eng-backend", parley.KindPublic)
	mine := mk(me, "eng-frontend", parley.KindPublic)
	mk(other, "team-eng", parley.KindPublic)
	mk(other, "elephant-gun", parley.KindPublic) // fuzzy e-n-g
	mk(other, "eng-secret", parley.KindPrivate)  // other's private channel
	mk(me, "eng-mine", parley.KindPrivate)       // my private channel
	// Adding the guest makes eng-frontend the most recently active.
	_, err := st.AddMembers(bg(t), me.ID, mine.ID, []string{guest.ID})
	noErr(t, err)

	_, chs := switcher(t, n.cache, me.ID, ws.ID, "eng")
	// Exact; then prefix: mine first, then the others, each by activity
	// (newest first); then fuzzy.
	want := []string{"eng", "eng-frontend", "eng-mine", "team-eng", "eng-backend", "elephant-gun"}
	if !slices.Equal(chs, want) {
		t.Fatalf("switcher eng as me: %v, want %v", chs, want)
	}
	_, chs = switcher(t, n.cache, guest.ID, ws.ID, "eng")
	if !slices.Equal(chs, []string{"eng-frontend"}) {
		t.Fatalf("switcher eng as a guest: %v, want only the channel they are in", chs)
	}
}

// directoryWorkspace makes a workspace of varied names for the directory
// tests and returns its owner and members.
func directoryWorkspace(t *testing.T, st parley.Store) (*parley.User, *parley.Workspace, []*parley.User) {
	t.Helper()
	owner := mustUser(t, st, "owner", "Olive Owner")
	ws := mustWorkspace(t, st, owner)
	first := []string{"Ann", "Anna", "Bob", "Bo", "Cara", "Dan", "Ann-Marie", "Zoë"}
	last := []string{"Lee", "Anderson", "Brown", "Leeds", "Ó Briain"}
	var members []*parley.User
	for i := range 40 {
		name := first[i%len(first)] + " " + last[i%len(last)]
		if i%7 == 0 {
			name = "  " + name + " Jr" // odd spacing, three words
		}
		handle := fmt.Sprintf("%s.%02d", []string{"ann", "anna", "bob", "bo", "cara", "dan", "am", "zoe"}[i%8], i)
		members = append(members, mustUser(t, st, handle, name))
	}
	mustJoin(t, st, ws, owner, members...)
	return owner, ws, members
}

// TestDirectoryMatchesStore: the cached directory pages exactly as the
// store's ListWorkspaceUsers does: the same users, order and cursors, for
// every query and page size.
func TestDirectoryMatchesStore(t *testing.T) {
	n := newNode(t)
	owner, ws, _ := directoryWorkspace(t, n.store)
	// ASCII queries only: SQLite's LOWER folds nothing else, the cache folds
	// all of Unicode (checked after the loop).
	for _, q := range []string{"", "a", "an", "ann", "@ann", "lee", "LEE", "brown", "jr", "zz", " bo ", "ann l", "am.0"} {
		for _, limit := range []int{0, 1, 3, 7, 200} {
			cursor := ""
			for page := 0; ; page++ {
				uq := parley.UserQuery{Q: q, Cursor: cursor, Limit: limit}
				want, err := n.store.ListWorkspaceUsers(bg(t), owner.ID, ws.ID, uq)
				noErr(t, err)
				got, err := n.cache.Directory(bg(t), owner.ID, ws.ID, uq)
				noErr(t, err)
				if !slices.Equal(handles(got.Users), handles(want.Users)) || got.NextCursor != want.NextCursor {
					t.Fatalf("q=%q limit=%d page %d: cache %v next %q; store %v next %q", q, limit, page,
						handles(got.Users), got.NextCursor, handles(want.Users), want.NextCursor)
				}
				for i := range got.Users {
					if g, w := got.Users[i], want.Users[i]; g.ID != w.ID || g.Name != w.Name || !g.UpdatedAt.Equal(w.UpdatedAt) || g.Email != "" {
						t.Fatalf("user %s: cache %+v, store %+v", g.Handle, g, w)
					}
				}
				if got.NextCursor == "" {
					break
				}
				cursor = got.NextCursor
			}
		}
	}
	p, err := n.cache.Directory(bg(t), owner.ID, ws.ID, parley.UserQuery{Q: "ó"})
	noErr(t, err)
	if len(p.Users) != 8 {
		t.Errorf("q=ó found %v, want the 8 Ó Briains", handles(p.Users))
	}
	_, err = n.cache.Directory(bg(t), owner.ID, ws.ID, parley.UserQuery{Cursor: "!!"})
	wantCode(t, err, parley.EINVALID)
	// A cursor decoding to bytes no text column holds is refused as the
	// store refuses it.
	for _, key := range []string{"a\x00", "\xff"} {
		_, err = n.cache.Directory(bg(t), owner.ID, ws.ID, parley.UserQuery{Cursor: encodeCursor(key)})
		wantCode(t, err, parley.EINVALID)
		_, err = n.store.ListWorkspaceUsers(bg(t), owner.ID, ws.ID, parley.UserQuery{Cursor: encodeCursor(key)})
		wantCode(t, err, parley.EINVALID)
	}
}

// TestUsersBatchMatchesStore: the same users as the store's UsersBatch, and
// the store is asked only about ids no warm workspace of the caller has.
func TestUsersBatchMatchesStore(t *testing.T) {
	n := newNode(t)
	owner, ws, members := directoryWorkspace(t, n.store)
	stranger := mustUser(t, n.store, "stranger", "Sam Stranger")
	other := mustWorkspace(t, n.store, stranger)
	_ = other
	_, err := n.cache.Switcher(bg(t), owner.ID, ws.ID, "", 1) // warm
	noErr(t, err)

	ids := []string{members[3].ID, owner.ID, members[3].ID, "", members[0].ID}
	before := n.count.batch.Load()
	got, err := n.cache.UsersBatch(bg(t), owner.ID, ids)
	noErr(t, err)
	want, err := n.store.UsersBatch(bg(t), owner.ID, ids)
	noErr(t, err)
	if !slices.Equal(handles(got), handles(want)) {
		t.Fatalf("batch: cache %v, store %v", handles(got), handles(want))
	}
	if n.count.batch.Load() != before {
		t.Fatalf("the store was asked for users a warm workspace has")
	}
	ids = append(ids, stranger.ID, "Unosuch")
	got, err = n.cache.UsersBatch(bg(t), owner.ID, ids)
	noErr(t, err)
	want, err = n.store.UsersBatch(bg(t), owner.ID, ids)
	noErr(t, err)
	if !slices.Equal(handles(got), handles(want)) || n.count.batch.Load() != before+1 {
		t.Fatalf("batch with strangers: cache %v, store %v, %d store calls", handles(got), handles(want), n.count.batch.Load()-before)
	}
	// The stranger sees only themself (through the store: their workspace
	// is cold).
	got, err = n.cache.UsersBatch(bg(t), stranger.ID, []string{owner.ID, stranger.ID})
	noErr(t, err)
	if !slices.Equal(handles(got), []string{"stranger"}) {
		t.Fatalf("stranger's batch: %v", handles(got))
	}
	ids = make([]string, parley.MaxBatchUsers+1)
	_, err = n.cache.UsersBatch(bg(t), owner.ID, ids)
	wantCode(t, err, parley.EINVALID)
}

// TestMentionsAndHeader: members of the channel first, each marked; the
// header's counts, topic and a preview of members by handle.
func TestMentionsAndHeader(t *testing.T) {
	n := newNode(t)
	st := n.store
	owner := mustUser(t, st, "owner", "Olive Owner")
	ws := mustWorkspace(t, st, owner)
	var us []*parley.User
	for _, h := range []string{"sam", "sally", "sid", "stan", "sue", "sven", "syd"} {
		us = append(us, mustUser(t, st, h, "S "+h))
	}
	mustJoin(t, st, ws, owner, us...)
	ch := mustChannel(t, st, ws, owner, "room", parley.KindPublic)
	topic := "the room's topic"
	_, err := st.UpdateChannel(bg(t), owner.ID, ch.ID, parley.ChannelPatch{Topic: &topic})
	noErr(t, err)
	for _, u := range []*parley.User{us[4], us[2]} { // sue, sid
		_, err := st.JoinChannel(bg(t), u.ID, ch.ID)
		noErr(t, err)
	}

	ms, err := n.cache.MentionSuggestions(bg(t), owner.ID, ch.ID, "s", 4)
	noErr(t, err)
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%s:%v", m.Handle, m.InChannel))
	}
	if want := []string{"sid:true", "sue:true", "sally:false", "sam:false"}; !slices.Equal(got, want) {
		t.Fatalf("mention suggestions: %v, want %v", got, want)
	}
	h, err := n.cache.ChannelHeader(bg(t), us[0].ID, ch.ID)
	noErr(t, err)
	if h.MemberCount != 3 || h.Topic != topic || h.Channel.IsMember || h.Channel.Name != "room" ||
		!slices.Equal(handles(h.MembersPreview), []string{"owner", "sid", "sue"}) {
		t.Fatalf("header %+v", h)
	}
}

// TestZeroStoreQueriesOnceWarm: "ready for scale out": once a workspace
// is warm, the switcher, mentions, header, directory and batch lookups
// of its members ask the store nothing.
func TestZeroStoreQueriesOnceWarm(t *testing.T) {
	n := newNode(t)
	owner, ws, members := directoryWorkspace(t, n.store)
	ch := mustChannel(t, n.store, ws, owner, "room", parley.KindPublic)
	_, err := n.cache.Switcher(bg(t), owner.ID, ws.ID, "", 10)
	noErr(t, err)
	warm := n.count.total()

	ids := []string{owner.ID}
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	for i := range 20 {
		actor := members[i].ID
		_, err := n.cache.Switcher(bg(t), actor, ws.ID, "an", 10)
		noErr(t, err)
		_, err = n.cache.Switcher(bg(t), actor, ws.ID, "lbrwn", 10)
		noErr(t, err)
		page, err := n.cache.Directory(bg(t), actor, ws.ID, parley.UserQuery{Q: "a", Limit: 5})
		noErr(t, err)
		_, err = n.cache.Directory(bg(t), actor, ws.ID, parley.UserQuery{Q: "a", Limit: 5, Cursor: page.NextCursor})
		noErr(t, err)
		_, err = n.cache.UsersBatch(bg(t), actor, ids)
		noErr(t, err)
		_, err = n.cache.MentionSuggestions(bg(t), actor, ch.ID, "b", 10)
		noErr(t, err)
		_, err = n.cache.ChannelHeader(bg(t), actor, ch.ID)
		noErr(t, err)
		_, err = n.cache.Users(bg(t), ws.ID, ids[:10])
		noErr(t, err)
	}
	if got := n.count.total() - warm; got != 0 {
		t.Fatalf("%d store queries once warm (reads %d, channel lookups %d, batches %d), want 0",
			got, n.count.reads.Load(), n.count.channelWS.Load(), n.count.batch.Load())
	}
}

// TestServerLookups: Users and UsersByHandle, the servers' own lookups
// (boot's users, the gateway's just-in-time users), with no actor.
func TestServerLookups(t *testing.T) {
	n := newNode(t)
	owner, ws, members := directoryWorkspace(t, n.store)
	stranger := mustUser(t, n.store, "stranger", "Sam Stranger")
	us, err := n.cache.Users(bg(t), ws.ID, []string{members[2].ID, stranger.ID, owner.ID, members[2].ID, "Unosuch"})
	noErr(t, err)
	if !slices.Equal(handles(us), []string{members[2].Handle, "owner"}) {
		t.Fatalf("Users: %v", handles(us))
	}
	us, err = n.cache.UsersByHandle(bg(t), ws.ID, []string{"stranger", members[5].Handle, "owner", "nobody"})
	noErr(t, err)
	if !slices.Equal(handles(us), []string{members[5].Handle, "owner"}) {
		t.Fatalf("UsersByHandle: %v", handles(us))
	}
	_, err = n.cache.Users(bg(t), "Wnosuch", []string{owner.ID})
	wantCode(t, err, parley.ENOTFOUND)
}
