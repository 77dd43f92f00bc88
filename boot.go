package parley

import "time"

// Boot (POST /boot, ARCHITECTURE §5) returns what a client's first screen
// needs and nothing more: the caller, the workspace, the caller's channels
// and DMs with their read state and counts, the WebSocket URL and the
// limits. Never the workspace's user list: users come from the query cache
// on demand.

// BootQuery is the body of POST /boot.
type BootQuery struct {
	WorkspaceID string `json:"workspace_id"`
	// Since is the Version of an earlier boot: only the channels changed
	// since then are returned, with ChannelIDs listing all of them.
	Since string `json:"since"`
	// ChannelID asks for a one-channel-first boot: that channel, its latest
	// messages and the users they reference, and no other channel.
	ChannelID string `json:"channel_id"`
	// Limit bounds the messages of a one-channel-first boot (default
	// DefaultLimit, at most MaxLimit).
	Limit int `json:"limit"`
}

// BootChannel is one channel or DM of a boot: a thin, caller-relative view
// (the full object is GET /channels/{id}). The counts are the caller's:
// UnreadCount counts the top-level messages by others after LastReadSeq,
// MentionCount those of them that mention the caller (@handle, @channel,
// @here, @everyone).
type BootChannel struct {
	ID           string      `json:"id"`
	Name         string      `json:"name"`
	Kind         ChannelKind `json:"kind"`
	Topic        string      `json:"topic"`
	MemberCount  int64       `json:"member_count"`
	LastSeq      int64       `json:"last_seq"`
	LastReadSeq  int64       `json:"last_read_seq"`
	UnreadCount  int64       `json:"unread_count"`
	MentionCount int64       `json:"mention_count"`
	UpdatedAt    time.Time   `json:"updated_at"`
	ArchivedAt   *time.Time  `json:"archived_at,omitempty"`
	// DMUserIDs lists the participants of a dm or group_dm, sorted.
	DMUserIDs []string `json:"dm_user_ids,omitempty"`
}

// BootLimits are the server's limits a client should respect.
type BootLimits struct {
	MaxMessageChars  int `json:"max_message_chars"`
	MaxBodyBytes     int `json:"max_body_bytes"`
	MaxPageSize      int `json:"max_page_size"`
	MaxGroupDMOthers int `json:"max_group_dm_others"`
	MaxBatchUsers    int `json:"max_batch_users"`
	// MaxUploadBytes is absent while the server takes no uploads.
	MaxUploadBytes int64 `json:"max_upload_bytes,omitempty"`
	// RateLimits names each limit the API applies, such as
	// "login_per_account", with its rate.
	RateLimits map[string]RateLimit `json:"rate_limits"`
	// Workspace are the workspace's caps in force, by override key
	// (LimitKeys: its directory overrides over the server's caps;
	// "members" only when bounded), and Features says which of
	// FeatureKeys are on, so a client can hide what is off.
	Workspace map[string]int64 `json:"workspace,omitempty"`
	Features  map[string]bool  `json:"features,omitempty"`
}

// RateLimit is a token bucket as a client sees it.
type RateLimit struct {
	PerMinute float64 `json:"per_minute"`
	Burst     int     `json:"burst"`
}

// Boot is the answer of POST /boot. The store fills in the caller's data;
// the API adds WSURL, Limits, Prefs and Users.
type Boot struct {
	Self      *User      `json:"self"`
	Workspace *Workspace `json:"workspace"`
	// Channels are the caller's public and private channels, by name; DMs
	// their dm and group_dm channels, the most recently active first.
	Channels []BootChannel `json:"channels"`
	DMs      []BootChannel `json:"dms"`
	// Version is opaque: pass it as Since to get only what changed. A
	// one-channel-first boot has none.
	Version string `json:"version,omitzero"`
	// ChannelIDs (with Since only) lists every channel and DM the caller
	// is in now, changed or not, so that the client can drop the others.
	ChannelIDs []string `json:"channel_ids,omitzero"`

	// One-channel-first only: the channel (also the only entry of
	// Channels, whatever its kind; DMs is then empty), its latest messages,
	// ascending, and exactly the users they reference (authors and
	// @mentioned members).
	Channel  *Channel  `json:"channel,omitempty"`
	Messages []Message `json:"messages,omitzero"`
	Users    []User    `json:"users,omitzero"`
	// UserIDs are the ids of Users, found by the store; the API looks the
	// users up (from the query cache when it has one).
	UserIDs []string `json:"-"`

	// Threads summarises the caller's followed threads (collapsed
	// threads): read from the thread memberships, never from messages.
	Threads *ThreadsSummary `json:"threads,omitempty"`

	WSURL  string         `json:"ws_url"`
	Limits *BootLimits    `json:"limits,omitempty"`
	Prefs  map[string]any `json:"prefs"`
}

// ThreadsSummary is boot's view of the threads list: how many followed
// threads have unread replies, and the unread mentions in them.
type ThreadsSummary struct {
	UnreadThreads  int64 `json:"unread_threads"`
	UnreadMentions int64 `json:"unread_mentions"`
}
