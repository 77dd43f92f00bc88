package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"parley"
)

// Contract tests of the account and workspace lifecycle
// (parley.LifecycleService).

// lifecycleTeam is a workspace with an owner, an admin, a member and a
// guest-less second workspace whose owner also belongs to the first.
type lifecycleTeam struct {
	ws                   *parley.Workspace
	owner, admin, member *parley.User
}

func newLifecycleTeam(t *testing.T, s parley.Store) *lifecycleTeam {
	t.Helper()
	tm := &lifecycleTeam{
		owner: MustUser(t, s, "owner"), admin: MustUser(t, s, "admin"), member: MustUser(t, s, "member"),
	}
	tm.ws = MustWorkspace(t, s, tm.owner)
	MustJoinWorkspace(t, s, tm.ws, tm.owner, tm.admin)
	MustJoinWorkspace(t, s, tm.ws, tm.owner, tm.member)
	NoErr(t, s.SetMemberRole(ctx(t), tm.owner.ID, tm.ws.ID, tm.admin.ID, parley.RoleAdmin))
	return tm
}

func hasTopic(e parley.Event, topic string) bool { return slices.Contains(e.Topics, topic) }

func roleIn(t *testing.T, s parley.Store, userID, workspaceID string) parley.Role {
	t.Helper()
	wss, err := s.ListWorkspaces(ctx(t), userID)
	NoErr(t, err)
	for _, w := range wss {
		if w.ID == workspaceID {
			return w.Role
		}
	}
	return ""
}

