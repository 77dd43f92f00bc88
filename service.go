package parley

import (
	"context"
	"encoding/json"
	"time"
)

// The services below are what the HTTP API and the gateway need from
// storage. Every method that acts for a user takes that user's id as actor
// and authorises inside the same transaction as the change: objects of other
// workspaces and private channels the actor is not in are ENOTFOUND, visible
// objects the actor may not change are EFORBIDDEN.

// NewUser is the input of signup, with the password already hashed.
type NewUser struct {
	Email        string
	Name         string
	Handle       string
	PasswordHash string
}

// Session is a login: the hash of its bearer token and whose it is.
type Session struct {
	TokenHash string
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
	// Scopes are a bot token's scopes (integrations.go); nil for a
	// person's login, which may do everything its user may.
	Scopes []string
}

// Allows reports whether the session may use scope: a person's login may
// use every scope, a bot token only those it was given.
func (s *Session) Allows(scope string) bool {
	if s.Scopes == nil {
		return true
	}
	for _, sc := range s.Scopes {
		if sc == scope {
			return true
		}
	}
	return false
}

// UserPatch holds the fields of PATCH /me; nil fields are left alone.
type UserPatch struct {
	Name       *string `json:"name"`
	Title      *string `json:"title"`
	AvatarHash *string `json:"avatar_hash"`
}

// UserQuery filters and pages a workspace's user directory.
type UserQuery struct {
	Q      string
	Cursor string
	Limit  int
	// IncludeDeactivated lists deactivated users too, marked as such (an
	// admin's member list); by default the directory has only active ones.
	IncludeDeactivated bool
}

