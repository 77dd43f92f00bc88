package querycache

import (
	"strings"
	"sync/atomic"
	"time"

	"parley"
)

// userRec is one version of a user. It is immutable once published: an
// update stores a new userRec in the sharedUser.
type userRec struct {
	id, handle, name, title, avatar string
	// nameLower is the name folded for matching; the same string as name
	// when the name has no upper case.
	nameLower   string
	status      *parley.Status // may have expired: checked when read
	deactivated bool
	bot         bool  // is_bot: an integration's user
	created     int64 // unix µs
	updated     int64 // unix µs; orders versions of the user
}

func newUserRec(u *parley.User) *userRec {
	r := &userRec{
		id: u.ID, handle: u.Handle, name: u.Name, title: u.Title, avatar: u.AvatarHash,
		deactivated: u.Deactivated,
		bot:         u.IsBot,
		created:     u.CreatedAt.UnixMicro(),
		updated:     u.UpdatedAt.UnixMicro(),
	}
	r.nameLower = foldName(u.Name)
	if u.Status != nil {
		st := *u.Status
		r.status = &st
	}
	return r
}

// user returns the public view of the user (no email) as of now.
func (r *userRec) user(now time.Time) parley.User {
	u := parley.User{
		ID: r.id, Name: r.name, Handle: r.handle, Title: r.title, AvatarHash: r.avatar,
		Deactivated: r.deactivated,
		IsBot:       r.bot,
		CreatedAt:   time.UnixMicro(r.created).UTC(),
		UpdatedAt:   time.UnixMicro(r.updated).UTC(),
	}
	if st := r.status; st != nil && (st.ExpiresAt == nil || st.ExpiresAt.After(now)) {
		cp := *st
		u.Status = &cp
	}
	return u
}

// key is what a workspace indexes the user by.
func (r *userRec) key() userKey {
	return userKey{handle: r.handle, name: r.nameLower, mask: maskOf(r.handle) | maskOf(r.nameLower)}
}

// sharedUser is a user as the node holds it: once, whatever the number of
// warm workspaces the user is in.
type sharedUser struct {
	rec  atomic.Pointer[userRec]
	refs int32 // workspaces holding it; guarded by Cache.writeMu
}

// userKey is a workspace's copy of what it indexes a user by. Workspaces
// keep their own copy (sharing the string bytes with the userRec) so that an
// update of the shared record never leaves a workspace's sorted indexes out
// of order: each workspace re-indexes the user when it applies the event.
type userKey struct {
	handle string
	name   string // folded
	mask   uint64 // maskOf(handle) | maskOf(name)
}

// Roles are kept as one byte per user.
var roles = [...]parley.Role{parley.RoleMember, parley.RoleOwner, parley.RoleAdmin, parley.RoleGuest}

func roleCode(r parley.Role) uint8 {
	for i, x := range roles {
		if x == r {
			return uint8(i)
		}
	}
	return 0
}

// channel is a workspace's channel as the cache holds it. Its fields are
// guarded by the workspace's mu.
type channel struct {
	id, name, topic, purpose, createdBy string
	kind                                parley.ChannelKind
	dmUsers                             []string
	created, updated, archived          int64 // unix µs; archived 0: not archived
	memberCount                         int64
	// lastSeq is the channel's last seq as far as the cache knows: the
	// snapshot's, then that of each directory event applied. snapSeq is the
	// snapshot's (0 for channels created since): events up to it are in the
	// snapshot already.
	lastSeq, snapSeq int64
	members          []uint32 // user indexes, sorted
	mask             uint64
}

func newChannel(c *parley.Channel) *channel {
	ch := &channel{id: c.ID, kind: c.Kind, createdBy: c.CreatedBy, created: c.CreatedAt.UnixMicro()}
	ch.set(c)
	return ch
}

// set copies the mutable fields of c.
func (ch *channel) set(c *parley.Channel) {
	ch.name, ch.topic, ch.purpose = c.Name, c.Topic, c.Purpose
	ch.dmUsers = c.DMUserIDs
	ch.updated = c.UpdatedAt.UnixMicro()
	ch.archived = 0
	if c.ArchivedAt != nil {
		ch.archived = c.ArchivedAt.UnixMicro()
	}
	ch.memberCount = c.MemberCount
	ch.lastSeq = max(ch.lastSeq, c.LastSeq)
	ch.mask = maskOf(ch.name)
}

// channel returns the channel as a caller who is (or is not) a member sees
// it. The read marker is not the cache's to know: LastReadSeq stays 0.
func (ch *channel) channel(workspaceID string, isMember bool) parley.Channel {
	c := parley.Channel{
		ID: ch.id, WorkspaceID: workspaceID, Name: ch.name, Kind: ch.kind,
		Topic: ch.topic, Purpose: ch.purpose, CreatedBy: ch.createdBy,
		MemberCount: ch.memberCount, LastSeq: ch.lastSeq,
		CreatedAt: time.UnixMicro(ch.created).UTC(),
		UpdatedAt: time.UnixMicro(ch.updated).UTC(),
		IsMember:  isMember,
	}
	if ch.archived != 0 {
		t := time.UnixMicro(ch.archived).UTC()
		c.ArchivedAt = &t
	}
	if len(ch.dmUsers) > 0 {
		c.DMUserIDs = append([]string(nil), ch.dmUsers...)
	}
	return c
}

// foldName folds a display name for matching, keeping the original string
// when there is nothing to fold.
func foldName(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return strings.ToLower(s)
		}
	}
	return s
}
