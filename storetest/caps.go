package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"parley"
)

// Contract tests of parley.Caps: each cap holds at its boundary, refuses
// with ELIMIT past it, changes nothing when it refuses, and holds when many
// writes race for the last place (the store must check inside the write,
// under a lock, not before it).

// CapsOpener returns a new, empty store with the given caps.
type CapsOpener func(tb testing.TB, caps parley.Caps) parley.Store

// capsTests are the caps contract tests, in the order they run.
var capsTests = []struct {
	name string
	fn   func(t *testing.T, open CapsOpener)
}{
	{"Reactions", testReactionCap},
	{"Pins", testPinCap},
	{"PrivateMembers", testPrivateMemberCap},
	{"Channels", testChannelCap},
	{"Invites", testInviteCap},
	{"Defaults", testCapDefaults},
	{"Overrides", testCapOverrides},
	{"MembersRace", testMemberCapRace},
}

// RunCaps runs the caps contract tests against stores made by open.
func RunCaps(t *testing.T, open CapsOpener) {
	for _, c := range capsTests {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// racers is how many writes race for the last places of a cap.
const racers = 12

// race runs fn(i) for i in [0, racers) concurrently and counts the
// successes; any error other than ELIMIT fails the test.
func race(t *testing.T, fn func(i int) error) int {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ok   int
		errs []error
	)
	for i := range racers {
		wg.Go(func() {
			err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			switch parley.ErrorCode(err) {
			case "":
				ok++
			case parley.ELIMIT:
			default:
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("racing write: %v", err)
	}
	return ok
}

// capsEnv is a workspace with an owner and a public channel.
func capsEnv(t *testing.T, s parley.Store) (*parley.User, *parley.Workspace, *parley.Channel) {
	t.Helper()
	owner := MustUser(t, s, "owner")
	ws := MustWorkspace(t, s, owner)
	return owner, ws, MustChannel(t, s, ws, owner, "capped", parley.KindPublic)
}

func testReactionCap(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{ReactionsPerMessage: 3})
	owner, ws, ch := capsEnv(t, s)
	bob := MustUser(t, s, "bob")
	MustJoinWorkspace(t, s, ws, owner, bob)
	_, err := s.JoinChannel(ctx(t), bob.ID, ch.ID)
	NoErr(t, err)
	m := MustPost(t, s, owner, ch, "react to me")
	for _, e := range []string{"a", "b", "c"} {
		_, err := s.AddReaction(ctx(t), owner.ID, m.ID, e)
		NoErr(t, err)
	}
	_, err = s.AddReaction(ctx(t), owner.ID, m.ID, "d")
	Code(t, err, parley.ELIMIT)
	// At the cap, an emoji already there may still be added by others, and
	// adding one's own again stays a no-op.
	got, err := s.AddReaction(ctx(t), bob.ID, m.ID, "a")
	NoErr(t, err)
	_, err = s.AddReaction(ctx(t), owner.ID, m.ID, "a")
	NoErr(t, err)
	if len(got.Reactions) != 3 || got.Reactions[0].Count != 2 {
		t.Fatalf("reactions %+v", got.Reactions)
	}
	// Removing the last of an emoji frees its place.
	_, err = s.RemoveReaction(ctx(t), owner.ID, m.ID, "c")
	NoErr(t, err)
	_, err = s.AddReaction(ctx(t), owner.ID, m.ID, "d")
	NoErr(t, err)

	// Many new emoji race for the places of a fresh message.
	m2 := MustPost(t, s, owner, ch, "race")
	n := race(t, func(i int) error {
		_, err := s.AddReaction(ctx(t), owner.ID, m2.ID, fmt.Sprintf("e%d", i))
		return err
	})
	after, err := s.GetMessage(ctx(t), owner.ID, m2.ID)
	NoErr(t, err)
	if n != 3 || len(after.Reactions) != 3 {
		t.Fatalf("%d racing reactions succeeded, message has %d distinct; want 3 and 3", n, len(after.Reactions))
	}
}

func testPinCap(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{PinsPerChannel: 2})
	owner, w, ch := capsEnv(t, s)
	var msgs []*parley.Message
	for i := range racers {
		msgs = append(msgs, MustPost(t, s, owner, ch, fmt.Sprintf("m%d", i)))
	}
	for _, m := range msgs[:2] {
		_, err := s.Pin(ctx(t), owner.ID, m.ID)
		NoErr(t, err)
	}
	_, err := s.Pin(ctx(t), owner.ID, msgs[2].ID)
	Code(t, err, parley.ELIMIT)
	_, err = s.Pin(ctx(t), owner.ID, msgs[0].ID) // pinned already: a no-op
	NoErr(t, err)
	_, err = s.Unpin(ctx(t), owner.ID, msgs[0].ID)
	NoErr(t, err)
	_, err = s.Pin(ctx(t), owner.ID, msgs[2].ID)
	NoErr(t, err)

	// Every message races for the places of another channel.
	ch2 := MustChannel(t, s, w, owner, "capped-2", parley.KindPublic)
	var msgs2 []*parley.Message
	for i := range racers {
		msgs2 = append(msgs2, MustPost(t, s, owner, ch2, fmt.Sprintf("m%d", i)))
	}
	n := race(t, func(i int) error {
		_, err := s.Pin(ctx(t), owner.ID, msgs2[i].ID)
		return err
	})
	pins, err := s.ListPins(ctx(t), owner.ID, ch2.ID)
	NoErr(t, err)
	if n != 2 || len(pins.Messages) != 2 {
		t.Fatalf("%d racing pins succeeded, channel has %d; want 2 and 2", n, len(pins.Messages))
	}
}

func testPrivateMemberCap(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{PrivateChannelMembers: 3})
	owner, w, pub := capsEnv(t, s)
	var users []*parley.User
	for range racers {
		u := MustUser(t, s, "user")
		MustJoinWorkspace(t, s, w, owner, u)
		users = append(users, u)
	}
	priv := MustChannel(t, s, w, owner, "secret", parley.KindPrivate)
	// Creator + 2 is the cap; one more, alone or in a batch, is refused
	// and the batch adds nobody.
	_, err := s.AddMembers(ctx(t), owner.ID, priv.ID, []string{users[0].ID})
	NoErr(t, err)
	_, err = s.AddMembers(ctx(t), owner.ID, priv.ID, []string{users[1].ID, users[2].ID})
	Code(t, err, parley.ELIMIT)
	got, err := s.GetChannel(ctx(t), owner.ID, priv.ID)
	NoErr(t, err)
	if got.MemberCount != 2 {
		t.Fatalf("member_count %d after a refused batch, want 2", got.MemberCount)
	}
	ch, err := s.AddMembers(ctx(t), owner.ID, priv.ID, []string{users[1].ID, users[0].ID})
	NoErr(t, err)
	if ch.MemberCount != 3 {
		t.Fatalf("member_count %d, want 3", ch.MemberCount)
	}
	// Public channels are not capped.
	for _, u := range users[:4] {
		_, err := s.JoinChannel(ctx(t), u.ID, pub.ID)
		NoErr(t, err)
	}

	priv2 := MustChannel(t, s, w, owner, "secret-2", parley.KindPrivate)
	n := race(t, func(i int) error {
		_, err := s.AddMembers(ctx(t), owner.ID, priv2.ID, []string{users[i].ID})
		return err
	})
	got, err = s.GetChannel(ctx(t), owner.ID, priv2.ID)
	NoErr(t, err)
	if n != 2 || got.MemberCount != 3 {
		t.Fatalf("%d racing adds succeeded, member_count %d; want 2 and 3", n, got.MemberCount)
	}
}

func testChannelCap(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{ChannelsPerWorkspace: 3})
	owner, w, ch := capsEnv(t, s) // #general and #capped
	create := func(name string, kind parley.ChannelKind) error {
		_, err := s.CreateChannel(ctx(t), owner.ID, w.ID, parley.NewChannel{Name: name, Kind: kind})
		return err
	}
	NoErr(t, create("third", parley.KindPrivate))
	Code(t, create("fourth", parley.KindPublic), parley.ELIMIT)
	// Archiving frees a place; DMs never take one.
	_, err := s.ArchiveChannel(ctx(t), owner.ID, ch.ID)
	NoErr(t, err)
	bob := MustUser(t, s, "bob")
	MustJoinWorkspace(t, s, w, owner, bob)
	_, _, err = s.OpenDM(ctx(t), owner.ID, w.ID, []string{bob.ID})
	NoErr(t, err)
	NoErr(t, create("fourth", parley.KindPublic))

	owner2 := MustUser(t, s, "owner")
	w2 := MustWorkspace(t, s, owner2) // #general
	n := race(t, func(i int) error {
		_, err := s.CreateChannel(ctx(t), owner2.ID, w2.ID, parley.NewChannel{Name: fmt.Sprintf("race-%d", i), Kind: parley.KindPublic})
		return err
	})
	list, err := s.ListChannels(ctx(t), owner2.ID, w2.ID, parley.ChannelQuery{Limit: 100})
	NoErr(t, err)
	if n != 2 || len(list.Channels) != 3 {
		t.Fatalf("%d racing creates succeeded, workspace has %d channels; want 2 and 3", n, len(list.Channels))
	}
}

