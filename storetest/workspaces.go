package storetest

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"parley"
)

// Contract tests of workspaces, memberships, roles and invites.

// generalOf returns the id of ws's #general, found from the published
// channel.created events.
func generalOf(tb testing.TB, rec *Recorder, ws *parley.Workspace) string {
	tb.Helper()
	for _, e := range rec.OfType(parley.EventChannelCreated) {
		var d parley.ChannelEventData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			tb.Fatalf("decode channel.created: %v", err)
		}
		if e.WorkspaceID == ws.ID && d.Channel != nil && d.Channel.Name == "general" {
			return d.ChannelID
		}
	}
	tb.Fatalf("no #general created in %s", ws.ID)
	return ""
}

// joinedChannel reports whether a member.joined for userID was published in
// channelID.
func joinedChannel(tb testing.TB, rec *Recorder, channelID, userID string) bool {
	tb.Helper()
	for _, e := range rec.OfChannel(channelID) {
		if e.Type != parley.EventMemberJoined {
			continue
		}
		var d parley.MemberEventData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			tb.Fatalf("decode member.joined: %v", err)
		}
		if d.UserID == userID {
			return true
		}
	}
	return false
}

// memberJoinedOf returns the workspace.member_joined payloads about userID.
func memberJoinedOf(tb testing.TB, rec *Recorder, userID string) ([]parley.Event, []parley.WorkspaceMemberData) {
	tb.Helper()
	var evs []parley.Event
	var ds []parley.WorkspaceMemberData
	for _, e := range rec.OfType(parley.EventWorkspaceMemberJoined) {
		var d parley.WorkspaceMemberData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			tb.Fatalf("decode workspace.member_joined: %v", err)
		}
		if d.UserID == userID {
			evs, ds = append(evs, e), append(ds, d)
		}
	}
	return evs, ds
}

