package storetest

import (
	"sync/atomic"
	"testing"

	"parley"
)

var userSeq atomic.Int64

// MustUser creates a user with a unique handle derived from name.
func MustUser(tb testing.TB, s parley.Store, name string) *parley.User {
	tb.Helper()
	n := userSeq.Add(1)
	handle := name + "-" + itoa(n)
	u, err := s.CreateUser(ctx(tb), parley.NewUser{
		Email:        handle + "@example.com",
		Name:         name,
		Handle:       handle,
		PasswordHash: "not-a-real-hash",
	})
	if err != nil {
		tb.Fatalf("create user %s: %v", handle, err)
	}
	return u
}

// MustWorkspace creates a workspace owned by owner.
func MustWorkspace(tb testing.TB, s parley.Store, owner *parley.User) *parley.Workspace {
	tb.Helper()
	n := userSeq.Add(1)
	ws, err := s.CreateWorkspace(ctx(tb), owner.ID, "Team "+itoa(n), "team-"+itoa(n))
	if err != nil {
		tb.Fatalf("create workspace: %v", err)
	}
	return ws
}

// MustJoinWorkspace adds u to ws through an invite made by inviter.
func MustJoinWorkspace(tb testing.TB, s parley.Store, ws *parley.Workspace, inviter, u *parley.User) {
	tb.Helper()
	inv, err := s.CreateInvite(ctx(tb), inviter.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		tb.Fatalf("create invite: %v", err)
	}
	if _, err := s.AcceptInvite(ctx(tb), u.ID, inv.Code); err != nil {
		tb.Fatalf("accept invite: %v", err)
	}
}

// MustChannel creates a channel of the given kind in ws, made by creator.
func MustChannel(tb testing.TB, s parley.Store, ws *parley.Workspace, creator *parley.User, name string, kind parley.ChannelKind) *parley.Channel {
	tb.Helper()
	ch, err := s.CreateChannel(ctx(tb), creator.ID, ws.ID, parley.NewChannel{Name: name, Kind: kind})
	if err != nil {
		tb.Fatalf("create channel %s: %v", name, err)
	}
	return ch
}

// MustPost posts text into ch as u.
func MustPost(tb testing.TB, s parley.Store, u *parley.User, ch *parley.Channel, text string) *parley.Message {
	tb.Helper()
	m, _, err := s.PostMessage(ctx(tb), u.ID, ch.ID, parley.NewMessage{Text: text})
	if err != nil {
		tb.Fatalf("post: %v", err)
	}
	return m
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