func testInviteCap(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{InvitesPerWorkspace: 2})
	owner, w, _ := capsEnv(t, s)
	one, err := s.CreateInvite(ctx(t), owner.ID, w.ID, parley.InviteParams{MaxUses: 1})
	NoErr(t, err)
	_, err = s.CreateInvite(ctx(t), owner.ID, w.ID, parley.InviteParams{})
	NoErr(t, err)
	_, err = s.CreateInvite(ctx(t), owner.ID, w.ID, parley.InviteParams{})
	Code(t, err, parley.ELIMIT)
	// A used-up invite is not outstanding.
	bob := MustUser(t, s, "bob")
	_, err = s.AcceptInvite(ctx(t), bob.ID, one.Code)
	NoErr(t, err)
	_, err = s.CreateInvite(ctx(t), owner.ID, w.ID, parley.InviteParams{})
	NoErr(t, err)

	owner2 := MustUser(t, s, "owner")
	w2 := MustWorkspace(t, s, owner2)
	n := race(t, func(int) error {
		_, err := s.CreateInvite(ctx(t), owner2.ID, w2.ID, parley.InviteParams{})
		return err
	})
	if n != 2 {
		t.Fatalf("%d racing invites succeeded, want 2", n)
	}
}

// testCapDefaults: the zero Caps are the documented defaults, checked at
// the cheapest boundary (reactions).
func testCapDefaults(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{})
	owner, _, ch := capsEnv(t, s)
	m := MustPost(t, s, owner, ch, "many")
	for i := range parley.DefaultReactionsPerMessage {
		_, err := s.AddReaction(ctx(t), owner.ID, m.ID, fmt.Sprintf("r%d", i))
		NoErr(t, err)
	}
	_, err := s.AddReaction(ctx(t), owner.ID, m.ID, "one-more")
	Code(t, err, parley.ELIMIT)
}

