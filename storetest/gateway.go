package storetest

import (
	"testing"

	"parley"
)

func init() {
	register("Gateway/SessionChannels", testSessionChannels)
	register("Gateway/ChannelLog", testChannelLog)
}

// testSessionChannels: a session follows exactly the channels its user is a
// member of in that workspace, DMs included, with their last seqs.
func testSessionChannels(t *testing.T, open Opener) {
	s := open(t, nil)
	c := ctx(t)
	a, b, x := MustUser(t, s, "a"), MustUser(t, s, "b"), MustUser(t, s, "x")
	ws := MustWorkspace(t, s, a)
	MustJoinWorkspace(t, s, ws, a, b)
	pub := MustChannel(t, s, ws, a, "pub", parley.KindPublic)
	priv := MustChannel(t, s, ws, a, "priv", parley.KindPrivate)
	dm, _, err := s.OpenDM(c, a.ID, ws.ID, []string{b.ID})
	NoErr(t, err)
	MustPost(t, s, a, pub, "one")
	MustPost(t, s, a, pub, "two")

	refs, err := s.SessionChannels(c, b.ID, ws.ID)
	NoErr(t, err)
	got := map[string]parley.ChannelRef{}
	for _, r := range refs {
		got[r.ID] = r
	}
	// b is in #general (invite) and the DM, not in pub or priv.
	if len(got) != 2 || got[dm.ID].Kind != parley.KindDM || got[pub.ID].ID != "" || got[priv.ID].ID != "" {
		t.Fatalf("b's channels: %+v", refs)
	}
	refs, err = s.SessionChannels(c, a.ID, ws.ID)
	NoErr(t, err)
	for _, r := range refs {
		if r.ID == pub.ID && r.LastSeq != 3 {
			t.Fatalf("pub last seq %d, want 3", r.LastSeq)
		}
	}
	if len(refs) != 4 {
		t.Fatalf("a's channels: %+v", refs)
	}
	_, err = s.SessionChannels(c, x.ID, ws.ID)
	Code(t, err, parley.ENOTFOUND)

	ok, err := s.ChannelMember(c, b.ID, priv.ID)
	NoErr(t, err)
	if ok {
		t.Fatal("b is reported a member of priv")
	}
	_, err = s.AddMembers(c, a.ID, priv.ID, []string{b.ID})
	NoErr(t, err)
	if ok, err = s.ChannelMember(c, b.ID, priv.ID); err != nil || !ok {
		t.Fatalf("b after being added: %v %v", ok, err)
	}
}

// testChannelLog: the server-side log read pages by seq with no actor.
func testChannelLog(t *testing.T, open Opener) {
	s := open(t, nil)
	c := ctx(t)
	a := MustUser(t, s, "a")
	ws := MustWorkspace(t, s, a)
	ch := MustChannel(t, s, ws, a, "log", parley.KindPrivate)
	for i := 0; i < 5; i++ {
		MustPost(t, s, a, ch, "m")
	}
	evs, err := s.ChannelLog(c, ch.ID, 2, 2)
	NoErr(t, err)
	if len(evs) != 2 || evs[0].Seq != 3 || evs[1].Seq != 4 || evs[0].Type != parley.EventMessageCreated || evs[0].WorkspaceID != ws.ID {
		t.Fatalf("log page: %+v", evs)
	}
	evs, err = s.ChannelLog(c, ch.ID, 6, 10)
	NoErr(t, err)
	if len(evs) != 0 {
		t.Fatalf("past the end: %+v", evs)
	}
	_, err = s.ChannelLog(c, "Cnope", 0, 10)
	Code(t, err, parley.ENOTFOUND)
}