// UserPage is one page of users.
type UserPage struct {
	Users      []User `json:"users"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// UserService stores accounts, sessions and profiles.
type UserService interface {
	CreateUser(ctx context.Context, u NewUser) (*User, error)
	// UserCredentials returns the user with that email and their password
	// hash, or ENOTFOUND.
	UserCredentials(ctx context.Context, email string) (*User, string, error)
	CreateSession(ctx context.Context, s Session) error
	// SessionByToken returns the live session with that token hash, or
	// EUNAUTHORIZED when it is unknown, expired or revoked.
	SessionByToken(ctx context.Context, tokenHash string) (*Session, error)
	RevokeSession(ctx context.Context, tokenHash string) error
	GetMe(ctx context.Context, actor string) (*User, error)
	UpdateMe(ctx context.Context, actor string, p UserPatch) (*User, error)
	SetStatus(ctx context.Context, actor string, s Status) (*User, error)
	// UsersBatch returns the users among ids that share a workspace with
	// actor; the others are left out.
	UsersBatch(ctx context.Context, actor string, ids []string) ([]User, error)
	ListWorkspaceUsers(ctx context.Context, actor, workspaceID string, q UserQuery) (*UserPage, error)
}

// InviteParams are the options of a new invite.
type InviteParams struct {
	MaxUses    int `json:"max_uses"`
	ExpiresInS int `json:"expires_in_s"`
}

// DefaultInviteTTL is how long an invite lives when no expiry is given.
const DefaultInviteTTL = 7 * 24 * time.Hour

// WorkspaceService stores workspaces, their memberships and invites.
type WorkspaceService interface {
	// CreateWorkspace creates a workspace in a new org, with actor as its
	// owner and a #general channel every member joins.
	CreateWorkspace(ctx context.Context, actor, name, slug string) (*Workspace, error)
	GetWorkspace(ctx context.Context, actor, workspaceID string) (*Workspace, error)
	ListWorkspaces(ctx context.Context, actor string) ([]Workspace, error)
	CreateInvite(ctx context.Context, actor, workspaceID string, p InviteParams) (*Invite, error)
	// AcceptInvite adds actor to the invite's workspace (a no-op when they
	// are already a member). Unknown, expired and used-up codes are ENOTFOUND.
	AcceptInvite(ctx context.Context, actor, code string) (*Workspace, error)
	// InvitePreview names the workspace a code is for, without a session
	// (the invite page). Unknown, expired and used-up codes are ENOTFOUND.
	InvitePreview(ctx context.Context, code string) (*InvitePreview, error)
	// SetMemberRole changes a member's role (admins only). The owner's role
	// cannot be changed this way, nor can anyone be made owner.
	SetMemberRole(ctx context.Context, actor, workspaceID, userID string, role Role) error
}

// NewChannel is the input of channel creation.
type NewChannel struct {
	Name    string      `json:"name"`
	Kind    ChannelKind `json:"kind"`
	Topic   string      `json:"topic"`
	Purpose string      `json:"purpose"`
}

// ChannelPatch holds the fields of PATCH /channels/{id}; nil is unchanged.
type ChannelPatch struct {
	Name    *string `json:"name"`
	Topic   *string `json:"topic"`
	Purpose *string `json:"purpose"`
	// SlowModeSeconds and PostLimitPerMinute (0: off) need channel
	// management rights (workspace admins, the channel's creator).
	SlowModeSeconds    *int `json:"slow_mode_seconds"`
	PostLimitPerMinute *int `json:"post_limit_per_minute"`
}

// MemberPage is one page of a channel's members.
type MemberPage struct {
	Members    []Member `json:"members"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// ChannelQuery filters and pages the channel browser.
type ChannelQuery struct {
	Q      string // name prefix
	Cursor string
	Limit  int
}

// ChannelPage is one page of channels.
type ChannelPage struct {
	Channels   []Channel `json:"channels"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// ChannelService stores channels and memberships.
type ChannelService interface {
	// ListChannels pages, by name, the public and private channels of a
	// workspace that actor can see: the public ones (for guests only those
	// they are in) and the private ones they are in. DMs are not listed.
	ListChannels(ctx context.Context, actor, workspaceID string, q ChannelQuery) (*ChannelPage, error)
	CreateChannel(ctx context.Context, actor, workspaceID string, c NewChannel) (*Channel, error)
	// OpenDM returns the dm or group_dm between actor and userIDs, creating
	// it the first time; created says which.
	OpenDM(ctx context.Context, actor, workspaceID string, userIDs []string) (ch *Channel, created bool, err error)
	GetChannel(ctx context.Context, actor, channelID string) (*Channel, error)
	UpdateChannel(ctx context.Context, actor, channelID string, p ChannelPatch) (*Channel, error)
	ArchiveChannel(ctx context.Context, actor, channelID string) (*Channel, error)
	JoinChannel(ctx context.Context, actor, channelID string) (*Channel, error)
	LeaveChannel(ctx context.Context, actor, channelID string) error
	AddMembers(ctx context.Context, actor, channelID string, userIDs []string) (*Channel, error)
	RemoveMember(ctx context.Context, actor, channelID, userID string) error
	ListMembers(ctx context.Context, actor, channelID, cursor string, limit int) (*MemberPage, error)
	// MarkRead moves actor's read marker forward to seq (never back).
	MarkRead(ctx context.Context, actor, channelID string, seq int64) (*ReadState, error)
}

// NewMessage is the input of a post.
type NewMessage struct {
	Text         string `json:"text"`
	ClientMsgID  string `json:"client_msg_id"`
	ThreadRootID string `json:"thread_root_id"`
	// FileIDs are files the poster uploaded to the channel's workspace and
	// has not attached yet (at most MaxFilesPerMessage); the message
	// takes them.
	FileIDs []string `json:"file_ids,omitempty"`
	// BotProfile is set by the server for a bot's post (incoming webhooks,
	// command answers), never read from a request body; the store refuses
	// it from anyone but a bot.
	BotProfile *BotProfile `json:"-"`
}

// HistoryQuery pages a channel's history by seq.
type HistoryQuery struct {
	BeforeSeq int64
	AfterSeq  int64
	Limit     int
}

// MessagePage is a page of messages, ascending by seq.
type MessagePage struct {
	Messages   []Message `json:"messages"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// MessageService stores messages, reactions and pins.
type MessageService interface {
	// PostMessage stores a message; posting the same client_msg_id again in
	// the same channel by the same user returns the first message with
	// created false.
	PostMessage(ctx context.Context, actor, channelID string, m NewMessage) (msg *Message, created bool, err error)
	ListMessages(ctx context.Context, actor, channelID string, q HistoryQuery) (*MessagePage, error)
	ListReplies(ctx context.Context, actor, rootID string, afterSeq int64, limit int) (*MessagePage, error)
	ListPins(ctx context.Context, actor, channelID string) (*MessagePage, error)
	GetMessage(ctx context.Context, actor, messageID string) (*Message, error)
	EditMessage(ctx context.Context, actor, messageID, text string) (*Message, error)
	DeleteMessage(ctx context.Context, actor, messageID string) error
	AddReaction(ctx context.Context, actor, messageID, emoji string) (*Message, error)
	RemoveReaction(ctx context.Context, actor, messageID, emoji string) (*Message, error)
	Pin(ctx context.Context, actor, messageID string) (*Message, error)
	Unpin(ctx context.Context, actor, messageID string) (*Message, error)
}

// EventPage is a page of a channel's durable event log.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// SyncResult is one channel's answer in /sync: its missed events, or
// TooFar with the channel's last seq, or an error code.
type SyncResult struct {
	Events  []Event
	TooFar  bool
	LastSeq int64
	Error   string // an error code, such as ENOTFOUND
}

// MarshalJSON writes exactly one of the three shapes of the contract:
// {"events": [...]} (never null), {"too_far": true, "last_seq": n} or
// {"error": code}.
func (r SyncResult) MarshalJSON() ([]byte, error) {
	switch {
	case r.Error != "":
		return json.Marshal(struct {
			Error string `json:"error"`
		}{r.Error})
	case r.TooFar:
		return json.Marshal(struct {
			TooFar  bool  `json:"too_far"`
			LastSeq int64 `json:"last_seq"`
		}{true, r.LastSeq})
	}
	ev := r.Events
	if ev == nil {
		ev = []Event{}
	}
	return json.Marshal(struct {
		Events []Event `json:"events"`
	}{ev})
}

// MaxSyncEvents is how many missed events /sync returns for one channel
// before it answers too_far instead.
const MaxSyncEvents = 500

// MaxSyncChannels bounds the channels of one /sync call.
const MaxSyncChannels = 500

// ValidateSync checks a /sync request's shape (at most MaxSyncChannels
// channels, no negative seq): the one check every EventService makes
// before reading anything.
func ValidateSync(channels map[string]int64) error {
	if len(channels) > MaxSyncChannels {
		return Errorf(EINVALID, "at most %d channels per sync", MaxSyncChannels)
	}
	for _, seq := range channels {
		if seq < 0 {
			return Errorf(EINVALID, "seqs must not be negative")
		}
	}
	return nil
}

// EventService reads channel event logs for catch-up.
type EventService interface {
	ListEvents(ctx context.Context, actor, channelID string, afterSeq int64, limit int) (*EventPage, error)
	Sync(ctx context.Context, actor string, channels map[string]int64) (map[string]SyncResult, error)
}

// GatewayService is what the gateway reads for its own bookkeeping, acting
// for the server after it has authenticated a session.
type GatewayService interface {
	// SessionChannels lists the channels (DMs included) userID is a member
	// of in the workspace, with each log's last seq; ENOTFOUND when the user
	// is not in the workspace.
	SessionChannels(ctx context.Context, userID, workspaceID string) ([]ChannelRef, error)
	// ChannelLog reads up to limit events of a channel after afterSeq.
	ChannelLog(ctx context.Context, channelID string, afterSeq int64, limit int) ([]Event, error)
	// ChannelMember reports whether userID is a member of the channel now.
	ChannelMember(ctx context.Context, userID, channelID string) (bool, error)
}

// DirectoryVisitor receives a workspace's directory from ReadDirectory, one
// row per call: the users first, then the channels, then the memberships
// grouped by channel. The values passed are the callee's to keep.
type DirectoryVisitor struct {
	// User is called for each member of the workspace (email left out),
	// with their role in it.
	User func(u *User, role Role)
	// Channel is called for each channel of every kind, archived ones
	// included, with member_count, last_seq and DM participants; the
	// caller-specific fields (is_member, last_read_seq) are unset.
	Channel func(c *Channel)
	// Member is called for each channel membership.
	Member func(channelID, userID string)
}

// DirectoryService reads whole workspace directories in bulk for the query
// caches (package querycache). It acts for the server, not for a user: it
// authorises nothing.
type DirectoryService interface {
	// ReadDirectory reads a workspace's users, channels and memberships
	// from one consistent snapshot, in a few queries whatever the
	// workspace's size. An unknown workspace is ENOTFOUND.
	ReadDirectory(ctx context.Context, workspaceID string, v DirectoryVisitor) error
	// ChannelWorkspace returns the id of the workspace a channel belongs
	// to, or ENOTFOUND.
	ChannelWorkspace(ctx context.Context, channelID string) (string, error)
}

// BootService reads what POST /boot returns (boot.go). Counts come from
// rows the writes maintain, never from counting messages.
type BootService interface {
	// Boot returns actor's boot in a workspace: ENOTFOUND for a workspace
	// actor is not in, and with q.ChannelID for a channel of another
	// workspace or one actor may not see; EINVALID for a bad q.Since.
	// Users is left for the caller to fill from UserIDs.
	Boot(ctx context.Context, actor string, q BootQuery) (*Boot, error)
	// WorkspaceUsers returns the users among ids who are members of the
	// workspace, in the order of ids; the others are left out. It acts for
	// the server (the caller has authorised the request).
	WorkspaceUsers(ctx context.Context, workspaceID string, ids []string) ([]User, error)
}

// Store is everything a node needs from storage.
type Store interface {
	GatewayService
	UserService
	WorkspaceService
	ChannelService
	MessageService
	EventService
	DirectoryService
	BootService
	ThreadService
	SearchService
	SettingsService
	LifecycleService
	Close() error
}