func init() {
	register("Lifecycle/Deactivate", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		tm := newLifecycleTeam(t, s)
		general := MustChannel(t, s, tm.ws, tm.owner, "plans", parley.KindPublic)
		_, err := s.JoinChannel(ctx(t), tm.member.ID, general.ID)
		NoErr(t, err)
		said := MustPost(t, s, tm.member, general, "I was here")
		exp := time.Now().Add(time.Hour)
		NoErr(t, s.CreateSession(ctx(t), parley.Session{TokenHash: "tok-a", UserID: tm.member.ID, ExpiresAt: exp}))
		NoErr(t, s.CreateSession(ctx(t), parley.Session{TokenHash: "tok-b", UserID: tm.member.ID, ExpiresAt: exp}))

		// Who may not.
		_, err = s.DeactivateUser(ctx(t), tm.member.ID, tm.ws.ID, tm.admin.ID)
		Code(t, err, parley.EFORBIDDEN)
		_, err = s.DeactivateUser(ctx(t), tm.admin.ID, tm.ws.ID, tm.owner.ID)
		Code(t, err, parley.EFORBIDDEN)
		_, err = s.DeactivateUser(ctx(t), tm.owner.ID, tm.ws.ID, tm.owner.ID)
		Code(t, err, parley.EINVALID)
		outsider := MustUser(t, s, "outsider")
		_, err = s.DeactivateUser(ctx(t), outsider.ID, tm.ws.ID, tm.member.ID)
		Code(t, err, parley.ENOTFOUND)
		_, err = s.DeactivateUser(ctx(t), tm.owner.ID, tm.ws.ID, outsider.ID)
		Code(t, err, parley.ENOTFOUND)

		rec.Reset()
		u, err := s.DeactivateUser(ctx(t), tm.admin.ID, tm.ws.ID, tm.member.ID)
		NoErr(t, err)
		if !u.Deactivated || u.ID != tm.member.ID || u.Email != "" {
			t.Fatalf("deactivated user = %+v", u)
		}
		for _, tok := range []string{"tok-a", "tok-b"} {
			_, err = s.SessionByToken(ctx(t), tok)
			Code(t, err, parley.EUNAUTHORIZED)
		}
		err = s.CreateSession(ctx(t), parley.Session{TokenHash: "tok-c", UserID: tm.member.ID, ExpiresAt: exp})
		Code(t, err, parley.EUNAUTHORIZED)
		evs, users := userEventsOf(t, rec, parley.EventUserDeactivated, tm.member.ID)
		if len(evs) != 1 || !users[0].Deactivated || !hasTopic(evs[0], parley.TopicUser(tm.member.ID)) ||
			!hasTopic(evs[0], parley.TopicProfile(tm.member.ID)) || !hasTopic(evs[0], parley.TopicDirectory(tm.ws.ID)) {
			t.Fatalf("user.deactivated events = %+v", evs)
		}
		// Again: a no-op, no event.
		rec.Reset()
		_, err = s.DeactivateUser(ctx(t), tm.admin.ID, tm.ws.ID, tm.member.ID)
		NoErr(t, err)
		if n := len(rec.OfType(parley.EventUserDeactivated)); n != 0 {
			t.Fatalf("deactivating again sent %d events", n)
		}

		// History keeps the name; the user object says deactivated.
		got, err := s.UsersBatch(ctx(t), tm.owner.ID, []string{tm.member.ID})
		NoErr(t, err)
		if len(got) != 1 || got[0].Name != tm.member.Name || !got[0].Deactivated {
			t.Fatalf("batch = %+v", got)
		}
		m, err := s.GetMessage(ctx(t), tm.owner.ID, said.ID)
		NoErr(t, err)
		if m.UserID != tm.member.ID || m.Text != "I was here" {
			t.Fatalf("message = %+v", m)
		}
		// A deactivated account writes nothing.
		_, err = s.CreateWorkspace(ctx(t), tm.member.ID, "Mine", "mine-"+tm.member.Handle)
		Code(t, err, parley.EFORBIDDEN)

		rec.Reset()
		u, err = s.ReactivateUser(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID)
		NoErr(t, err)
		if u.Deactivated {
			t.Fatalf("reactivated user = %+v", u)
		}
		if _, users := userEventsOf(t, rec, parley.EventUserUpdated, tm.member.ID); len(users) != 1 || users[0].Deactivated {
			t.Fatalf("user.updated after reactivation = %+v", users)
		}
		NoErr(t, s.CreateSession(ctx(t), parley.Session{TokenHash: "tok-d", UserID: tm.member.ID, ExpiresAt: exp}))
		// Old sessions stay revoked.
		_, err = s.SessionByToken(ctx(t), "tok-a")
		Code(t, err, parley.EUNAUTHORIZED)
	})

	register("Lifecycle/DeactivateAcrossWorkspaces", func(t *testing.T, open Opener) {
		s := open(t, nil)
		tm := newLifecycleTeam(t, s)
		other := MustUser(t, s, "other-owner")
		ws2 := MustWorkspace(t, s, other)
		MustJoinWorkspace(t, s, ws2, other, tm.member)
		// The admin of one workspace cannot lock the member out of another.
		_, err := s.DeactivateUser(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID)
		Code(t, err, parley.EFORBIDDEN)
		// Someone who administers both can.
		MustJoinWorkspace(t, s, ws2, other, tm.owner)
		NoErr(t, s.SetMemberRole(ctx(t), other.ID, ws2.ID, tm.owner.ID, parley.RoleAdmin))
		_, err = s.DeactivateUser(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID)
		NoErr(t, err)
		// The operator can do anything but deactivate an owner.
		_, err = s.OperatorSetDeactivated(ctx(t), other.ID, true)
		Code(t, err, parley.EFORBIDDEN)
		u, err := s.OperatorSetDeactivated(ctx(t), tm.member.ID, false)
		NoErr(t, err)
		if u.Deactivated {
			t.Fatal("operator reactivation left the user deactivated")
		}
		_, err = s.OperatorSetDeactivated(ctx(t), "u_nobody", true)
		Code(t, err, parley.ENOTFOUND)
	})

	register("Lifecycle/RemoveMember", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		tm := newLifecycleTeam(t, s)
		pub := MustChannel(t, s, tm.ws, tm.owner, "pub", parley.KindPublic)
		priv := MustChannel(t, s, tm.ws, tm.owner, "priv", parley.KindPrivate)
		_, err := s.JoinChannel(ctx(t), tm.member.ID, pub.ID)
		NoErr(t, err)
		_, err = s.AddMembers(ctx(t), tm.owner.ID, priv.ID, []string{tm.member.ID})
		NoErr(t, err)
		dm, _, err := s.OpenDM(ctx(t), tm.owner.ID, tm.ws.ID, []string{tm.member.ID})
		NoErr(t, err)
		MustPost(t, s, tm.owner, dm, "hi")

		Code(t, s.RemoveWorkspaceMember(ctx(t), tm.member.ID, tm.ws.ID, tm.admin.ID), parley.EFORBIDDEN)
		Code(t, s.RemoveWorkspaceMember(ctx(t), tm.admin.ID, tm.ws.ID, tm.owner.ID), parley.EFORBIDDEN)
		Code(t, s.RemoveWorkspaceMember(ctx(t), tm.owner.ID, tm.ws.ID, tm.owner.ID), parley.EINVALID)
		outsider := MustUser(t, s, "outsider")
		Code(t, s.RemoveWorkspaceMember(ctx(t), outsider.ID, tm.ws.ID, tm.member.ID), parley.ENOTFOUND)
		Code(t, s.RemoveWorkspaceMember(ctx(t), tm.owner.ID, tm.ws.ID, outsider.ID), parley.ENOTFOUND)

		before, err := s.GetChannel(ctx(t), tm.owner.ID, pub.ID)
		NoErr(t, err)
		rec.Reset()
		NoErr(t, s.RemoveWorkspaceMember(ctx(t), tm.admin.ID, tm.ws.ID, tm.member.ID))

		// The member.left events (to the user's own topic too) come before
		// workspace.member_left, which closes the sessions.
		evs := rec.Events()
		left := map[string]bool{}
		last := -1
		for i, e := range evs {
			switch e.Type {
			case parley.EventMemberLeft:
				var d parley.MemberEventData
				NoErr(t, json.Unmarshal(e.Data, &d))
				if d.UserID == tm.member.ID && hasTopic(e, parley.TopicUser(tm.member.ID)) {
					left[e.ChannelID] = true
				}
			case parley.EventWorkspaceMemberLeft:
				if !hasTopic(e, parley.TopicUser(tm.member.ID)) || !hasTopic(e, parley.TopicAdmins(tm.ws.ID)) {
					t.Fatalf("workspace.member_left topics = %v", e.Topics)
				}
				last = i
			}
		}
		if !left[pub.ID] || !left[priv.ID] || left[dm.ID] || last != len(evs)-1 {
			t.Fatalf("left %v, workspace.member_left at %d of %d", left, last, len(evs))
		}
		after, err := s.GetChannel(ctx(t), tm.owner.ID, pub.ID)
		NoErr(t, err)
		if after.MemberCount != before.MemberCount-1 {
			t.Fatalf("member count %d -> %d", before.MemberCount, after.MemberCount)
		}
		// Nothing of the workspace is readable any more.
		_, err = s.GetWorkspace(ctx(t), tm.member.ID, tm.ws.ID)
		Code(t, err, parley.ENOTFOUND)
		for _, ch := range []*parley.Channel{pub, priv, dm} {
			_, err = s.GetChannel(ctx(t), tm.member.ID, ch.ID)
			Code(t, err, parley.ENOTFOUND)
		}
		if r := roleIn(t, s, tm.member.ID, tm.ws.ID); r != "" {
			t.Fatalf("still in the workspace as %q", r)
		}
		// The DM stays readable for the other side.
		_, err = s.GetChannel(ctx(t), tm.owner.ID, dm.ID)
		NoErr(t, err)
		Code(t, s.RemoveWorkspaceMember(ctx(t), tm.admin.ID, tm.ws.ID, tm.member.ID), parley.ENOTFOUND)
		// Invited again, they are a member again.
		MustJoinWorkspace(t, s, tm.ws, tm.owner, tm.member)
		if r := roleIn(t, s, tm.member.ID, tm.ws.ID); r != parley.RoleMember {
			t.Fatalf("rejoined as %q", r)
		}
	})

	register("Lifecycle/TransferOwnership", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		tm := newLifecycleTeam(t, s)
		Code(t, s.TransferOwnership(ctx(t), tm.admin.ID, tm.ws.ID, tm.member.ID), parley.EFORBIDDEN)
		Code(t, s.TransferOwnership(ctx(t), tm.owner.ID, tm.ws.ID, tm.owner.ID), parley.EINVALID)
		Code(t, s.TransferOwnership(ctx(t), tm.owner.ID, tm.ws.ID, "u_nobody"), parley.ENOTFOUND)
		NoErr(t, s.SetMemberRole(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID, parley.RoleGuest))
		Code(t, s.TransferOwnership(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID), parley.EINVALID)
		NoErr(t, s.SetMemberRole(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID, parley.RoleMember))

		rec.Reset()
		NoErr(t, s.TransferOwnership(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID))
		owners := 0
		for _, u := range []*parley.User{tm.owner, tm.admin, tm.member} {
			if roleIn(t, s, u.ID, tm.ws.ID) == parley.RoleOwner {
				owners++
			}
		}
		if owners != 1 || roleIn(t, s, tm.member.ID, tm.ws.ID) != parley.RoleOwner ||
			roleIn(t, s, tm.owner.ID, tm.ws.ID) != parley.RoleAdmin {
			t.Fatalf("after transfer: %d owners", owners)
		}
		upd := rec.OfType(parley.EventWorkspaceMemberUpdated)
		if len(upd) != 2 {
			t.Fatalf("workspace.member_updated events = %d, want 2", len(upd))
		}
		// The old owner, now an admin, cannot give it away again.
		Code(t, s.TransferOwnership(ctx(t), tm.owner.ID, tm.ws.ID, tm.admin.ID), parley.EFORBIDDEN)
		// The new owner cannot be deactivated.
		_, err := s.DeactivateUser(ctx(t), tm.owner.ID, tm.ws.ID, tm.member.ID)
		Code(t, err, parley.EFORBIDDEN)
	})

	register("Lifecycle/DeleteWorkspace", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		tm := newLifecycleTeam(t, s)
		ch := MustChannel(t, s, tm.ws, tm.owner, "doomed", parley.KindPublic)
		for i := 0; i < 7; i++ {
			MustPost(t, s, tm.owner, ch, "message")
		}
		Code(t, s.DeleteWorkspace(ctx(t), tm.admin.ID, tm.ws.ID, tm.ws.Slug), parley.EFORBIDDEN)
		Code(t, s.DeleteWorkspace(ctx(t), tm.owner.ID, tm.ws.ID, "not-the-slug"), parley.EINVALID)
		Code(t, s.DeleteWorkspace(ctx(t), MustUser(t, s, "x").ID, tm.ws.ID, tm.ws.Slug), parley.ENOTFOUND)
		_, err := s.PurgeWorkspace(ctx(t), tm.ws.ID, 10)
		Code(t, err, parley.ECONFLICT)

		rec.Reset()
		NoErr(t, s.DeleteWorkspace(ctx(t), tm.owner.ID, tm.ws.ID, tm.ws.Slug))
		dels := rec.OfType(parley.EventWorkspaceDeleted)
		if len(dels) != 1 || dels[0].WorkspaceID != tm.ws.ID {
			t.Fatalf("workspace.deleted events = %+v", dels)
		}
		for _, u := range []*parley.User{tm.owner, tm.admin, tm.member} {
			if !hasTopic(dels[0], parley.TopicUser(u.ID)) {
				t.Fatalf("workspace.deleted topics %v miss %s", dels[0].Topics, u.Handle)
			}
			_, err := s.GetWorkspace(ctx(t), u.ID, tm.ws.ID)
			Code(t, err, parley.ENOTFOUND)
			_, err = s.GetChannel(ctx(t), u.ID, ch.ID)
			Code(t, err, parley.ENOTFOUND)
		}
		// The slug is free again.
		again, err := s.CreateWorkspace(ctx(t), tm.owner.ID, "Again", tm.ws.Slug)
		NoErr(t, err)
		deleted, err := s.DeletedWorkspaces(ctx(t))
		NoErr(t, err)
		if !slices.Contains(deleted, tm.ws.ID) || slices.Contains(deleted, again.ID) {
			t.Fatalf("deleted workspaces = %v", deleted)
		}
		calls := 0
		for {
			done, err := s.PurgeWorkspace(ctx(t), tm.ws.ID, 3)
			NoErr(t, err)
			calls++
			if done {
				break
			}
			if calls > 1000 {
				t.Fatal("purge does not finish")
			}
		}
		if calls < 4 {
			t.Fatalf("purge took %d calls of 3 rows: not batched", calls)
		}
		deleted, err = s.DeletedWorkspaces(ctx(t))
		NoErr(t, err)
		if slices.Contains(deleted, tm.ws.ID) {
			t.Fatal("purged workspace still listed as deleted")
		}
		done, err := s.PurgeWorkspace(ctx(t), tm.ws.ID, 3)
		NoErr(t, err)
		if !done {
			t.Fatal("purging a purged workspace is not done")
		}
		// The new workspace is untouched.
		_, err = s.GetWorkspace(ctx(t), tm.owner.ID, again.ID)
		NoErr(t, err)
	})
}

