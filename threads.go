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
