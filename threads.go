package parley

import (
	"context"
	"time"
)

// Thread is a followed thread as the threads list shows it to one user.
type Thread struct {
	RootID         string    `json:"root_id"`
	WorkspaceID    string    `json:"workspace_id"`
	ChannelID      string    `json:"channel_id"`
	ReplyCount     int       `json:"reply_count"`
	LastReplyAt    time.Time `json:"last_reply_at"`
	Participants   []string  `json:"participants"`
	Following      bool      `json:"following"`
	LastViewedAt   time.Time `json:"last_viewed_at"`
	UnreadReplies  int       `json:"unread_replies"`
	UnreadMentions int       `json:"unread_mentions"`
	Root           *Message  `json:"root,omitempty"`
}

// ThreadEventData is the payload of thread.updated, thread.followed,
// thread.unfollowed and thread.read, sent on one user's topic: the thread
// with that user's own counts, and for thread.updated the reply that
// changed it.
type ThreadEventData struct {
	Thread  *Thread  `json:"thread"`
	Message *Message `json:"message,omitempty"`
}

// MentionEventData is the payload of mention, sent on the mentioned user's
// topic: the message that mentions them, and its thread's root if it is a
// reply.
type MentionEventData struct {
	ChannelID    string   `json:"channel_id"`
	ThreadRootID string   `json:"thread_root_id,omitempty"`
	Message      *Message `json:"message"`
}

// ThreadQuery filters and pages a user's followed threads, most recently
// replied first.
type ThreadQuery struct {
	Unread bool // only threads with unread replies or mentions
	Cursor string
	Limit  int
}

// ThreadPage is one page of threads.
type ThreadPage struct {
	Threads    []Thread `json:"threads"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// ThreadService stores threads and per-user thread memberships
// (Mattermost's collapsed reply threads, ARCHITECTURE §2).
type ThreadService interface {
	ListThreads(ctx context.Context, actor, workspaceID string, q ThreadQuery) (*ThreadPage, error)
	FollowThread(ctx context.Context, actor, rootID string) (*Thread, error)
	UnfollowThread(ctx context.Context, actor, rootID string) (*Thread, error)
	// MarkThreadRead clears actor's unread replies and mentions in the
	// thread (last viewed = now).
	MarkThreadRead(ctx context.Context, actor, rootID string) (*Thread, error)
}

// SearchQuery is a full-text search over a workspace's messages.
type SearchQuery struct {
	Q      string
	Cursor string
	Limit  int
}

// SearchResult is one matching message with its highlighted text: the
// matched terms wrapped in HighlightStart/HighlightEnd, the rest as stored
// (clients escape it before showing it).
type SearchResult struct {
	Message   Message `json:"message"`
	Highlight string  `json:"highlight"`
}

// Highlight markers in SearchResult.Highlight: private-use characters that
// message text is unlikely to hold, so clients can split on them safely.
const (
	HighlightStart = "\ue000"
	HighlightEnd   = "\ue001"
)

// SearchPage is one page of search results, best first.
type SearchPage struct {
	Results    []SearchResult `json:"results"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// SearchService finds messages by text among those actor may read: the
// workspace's public channels and every channel actor belongs to.
type SearchService interface {
	Search(ctx context.Context, actor, workspaceID string, q SearchQuery) (*SearchPage, error)
}

// LiveConfig is the cluster-wide configuration that operators change at run
// time without a restart (ARCHITECTURE §7). Every node sees a change within
// about a second.
type LiveConfig struct {
	// CollapsedThreads: replies count and notify in their thread (thread
	// memberships, the threads list). Off: replies show inline and count in
	// the channel, and no thread bookkeeping is written at all.
	CollapsedThreads bool `json:"collapsed_threads"`
	// ChannelMentionMaxMembers: above this many members, @channel, @here
	// and @everyone need a workspace admin (others get 403). 0: no cap.
	ChannelMentionMaxMembers int `json:"channel_mention_max_members"`
	// LiveRates are the API's rate limits (ratelimit.go); each defaults to
	// the node's own setting.
	LiveRates
}

// DefaultLiveConfig is the configuration of a new installation.
func DefaultLiveConfig() LiveConfig {
	return LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 1000}
}

// LiveConfigSource gives the current live configuration; it is called on
// every write that depends on it, so it must be cheap (an atomic load).
type LiveConfigSource interface {
	LiveConfig() LiveConfig
}

// StaticConfig is a LiveConfigSource that never changes (tools, tests).
type StaticConfig LiveConfig

// LiveConfig returns c.
func (c StaticConfig) LiveConfig() LiveConfig { return LiveConfig(c) }

// SettingsService persists the live configuration (the source of truth;
// the bus only carries change notices).
type SettingsService interface {
	// LoadLiveConfig returns the stored configuration, DefaultLiveConfig
	// when none was ever saved.
	LoadLiveConfig(ctx context.Context) (LiveConfig, error)
	SaveLiveConfig(ctx context.Context, c LiveConfig) error
}