func init() {
	registerHarness("Lifecycle/PurgeLeavesNoRows", func(t *testing.T, h Harness) {
		s := h.Open(t, nil, nil)
		tm := newLifecycleTeam(t, s)
		ch := MustChannel(t, s, tm.ws, tm.owner, "doomed", parley.KindPublic)
		_, err := s.JoinChannel(ctx(t), tm.member.ID, ch.ID)
		NoErr(t, err)
		root := MustPost(t, s, tm.owner, ch, "root")
		_, _, err = s.PostMessage(ctx(t), tm.member.ID, ch.ID, parley.NewMessage{Text: "reply", ThreadRootID: root.ID})
		NoErr(t, err)
		_, err = s.AddReaction(ctx(t), tm.member.ID, root.ID, "tada")
		NoErr(t, err)
		_, err = s.Pin(ctx(t), tm.owner.ID, root.ID)
		NoErr(t, err)
		NoErr(t, s.DeleteWorkspace(ctx(t), tm.owner.ID, tm.ws.ID, tm.ws.Slug))
		for {
			done, err := s.PurgeWorkspace(ctx(t), tm.ws.ID, 2)
			NoErr(t, err)
			if done {
				break
			}
		}
		// The store held this workspace only: every table of it is empty.
		for _, table := range []string{"workspaces", "orgs", "workspace_members", "channels", "channel_stats",
			"channel_members", "messages", "reactions", "pins", "events", "threads", "thread_memberships", "mentions", "invites"} {
			if n := h.Rows(t, s, table); n != 0 {
				t.Errorf("%s has %d rows after the purge", table, n)
			}
		}
	})
}