// overrides returns a context whose limits lookup gives workspace ws the
// limits lim (parley.WithLimitsLookup, as the API sets it from the
// directory); other workspaces get none.
func overrides(t *testing.T, ws string, lim map[string]int64) context.Context {
	return parley.WithLimitsLookup(ctx(t), func(_ context.Context, id string) parley.WorkspaceLimits {
		if id != ws {
			return parley.WorkspaceLimits{}
		}
		return parley.WorkspaceLimits{Limits: lim}
	})
}

// testCapOverrides: a workspace's overrides carried in the context replace
// the store's caps for that workspace only, for members (invite accept,
// import), channels and invites.
func testCapOverrides(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{})
	owner, w, _ := capsEnv(t, s) // #general and #capped
	owner2 := MustUser(t, s, "owner")
	w2 := MustWorkspace(t, s, owner2)
	c := overrides(t, w.ID, map[string]int64{parley.LimitMembers: 2, parley.LimitChannels: 3, parley.LimitInvites: 2})

	// Channels: the third active one passes, the fourth is refused; the
	// other workspace keeps the default.
	_, err := s.CreateChannel(c, owner.ID, w.ID, parley.NewChannel{Name: "third", Kind: parley.KindPublic})
	NoErr(t, err)
	_, err = s.CreateChannel(c, owner.ID, w.ID, parley.NewChannel{Name: "fourth", Kind: parley.KindPublic})
	Code(t, err, parley.ELIMIT)
	for i := range 3 {
		_, err = s.CreateChannel(c, owner2.ID, w2.ID, parley.NewChannel{Name: fmt.Sprintf("other-%d", i), Kind: parley.KindPublic})
		NoErr(t, err)
	}
	// Without the lookup the global cap holds again.
	_, err = s.CreateChannel(ctx(t), owner.ID, w.ID, parley.NewChannel{Name: "fourth", Kind: parley.KindPublic})
	NoErr(t, err)

	// Invites: two outstanding.
	inv, err := s.CreateInvite(c, owner.ID, w.ID, parley.InviteParams{})
	NoErr(t, err)
	_, err = s.CreateInvite(c, owner.ID, w.ID, parley.InviteParams{})
	NoErr(t, err)
	_, err = s.CreateInvite(c, owner.ID, w.ID, parley.InviteParams{})
	Code(t, err, parley.ELIMIT)

	// Members: the owner and one more; the third is refused, and the
	// refused accept spent nothing and joined nothing.
	bob, carol := MustUser(t, s, "bob"), MustUser(t, s, "carol")
	_, err = s.AcceptInvite(c, bob.ID, inv.Code)
	NoErr(t, err)
	_, err = s.AcceptInvite(c, carol.ID, inv.Code)
	Code(t, err, parley.ELIMIT)
	_, err = s.GetWorkspace(ctx(t), carol.ID, w.ID)
	Code(t, err, parley.ENOTFOUND)
	// A member who is already in answers as before.
	_, err = s.AcceptInvite(c, bob.ID, inv.Code)
	NoErr(t, err)
	// Import past the cap is refused too.
	if is, ok := s.(interface {
		ImportUsers(ctx context.Context, workspaceID, source string, users []parley.ImportUser) ([]parley.ImportedUser, error)
	}); ok {
		_, err = is.ImportUsers(c, w.ID, "slack", []parley.ImportUser{{ExtID: "U1", Handle: "imp1", Name: "Imp", Email: "imp1@example.com"}})
		Code(t, err, parley.ELIMIT)
	}
	// Raised: carol gets in.
	c = overrides(t, w.ID, map[string]int64{parley.LimitMembers: 3})
	_, err = s.AcceptInvite(c, carol.ID, inv.Code)
	NoErr(t, err)
}

// testMemberCapRace: many people accepting one invite at once into a
// workspace with room for two more: exactly two get in.
func testMemberCapRace(t *testing.T, open CapsOpener) {
	s := open(t, parley.Caps{})
	owner, w, _ := capsEnv(t, s)
	inv, err := s.CreateInvite(ctx(t), owner.ID, w.ID, parley.InviteParams{})
	NoErr(t, err)
	c := overrides(t, w.ID, map[string]int64{parley.LimitMembers: 3})
	users := make([]*parley.User, racers)
	for i := range users {
		users[i] = MustUser(t, s, "racer")
	}
	n := race(t, func(i int) error {
		_, err := s.AcceptInvite(c, users[i].ID, inv.Code)
		return err
	})
	if n != 2 {
		t.Fatalf("%d racing accepts succeeded, want 2 (cap 3, the owner already in)", n)
	}
}
