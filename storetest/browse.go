package storetest

import (
	"testing"

	"parley"
)

func init() {
	register("Channels/Browse", testBrowseChannels)
}

// testBrowseChannels: the channel browser shows public channels to members,
// private ones only to their members, guests only their own channels, never
// DMs, and pages by name with a name-prefix filter.
func testBrowseChannels(t *testing.T, open Opener) {
	s := open(t, nil)
	c := ctx(t)
	owner, member, guest, outsider := MustUser(t, s, "owner"), MustUser(t, s, "member"), MustUser(t, s, "guest"), MustUser(t, s, "outsider")
	ws := MustWorkspace(t, s, owner)
	MustJoinWorkspace(t, s, ws, owner, member)
	MustJoinWorkspace(t, s, ws, owner, guest)
	NoErr(t, s.SetMemberRole(c, owner.ID, ws.ID, guest.ID, parley.RoleGuest))
	other := MustWorkspace(t, s, outsider)
	MustChannel(t, s, other, outsider, "elsewhere", parley.KindPublic)

	for _, n := range []string{"alpha", "beta", "gamma", "delta"} {
		MustChannel(t, s, ws, owner, n, parley.KindPublic)
	}
	secret := MustChannel(t, s, ws, owner, "secret", parley.KindPrivate)
	_, err := s.AddMembers(c, owner.ID, secret.ID, []string{guest.ID})
	NoErr(t, err)
	_, _, err = s.OpenDM(c, owner.ID, ws.ID, []string{member.ID})
	NoErr(t, err)

	names := func(actor *parley.User, q parley.ChannelQuery) []string {
		t.Helper()
		var out []string
		for {
			page, err := s.ListChannels(c, actor.ID, ws.ID, q)
			NoErr(t, err)
			for _, ch := range page.Channels {
				out = append(out, ch.Name)
			}
			if page.NextCursor == "" {
				return out
			}
			q.Cursor = page.NextCursor
		}
	}
	eq := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	}
	eq(names(owner, parley.ChannelQuery{Limit: 2}), "alpha", "beta", "delta", "gamma", "general", "secret")
	eq(names(member, parley.ChannelQuery{}), "alpha", "beta", "delta", "gamma", "general")
	// The guest joined #general with the invite, before becoming a guest.
	eq(names(guest, parley.ChannelQuery{}), "general", "secret")
	eq(names(owner, parley.ChannelQuery{Q: "#g"}), "gamma", "general")
	eq(names(owner, parley.ChannelQuery{Q: "%"}))

	page, err := s.ListChannels(c, member.ID, ws.ID, parley.ChannelQuery{Q: "general"})
	NoErr(t, err)
	if len(page.Channels) != 1 || !page.Channels[0].IsMember || page.Channels[0].MemberCount != 3 {
		t.Fatalf("member's view of #general: %+v", page.Channels)
	}

	_, err = s.ListChannels(c, outsider.ID, ws.ID, parley.ChannelQuery{})
	Code(t, err, parley.ENOTFOUND)
	_, err = s.ListChannels(c, owner.ID, ws.ID, parley.ChannelQuery{Cursor: "!!"})
	Code(t, err, parley.EINVALID)
}
