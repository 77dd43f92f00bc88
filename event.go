package parley

import (
	"encoding/json"
	"time"
)

// Event is a change that clients learn about. Durable channel events have a
// ChannelID and a gap-free Seq in that channel's log, written in the same
// transaction as the change; other events (user, workspace and read-state
// changes) have Seq 0 and live only on the bus.
type Event struct {
	WorkspaceID string          `json:"workspace_id"`
	ChannelID   string          `json:"channel_id,omitempty"`
	Seq         int64           `json:"seq,omitempty"`
	Type        string          `json:"t"`
	Data        json.RawMessage `json:"d"`
	CreatedAt   time.Time       `json:"created_at"`
	// Topics are the bus topics the event is published on (see Topic* in
	// protocol.go).
	Topics []string `json:"topics,omitempty"`
}

// IsDirectoryEvent reports whether events of type t change a workspace's
// directory and so also go on TopicDirectory.
func IsDirectoryEvent(t string) bool {
	switch t {
	case EventChannelCreated, EventChannelUpdated, EventChannelArchived, EventChannelDeleted,
		EventMemberJoined, EventMemberLeft,
		EventUserCreated, EventUserUpdated, EventUserDeactivated, EventUserStatus,
		EventWorkspaceUpdated, EventWorkspaceMemberJoined, EventWorkspaceMemberLeft, EventWorkspaceMemberUpdated,
		EventWorkspaceDeleted:
		return true
	}
	return false
}

// Payloads of the durable channel events. Every one carries channel_id and
// seq, the event's own seq in the channel log.

type ChannelEventData struct {
	ChannelID string   `json:"channel_id"`
	Seq       int64    `json:"seq"`
	Channel   *Channel `json:"channel,omitempty"`
	UserID    string   `json:"user_id,omitempty"` // who did it
}

type MemberEventData struct {
	ChannelID   string `json:"channel_id"`
	Seq         int64  `json:"seq"`
	UserID      string `json:"user_id"`            // who joined or left
	ActorID     string `json:"actor_id,omitempty"` // who added or removed them, if not themself
	MemberCount int64  `json:"member_count"`
}

type MessageEventData struct {
	ChannelID string   `json:"channel_id"`
	Seq       int64    `json:"seq"`
	Message   *Message `json:"message"`
}

type MessageDeletedData struct {
	ChannelID    string `json:"channel_id"`
	Seq          int64  `json:"seq"`
	MessageID    string `json:"message_id"`
	ThreadRootID string `json:"thread_root_id,omitempty"`
	UserID       string `json:"user_id"`
}

type ReactionEventData struct {
	ChannelID string `json:"channel_id"`
	Seq       int64  `json:"seq"`
	MessageID string `json:"message_id"`
	Emoji     string `json:"emoji"`
	UserID    string `json:"user_id"`
}

type PinEventData struct {
	ChannelID string `json:"channel_id"`
	Seq       int64  `json:"seq"`
	MessageID string `json:"message_id"`
	UserID    string `json:"user_id"`
}

// Payloads of the bus-only events.

type ReadEventData struct {
	ChannelID   string `json:"channel_id"`
	LastReadSeq int64  `json:"last_read_seq"`
}

type UserEventData struct {
	User *User `json:"user"`
}

type WorkspaceMemberData struct {
	WorkspaceID string `json:"workspace_id"`
	UserID      string `json:"user_id"`
	Role        Role   `json:"role"`
	User        *User  `json:"user,omitempty"`
	// Channels are the channels the newcomer joined with the workspace
	// (#general). Those joins write no member.joined: an invite link used
	// by thousands must not cost a frame per member of #general each.
	Channels []JoinedChannel `json:"channels,omitempty"`
}

// JoinedChannel is a channel joined quietly along with a workspace: its
// member count after the join, and its last seq then (the join has none
// of its own).
type JoinedChannel struct {
	ChannelID   string `json:"channel_id"`
	MemberCount int64  `json:"member_count"`
	LastSeq     int64  `json:"last_seq"`
}

type DMOpenedData struct {
	Channel *Channel `json:"channel"`
}

type SessionRevokedData struct {
	TokenHash string `json:"token_hash"`
}

// EventPublisher hands committed events to the bus. Implementations must not
// block for long: they are called after every commit.
type EventPublisher interface {
	Publish(events []Event)
}
