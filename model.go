package parley

import "time"

// Role is a user's role in a workspace.
type Role string

const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
	RoleGuest  Role = "guest"
)

// IsAdmin reports whether the role may administer the workspace.
func (r Role) IsAdmin() bool { return r == RoleOwner || r == RoleAdmin }

// Outranks says whether a member with role r may deactivate or remove one
// with role other: admins act on members and guests, the owner on admins
// too, nobody on the owner.
func (r Role) Outranks(other Role) bool {
	switch other {
	case RoleOwner:
		return false
	case RoleAdmin:
		return r == RoleOwner
	}
	return r.IsAdmin()
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	switch r {
	case RoleOwner, RoleAdmin, RoleMember, RoleGuest:
		return true
	}
	return false
}

// ChannelKind says what sort of conversation a channel is.
type ChannelKind string

const (
	KindPublic  ChannelKind = "public"
	KindPrivate ChannelKind = "private"
	KindDM      ChannelKind = "dm"
	KindGroupDM ChannelKind = "group_dm"
)

// IsDM reports whether the kind is a direct conversation (dm or group_dm).
func (k ChannelKind) IsDM() bool { return k == KindDM || k == KindGroupDM }

// Org is the top of the tenancy tree (an Enterprise "grid"): it owns
// workspaces.
type Org struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Workspace is a tenant: every row it owns carries its id.
type Workspace struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"org_id"`
	Name      string    `json:"name"`
	Slug      string    `json:"slug"`
	CreatedAt time.Time `json:"created_at"`
	// Role is the caller's role in the workspace.
	Role Role `json:"role,omitempty"`
}

// Status is a user's custom status.
type Status struct {
	Emoji     string     `json:"emoji"`
	Text      string     `json:"text"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// User is a person (or bot) with an account on the server.
type User struct {
	ID    string `json:"id"`
	Email string `json:"email,omitempty"` // only ever shown to the user themself
	// Name is the display name; Handle is what @mentions use.
	Name        string  `json:"name"`
	Handle      string  `json:"handle"`
	Title       string  `json:"title"`
	AvatarHash  string  `json:"avatar_hash"`
	Status      *Status `json:"status,omitempty"`
	Deactivated bool    `json:"deactivated,omitempty"`
	// IsBot marks a bot user (integrations.go): its messages come from
	// an integration, not a person.
	IsBot     bool      `json:"is_bot,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Invite is a multi-use code that lets people join a workspace.
type Invite struct {
	Code        string    `json:"code"`
	WorkspaceID string    `json:"workspace_id"`
	MaxUses     int       `json:"max_uses,omitempty"` // 0: unlimited
	Uses        int       `json:"uses"`
	ExpiresAt   time.Time `json:"expires_at"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
}

// InvitePreview is what anyone holding an invite code may learn before
// signing up: the name and slug of the workspace it is for, nothing else.
type InvitePreview struct {
	WorkspaceName string `json:"workspace_name"`
	WorkspaceSlug string `json:"workspace_slug"`
}

// Channel is a conversation: public, private, DM or group DM.
type Channel struct {
	ID          string      `json:"id"`
	WorkspaceID string      `json:"workspace_id"`
	Name        string      `json:"name"`
	Kind        ChannelKind `json:"kind"`
	Topic       string      `json:"topic"`
	Purpose     string      `json:"purpose"`
	CreatedBy   string      `json:"created_by"`
	MemberCount int64       `json:"member_count"`
	LastSeq     int64       `json:"last_seq"`
	CreatedAt   time.Time   `json:"created_at"`
	UpdatedAt   time.Time   `json:"updated_at"`
	ArchivedAt  *time.Time  `json:"archived_at,omitempty"`
	// DMUserIDs lists the participants of a dm or group_dm, sorted.
	DMUserIDs []string `json:"dm_user_ids,omitempty"`
	// SlowModeSeconds: each member may post once per this many seconds
	// (0: off). Workspace admins and the channel's creator are exempt.
	SlowModeSeconds int `json:"slow_mode_seconds"`
	// PostLimitPerMinute: the channel takes at most this many posts a
	// minute from its members (0: no cap); the same people are exempt.
	PostLimitPerMinute int `json:"post_limit_per_minute"`

	// The caller's membership, filled in on reads made for a user.
	IsMember    bool  `json:"is_member"`
	LastReadSeq int64 `json:"last_read_seq"`
	// The caller's unread and mention counts (see BootChannel), filled in
	// where that is cheap (GET /channels/{id}, boot); absent means zero or
	// not computed.
	UnreadCount  int64 `json:"unread_count,omitempty"`
	MentionCount int64 `json:"mention_count,omitempty"`
}

// Member is one user's membership of a channel.
type Member struct {
	UserID   string    `json:"user_id"`
	JoinedAt time.Time `json:"joined_at"`
	User     *User     `json:"user,omitempty"`
}

// Reaction is one emoji on a message, as seen by the caller.
type Reaction struct {
	Emoji string `json:"emoji"`
	Count int    `json:"count"`
	Me    bool   `json:"me"`
}

// Message is a post in a channel or a reply in a thread. Its JSON is
// PROTOCOL's message shape plus client_msg_id and pinned: WorkspaceID is
// the store's, never on the wire (a client knows the workspace it asked
// about). Event frames also leave out pinned and reactions when false and
// empty (gateway/event.go).
type Message struct {
	ID           string     `json:"id"`
	WorkspaceID  string     `json:"-"`
	ChannelID    string     `json:"channel_id"`
	Seq          int64      `json:"seq"` // the channel seq of its message.created event
	UserID       string     `json:"user_id"`
	Text         string     `json:"text"`
	ClientMsgID  string     `json:"client_msg_id,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	EditedAt     *time.Time `json:"edited_at,omitempty"`
	ThreadRootID string     `json:"thread_root_id,omitempty"`
	ReplyCount   int        `json:"reply_count"`
	LastReplyAt  *time.Time `json:"last_reply_at,omitempty"`
	Pinned       bool       `json:"pinned"`
	Reactions    []Reaction `json:"reactions"`
	// Files are the attached files, in the order of file_ids (absent:
	// none). Signed URLs are never here: GET /files/{id} hands them out.
	Files []File `json:"files,omitempty"`
	// BotProfile is the name and icon a bot's message asked to be shown
	// with (an incoming webhook's or a command answer's username,
	// icon_emoji, icon_url); absent on every other message.
	BotProfile *BotProfile `json:"bot_profile,omitempty"`
}

// BotProfile is how one bot message presents itself, Slack's per-message
// overrides. Only a bot user's message may carry one, and clients show it
// beside the bot's BOT badge, never instead of it: a webhook can call
// itself "Alice" but cannot pass for the person. ValidateBotProfile says
// what each field may hold.
type BotProfile struct {
	Name      string `json:"name,omitempty"`
	IconEmoji string `json:"icon_emoji,omitempty"` // a shortcode, without colons
	IconURL   string `json:"icon_url,omitempty"`   // http or https only
}

// ReadState is a user's read marker in a channel.
type ReadState struct {
	ChannelID   string `json:"channel_id"`
	LastReadSeq int64  `json:"last_read_seq"`
}

// ChannelRef is a channel a gateway session follows, with where its log
// stood when it was read.
type ChannelRef struct {
	ID          string      `json:"id"`
	Kind        ChannelKind `json:"kind"`
	LastSeq     int64       `json:"last_seq"`
	MemberCount int64       `json:"member_count"`
}