func init() {
	register("Workspaces/Create", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		u := MustUser(t, s, "founder")
		ws, err := s.CreateWorkspace(ctx(t), u.ID, "Acme Corp", "acme")
		NoErr(t, err)
		if ws.ID == "" || ws.OrgID == "" || ws.Name != "Acme Corp" || ws.Slug != "acme" ||
			ws.Role != parley.RoleOwner || ws.CreatedAt.IsZero() {
			t.Fatalf("workspace = %+v", ws)
		}
		got, err := s.GetWorkspace(ctx(t), u.ID, ws.ID)
		NoErr(t, err)
		if *got != *ws {
			t.Fatalf("GetWorkspace = %+v, want %+v", got, ws)
		}

		evs, ds := memberJoinedOf(t, rec, u.ID)
		if len(evs) != 1 || evs[0].WorkspaceID != ws.ID || ds[0].Role != parley.RoleOwner ||
			len(evs[0].Topics) != 2 || evs[0].Topics[0] != parley.TopicAdmins(ws.ID) || evs[0].Topics[1] != parley.TopicDirectory(ws.ID) ||
			ds[0].User == nil || ds[0].User.Email != "" {
			t.Fatalf("workspace.member_joined = %+v %+v", evs, ds)
		}
		general := generalOf(t, rec, ws)
		created := rec.OfChannel(general)[0]
		var d parley.ChannelEventData
		NoErr(t, json.Unmarshal(created.Data, &d))
		if d.Channel.Kind != parley.KindPublic || d.Channel.MemberCount != 1 || d.Channel.CreatedBy != u.ID {
			t.Fatalf("#general = %+v", d.Channel)
		}

		for what, args := range map[string][2]string{
			"blank name": {" ", "ok-slug"},
			"bad slug":   {"Name", "Bad Slug"},
			"short slug": {"Name", "a"},
		} {
			_, err := s.CreateWorkspace(ctx(t), u.ID, args[0], args[1])
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Errorf("%s: error = %v, want %s", what, err, parley.EINVALID)
			}
		}
		other := MustUser(t, s, "rival")
		_, err = s.CreateWorkspace(ctx(t), other.ID, "Acme Again", "acme")
		Code(t, err, parley.ECONFLICT)
	})

	register("Workspaces/Visibility", func(t *testing.T, open Opener) {
		s := open(t, nil)
		a, b := MustUser(t, s, "va"), MustUser(t, s, "vb")
		wsA := MustWorkspace(t, s, a)
		_, err := s.GetWorkspace(ctx(t), b.ID, wsA.ID)
		Code(t, err, parley.ENOTFOUND)
		_, err = s.GetWorkspace(ctx(t), a.ID, "Wunknown")
		Code(t, err, parley.ENOTFOUND)
		list, err := s.ListWorkspaces(ctx(t), b.ID)
		NoErr(t, err)
		if list == nil || len(list) != 0 {
			t.Fatalf("ListWorkspaces of a user in none = %#v", list)
		}
	})

	register("Workspaces/List", func(t *testing.T, open Opener) {
		s := open(t, nil)
		a, b := MustUser(t, s, "la"), MustUser(t, s, "lb")
		zeta, err := s.CreateWorkspace(ctx(t), a.ID, "Zeta", "zeta")
		NoErr(t, err)
		alpha, err := s.CreateWorkspace(ctx(t), b.ID, "Alpha", "alpha")
		NoErr(t, err)
		MustJoinWorkspace(t, s, alpha, b, a)
		list, err := s.ListWorkspaces(ctx(t), a.ID)
		NoErr(t, err)
		if len(list) != 2 || list[0].ID != alpha.ID || list[0].Role != parley.RoleMember ||
			list[1].ID != zeta.ID || list[1].Role != parley.RoleOwner {
			t.Fatalf("ListWorkspaces = %+v", list)
		}
	})

	register("Workspaces/InviteCreate", func(t *testing.T, open Opener) {
		s := open(t, nil)
		owner, member, guest, outsider := MustUser(t, s, "io"), MustUser(t, s, "im"), MustUser(t, s, "ig"), MustUser(t, s, "ix")
		ws := MustWorkspace(t, s, owner)
		MustJoinWorkspace(t, s, ws, owner, member)
		MustJoinWorkspace(t, s, ws, owner, guest)
		NoErr(t, s.SetMemberRole(ctx(t), owner.ID, ws.ID, guest.ID, parley.RoleGuest))

		before := time.Now()
		inv, err := s.CreateInvite(ctx(t), member.ID, ws.ID, parley.InviteParams{})
		NoErr(t, err)
		if len(inv.Code) < 20 || inv.WorkspaceID != ws.ID || inv.CreatedBy != member.ID || inv.Uses != 0 || inv.MaxUses != 0 {
			t.Fatalf("invite = %+v", inv)
		}
		if ttl := inv.ExpiresAt.Sub(before); ttl < parley.DefaultInviteTTL-time.Minute || ttl > parley.DefaultInviteTTL+time.Minute {
			t.Fatalf("default invite lives %v, want %v", ttl, parley.DefaultInviteTTL)
		}
		inv2, err := s.CreateInvite(ctx(t), owner.ID, ws.ID, parley.InviteParams{MaxUses: 5, ExpiresInS: 30 * 24 * 3600})
		NoErr(t, err)
		if inv2.Code == inv.Code || inv2.MaxUses != 5 {
			t.Fatalf("second invite = %+v", inv2)
		}

		_, err = s.CreateInvite(ctx(t), guest.ID, ws.ID, parley.InviteParams{})
		Code(t, err, parley.EFORBIDDEN)
		_, err = s.CreateInvite(ctx(t), outsider.ID, ws.ID, parley.InviteParams{})
		Code(t, err, parley.ENOTFOUND)
		for what, p := range map[string]parley.InviteParams{
			"negative max_uses": {MaxUses: -1},
			"negative expiry":   {ExpiresInS: -5},
			"expiry too far":    {ExpiresInS: 30*24*3600 + 1},
		} {
			_, err := s.CreateInvite(ctx(t), owner.ID, ws.ID, p)
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Errorf("%s: error = %v, want %s", what, err, parley.EINVALID)
			}
		}
	})

	register("Workspaces/InviteAccept", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		owner, newcomer := MustUser(t, s, "ao"), MustUser(t, s, "an")
		ws := MustWorkspace(t, s, owner)
		inv, err := s.CreateInvite(ctx(t), owner.ID, ws.ID, parley.InviteParams{})
		NoErr(t, err)

		got, err := s.AcceptInvite(ctx(t), newcomer.ID, inv.Code)
		NoErr(t, err)
		if got.ID != ws.ID || got.Role != parley.RoleMember || got.Slug != ws.Slug {
			t.Fatalf("accepted workspace = %+v", got)
		}
		if w, err := s.GetWorkspace(ctx(t), newcomer.ID, ws.ID); err != nil || w.Role != parley.RoleMember {
			t.Fatalf("GetWorkspace after accept = %+v, %v", w, err)
		}
		evs, ds := memberJoinedOf(t, rec, newcomer.ID)
		if len(evs) != 1 || evs[0].WorkspaceID != ws.ID || !slices.Equal(evs[0].Topics, []string{parley.TopicAdmins(ws.ID), parley.TopicDirectory(ws.ID)}) ||
			ds[0].Role != parley.RoleMember || ds[0].User == nil || ds[0].User.ID != newcomer.ID || ds[0].User.Email != "" {
			t.Fatalf("workspace.member_joined = %+v %+v", evs, ds)
		}
		// The newcomer is in #general with nothing unread, quietly: no
		// member.joined for its members (everyone); the admins' event
		// carries the join.
		general := generalOf(t, rec, ws)
		if joinedChannel(t, rec, general, newcomer.ID) {
			t.Fatalf("joining #general with the workspace wrote a member.joined")
		}
		gch, err := s.GetChannel(ctx(t), newcomer.ID, general)
		NoErr(t, err)
		if !gch.IsMember || gch.MemberCount != 2 || gch.LastReadSeq != gch.LastSeq {
			t.Fatalf("#general for the newcomer = %+v", gch)
		}
		if want := []parley.JoinedChannel{{ChannelID: general, MemberCount: 2, LastSeq: gch.LastSeq}}; !slices.Equal(ds[0].Channels, want) {
			t.Fatalf("workspace.member_joined channels = %+v, want %+v", ds[0].Channels, want)
		}
		b, err := s.Boot(ctx(t), newcomer.ID, parley.BootQuery{WorkspaceID: ws.ID})
		NoErr(t, err)
		for _, c := range b.Channels {
			if c.ID == general && (c.UnreadCount != 0 || c.LastReadSeq != c.LastSeq) {
				t.Fatalf("boot's #general for the newcomer = %+v", c)
			}
		}
		// They may leave it like any channel.
		NoErr(t, s.LeaveChannel(ctx(t), newcomer.ID, general))
		if g, err := s.GetChannel(ctx(t), owner.ID, general); err != nil || g.MemberCount != 1 {
			t.Fatalf("#general after the newcomer left = %+v, %v", g, err)
		}

		// Owner and newcomer now share a workspace.
		users, err := s.UsersBatch(ctx(t), owner.ID, []string{newcomer.ID})
		NoErr(t, err)
		if len(users) != 1 {
			t.Fatalf("owner cannot see the newcomer")
		}

		_, err = s.AcceptInvite(ctx(t), newcomer.ID, "no-such-code")
		Code(t, err, parley.ENOTFOUND)
		_, err = s.AcceptInvite(ctx(t), newcomer.ID, "")
		Code(t, err, parley.ENOTFOUND)
	})

	register("Workspaces/InviteMaxUses", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		owner := MustUser(t, s, "mo")
		u1, u2, u3 := MustUser(t, s, "m1"), MustUser(t, s, "m2"), MustUser(t, s, "m3")
		ws := MustWorkspace(t, s, owner)
		inv, err := s.CreateInvite(ctx(t), owner.ID, ws.ID, parley.InviteParams{MaxUses: 2})
		NoErr(t, err)

		_, err = s.AcceptInvite(ctx(t), u1.ID, inv.Code)
		NoErr(t, err)
		// A member accepting again, and the owner, spend nothing.
		w, err := s.AcceptInvite(ctx(t), u1.ID, inv.Code)
		NoErr(t, err)
		if w.ID != ws.ID || w.Role != parley.RoleMember {
			t.Fatalf("re-accept = %+v", w)
		}
		w, err = s.AcceptInvite(ctx(t), owner.ID, inv.Code)
		NoErr(t, err)
		if w.Role != parley.RoleOwner {
			t.Fatalf("owner accepting their own invite = %+v", w)
		}
		if evs, _ := memberJoinedOf(t, rec, u1.ID); len(evs) != 1 {
			t.Fatalf("re-accept published %d workspace.member_joined, want 1 in all", len(evs))
		}

		_, err = s.AcceptInvite(ctx(t), u2.ID, inv.Code)
		NoErr(t, err)
		_, err = s.AcceptInvite(ctx(t), u3.ID, inv.Code)
		Code(t, err, parley.ENOTFOUND)
		_, err = s.GetWorkspace(ctx(t), u3.ID, ws.ID)
		Code(t, err, parley.ENOTFOUND)
		// A used-up code is gone for members too.
		_, err = s.AcceptInvite(ctx(t), u1.ID, inv.Code)
		Code(t, err, parley.ENOTFOUND)
	})

	register("Workspaces/InviteRace", func(t *testing.T, open Opener) {
		s := open(t, nil)
		owner := MustUser(t, s, "ro")
		ws := MustWorkspace(t, s, owner)
		inv, err := s.CreateInvite(ctx(t), owner.ID, ws.ID, parley.InviteParams{MaxUses: 3})
		NoErr(t, err)
		const n = 8
		users := make([]*parley.User, n)
		for i := range users {
			users[i] = MustUser(t, s, "racer")
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.AcceptInvite(ctx(t), users[i].ID, inv.Code)
			}()
		}
		wg.Wait()
		joined := 0
		for _, err := range errs {
			switch parley.ErrorCode(err) {
			case "":
				joined++
			case parley.ENOTFOUND:
			default:
				t.Fatalf("racing accept: %v", err)
			}
		}
		if joined != 3 {
			t.Fatalf("%d users joined with a 3-use invite", joined)
		}
	})

	register("Workspaces/InviteExpiry", func(t *testing.T, open Opener) {
		s := open(t, nil)
		owner, late := MustUser(t, s, "eo"), MustUser(t, s, "el")
		ws := MustWorkspace(t, s, owner)
		inv, err := s.CreateInvite(ctx(t), owner.ID, ws.ID, parley.InviteParams{ExpiresInS: 1})
		NoErr(t, err)
		// The owner is a member, so probing spends nothing; wait until the
		// code has expired.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := s.AcceptInvite(ctx(t), owner.ID, inv.Code)
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				break
			}
			NoErr(t, err)
			if time.Now().After(deadline) {
				t.Fatalf("invite still valid long after expiry")
			}
			time.Sleep(50 * time.Millisecond)
		}
		_, err = s.AcceptInvite(ctx(t), late.ID, inv.Code)
		Code(t, err, parley.ENOTFOUND)
	})

	register("Workspaces/InviteArchivedGeneral", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		owner, newcomer := MustUser(t, s, "go"), MustUser(t, s, "gn")
		ws := MustWorkspace(t, s, owner)
		general := generalOf(t, rec, ws)
		_, err := s.ArchiveChannel(ctx(t), owner.ID, general)
		NoErr(t, err)
		MustJoinWorkspace(t, s, ws, owner, newcomer)
		if g, err := s.GetChannel(ctx(t), newcomer.ID, general); err == nil && g.IsMember {
			t.Fatalf("newcomer joined an archived #general")
		}
		evs, ds := memberJoinedOf(t, rec, newcomer.ID)
		if len(evs) != 1 || len(ds[0].Channels) != 0 {
			t.Fatalf("workspace.member_joined = %+v: joined %+v", evs, ds[0].Channels)
		}
	})

	register("Workspaces/MemberRoles", func(t *testing.T, open Opener) {
		s := open(t, nil)
		owner, admin, member, outsider := MustUser(t, s, "ro"), MustUser(t, s, "ra"), MustUser(t, s, "rm"), MustUser(t, s, "rx")
		ws := MustWorkspace(t, s, owner)
		MustJoinWorkspace(t, s, ws, owner, admin)
		MustJoinWorkspace(t, s, ws, owner, member)

		NoErr(t, s.SetMemberRole(ctx(t), owner.ID, ws.ID, admin.ID, parley.RoleAdmin))
		if w, _ := s.GetWorkspace(ctx(t), admin.ID, ws.ID); w == nil || w.Role != parley.RoleAdmin {
			t.Fatalf("promoted admin sees %+v", w)
		}
		// Admins manage roles too.
		NoErr(t, s.SetMemberRole(ctx(t), admin.ID, ws.ID, member.ID, parley.RoleGuest))
		if w, _ := s.GetWorkspace(ctx(t), member.ID, ws.ID); w == nil || w.Role != parley.RoleGuest {
			t.Fatalf("guest sees %+v", w)
		}
		Code(t, s.SetMemberRole(ctx(t), member.ID, ws.ID, admin.ID, parley.RoleMember), parley.EFORBIDDEN)
		NoErr(t, s.SetMemberRole(ctx(t), admin.ID, ws.ID, member.ID, parley.RoleMember))
		Code(t, s.SetMemberRole(ctx(t), member.ID, ws.ID, admin.ID, parley.RoleMember), parley.EFORBIDDEN)

		Code(t, s.SetMemberRole(ctx(t), outsider.ID, ws.ID, member.ID, parley.RoleAdmin), parley.ENOTFOUND)
		Code(t, s.SetMemberRole(ctx(t), admin.ID, ws.ID, member.ID, parley.RoleOwner), parley.EINVALID)
		Code(t, s.SetMemberRole(ctx(t), admin.ID, ws.ID, member.ID, parley.Role("king")), parley.EINVALID)
		Code(t, s.SetMemberRole(ctx(t), admin.ID, ws.ID, outsider.ID, parley.RoleMember), parley.ENOTFOUND)
		Code(t, s.SetMemberRole(ctx(t), admin.ID, ws.ID, owner.ID, parley.RoleMember), parley.EFORBIDDEN)
		Code(t, s.SetMemberRole(ctx(t), owner.ID, ws.ID, owner.ID, parley.RoleAdmin), parley.EFORBIDDEN)
		if w, _ := s.GetWorkspace(ctx(t), owner.ID, ws.ID); w == nil || w.Role != parley.RoleOwner {
			t.Fatalf("owner sees %+v", w)
		}
	})
}
