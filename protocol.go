package parley

import "strings"

// The wire contract of the gateway (PROTOCOL.md, docs/protocol.md): ops,
// close codes, event types, bus topics and broadcast mentions. This file is
// the one place that spells them. The gateway, the Go client, presence and
// the stores use these names; protocol_test.go fails on a protocol string
// declared anywhere else, checks docs/protocol.md against these lists, and
// keeps web/client/src/protocol.gen.json (which the TypeScript client's
// tests read) up to date.

// Gateway ops, server → client.
const (
	OpHello          = "hello"
	OpReady          = "ready"
	OpResumed        = "resumed"
	OpInvalidSession = "invalid_session"
	OpEvent          = "event"
	OpHeartbeatAck   = "heartbeat_ack"
	OpReconnect      = "reconnect"
	// OpPresenceSubLimited answers a presence_sub of more users than a
	// session may have in view: the first MaxUsersInView were kept.
	OpPresenceSubLimited = "presence_sub_limited"
)

// MaxUsersInView bounds a session's set of users in view (presence_sub).
const MaxUsersInView = 500

// Gateway ops, client → server.
const (
	OpIdentify    = "identify"
	OpResume      = "resume"
	OpHeartbeat   = "heartbeat"
	OpFocus       = "focus"
	OpPresenceSub = "presence_sub"
	OpTyping      = "typing"
)

// ServerOps and ClientOps list every op of each direction, in the order of
// docs/protocol.md.
var (
	ServerOps = []string{OpHello, OpReady, OpResumed, OpInvalidSession, OpEvent, OpHeartbeatAck, OpReconnect, OpPresenceSubLimited}
	ClientOps = []string{OpIdentify, OpResume, OpHeartbeat, OpFocus, OpPresenceSub, OpTyping}
)

// WebSocket close codes of the gateway. The table CloseCodes says which of
// them a session survives.
const (
	CloseNormal             = 1000 // the client is done
	CloseGoingAway          = 1001 // the server is going away (after reconnect)
	CloseFrameTooBig        = 1009
	CloseUnknownError       = 4000 // a server-side failure
	CloseUnknownOp          = 4001
	CloseDecodeError        = 4002 // invalid JSON, a binary frame, a resume without session_id or seq
	CloseNotIdentified      = 4003 // not identified in time, or an op before identify
	CloseAuthFailed         = 4004 // authentication failed or revoked
	CloseAlreadyIdentified  = 4005 // a second identify or resume on one socket
	CloseInvalidSeq         = 4007 // resume seq above the last s sent
	CloseRateLimited        = 4008 // too many identifies, or an overloaded node
	CloseSessionTimeout     = 4009 // too slow, heartbeats missed, or resumed elsewhere
	CloseAccountDeactivated = 4010 // the account was deactivated (docs/lifecycle.md)
	CloseWorkspaceGone      = 4011 // removed from the session's workspace, or it was deleted
	// CloseClientReconnecting is sent by clients, never by the server: the
	// client drops a socket it means to resume (a private-use code).
	CloseClientReconnecting = 4900
)

// CloseCode describes one close code.
type CloseCode struct {
	Code int
	// Name is the code's name in protocol.gen.json, for the TypeScript client.
	Name string
	// Resumable: the session survives the close, so the client resumes.
	Resumable bool
	// Fatal: the client gives up instead of reconnecting (its credentials
	// were refused, or it speaks the protocol wrongly).
	Fatal bool
	// Errors are the error codes (errors.go) that close a socket with this
	// code when identify or resume fails with them.
	Errors []string
}

// CloseCodes is every close code of the protocol, in ascending order.
var CloseCodes = []CloseCode{
	{Code: CloseNormal, Name: "normal", Resumable: true},
	{Code: CloseGoingAway, Name: "going_away", Resumable: true},
	{Code: CloseFrameTooBig, Name: "frame_too_big", Resumable: true},
	{Code: CloseUnknownError, Name: "unknown_error", Resumable: true},
	{Code: CloseUnknownOp, Name: "unknown_op", Fatal: true},
	{Code: CloseDecodeError, Name: "decode_error", Fatal: true},
	{Code: CloseNotIdentified, Name: "not_identified", Resumable: true},
	{Code: CloseAuthFailed, Name: "auth_failed", Fatal: true,
		Errors: []string{EUNAUTHORIZED, EFORBIDDEN, ENOTFOUND, EINVALID, EFEATUREOFF}},
	{Code: CloseAlreadyIdentified, Name: "already_identified", Fatal: true},
	{Code: CloseInvalidSeq, Name: "invalid_seq"},
	{Code: CloseRateLimited, Name: "rate_limited", Resumable: true},
	{Code: CloseSessionTimeout, Name: "session_timeout", Resumable: true},
	{Code: CloseAccountDeactivated, Name: "account_deactivated", Fatal: true},
	{Code: CloseWorkspaceGone, Name: "workspace_gone", Fatal: true},
	{Code: CloseClientReconnecting, Name: "client_reconnecting", Resumable: true},
}

// LookupCloseCode returns the table's entry for code.
func LookupCloseCode(code int) (CloseCode, bool) {
	for _, c := range CloseCodes {
		if c.Code == code {
			return c, true
		}
	}
	return CloseCode{}, false
}

// CloseResumable reports whether a session survives a close with code.
// Codes outside the table are taken as resumable: a client that does not
// know a code tries to resume, and the server answers invalid_session if
// it cannot.
func CloseResumable(code int) bool {
	c, ok := LookupCloseCode(code)
	return !ok || c.Resumable
}

// CloseFatal reports whether a client gives up after a close with code.
func CloseFatal(code int) bool {
	c, _ := LookupCloseCode(code)
	return c.Fatal
}

// CloseCodeFor returns the close code for a failed identify or resume: the
// code whose Errors hold err's code, else CloseUnknownError.
func CloseCodeFor(err error) int {
	code := ErrorCode(err)
	for _, c := range CloseCodes {
		for _, e := range c.Errors {
			if e == code {
				return c.Code
			}
		}
	}
	return CloseUnknownError
}

// Event types. Kind and whether servers emit them are in EventTypes.
const (
	// Durable channel events: in the channel's log, with a seq.
	EventMessageCreated  = "message.created"
	EventMessageUpdated  = "message.updated"
	EventMessageDeleted  = "message.deleted"
	EventReactionAdded   = "reaction.added"
	EventReactionRemoved = "reaction.removed"
	EventPinAdded        = "pin.added"
	EventPinRemoved      = "pin.removed"
	EventChannelCreated  = "channel.created"
	EventChannelUpdated  = "channel.updated"
	EventChannelArchived = "channel.archived"
	EventChannelDeleted  = "channel.deleted"
	EventMemberJoined    = "member.joined"
	EventMemberLeft      = "member.left"

	// Bus-only events: no seq, never dropped from a session's queue. The
	// thread events and mention go on the user topics of the thread's
	// followers (or of those mentioned), whether or not they look at the
	// channel.
	EventChannelRead           = "channel.read"
	EventChannelSummary        = "channel.summary"
	EventChannelHot            = "channel.hot"
	EventThreadUpdated         = "thread.updated"
	EventThreadFollowed        = "thread.followed"
	EventThreadUnfollowed      = "thread.unfollowed"
	EventThreadRead            = "thread.read"
	EventMention               = "mention"
	EventDMOpened              = "dm.opened"
	EventUserCreated           = "user.created"
	EventUserUpdated           = "user.updated"
	EventUserDeactivated       = "user.deactivated"
	EventUserStatus            = "user.status"
	EventWorkspaceUpdated      = "workspace.updated"
	EventWorkspaceMemberJoined = "workspace.member_joined"
	EventWorkspaceMemberLeft   = "workspace.member_left"
	EventPrefsUpdated          = "prefs.updated"
	EventEmojiAdded            = "emoji.added"
	EventEmojiRemoved          = "emoji.removed"
	// EventMessageEphemeral is a message shown to one user only (a slash
	// command's private answer): on the user's topic, never stored.
	EventMessageEphemeral = "message.ephemeral"

	// Ephemeral events: dropped first under pressure, never given an s
	// when dropped.
	EventTypingStarted   = "typing.started"
	EventPresenceChanged = "presence.changed"

	// EventWorkspaceMemberUpdated is internal to the servers: a member's
	// role changed (WorkspaceMemberData). It goes on the directory topic
	// only, for the query caches' visibility rules (guests).
	EventWorkspaceMemberUpdated = "workspace.member_updated"
	// EventSessionRevoked is internal to the servers: it tells gateways to
	// close the sockets identified with a revoked token. Its d carries the
	// token hash, never the token.
	EventSessionRevoked = "session.revoked"
	// EventWorkspaceDeleted is internal to the servers: the workspace was
	// deleted, so gateways close its sessions (CloseWorkspaceGone) and
	// the query caches drop it. It goes on the user topics of the members
	// it had and on its directory topic.
	EventWorkspaceDeleted = "workspace.deleted"

	// The presence trackers' messages to each other (package presence).
	// Their presence.changed, on a user's presence topic, is one node's
	// contribution, not the client event of the same name: the gateway
	// never forwards it.
	EventPresenceQuery      = "presence.query"
	EventPresenceState      = "presence.state"
	EventPresenceAlive      = "presence.alive"
	EventPresenceBye        = "presence.bye"
	EventPresenceManual     = "presence.manual"
	EventPresenceManualSync = "presence.manual_sync"
	EventPresenceManualSet  = "presence.manual_set"
)

// EventKind says how an event type travels.
type EventKind uint8

const (
	// EventDurable: in a channel's log, with a seq; recoverable by resume,
	// /sync or /events.
	EventDurable EventKind = iota + 1
	// EventBusOnly: sent to clients on the bus only (Seq 0); never dropped
	// from a session's queue, but not in any log.
	EventBusOnly
	// EventEphemeral: may be dropped; the current state is fetchable.
	EventEphemeral
	// EventInternal: between servers only, never sent to a client.
	EventInternal
)

func (k EventKind) String() string {
	switch k {
	case EventDurable:
		return "durable"
	case EventBusOnly:
		return "bus_only"
	case EventEphemeral:
		return "ephemeral"
	case EventInternal:
		return "internal"
	}
	return "unknown"
}

// Audience is who receives an event type (ARCHITECTURE §4: every event
// type has one, and none is every session of a workspace).
type Audience uint8

const (
	// AudienceChannel: the sessions that follow the channel (its members),
	// and a non-member's session previewing the public channel (in focus).
	AudienceChannel Audience = iota + 1
	// AudienceChannelAndUser: AudienceChannel, and the sessions of the user
	// concerned (who joined, left, was added or removed, or created it).
	AudienceChannelAndUser
	// AudienceViewers: the sessions that have the channel in focus (members
	// and previewers), not the user who caused it.
	AudienceViewers
	// AudienceOwn: the user's own sessions.
	AudienceOwn
	// AudienceInView: the sessions that have the user in view
	// (presence_sub), and the user's own sessions.
	AudienceInView
	// AudienceAdmins: the sessions of the workspace's admins and owners.
	AudienceAdmins
	// AudienceServers: the servers only (caches on the directory topic,
	// gateways, presence trackers); never sent to a client.
	AudienceServers
)

func (a Audience) String() string {
	switch a {
	case AudienceChannel:
		return "channel"
	case AudienceChannelAndUser:
		return "channel_and_user"
	case AudienceViewers:
		return "viewers"
	case AudienceOwn:
		return "own"
	case AudienceInView:
		return "in_view"
	case AudienceAdmins:
		return "admins"
	case AudienceServers:
		return "servers"
	}
	return "none"
}

// EventType describes one event type.
type EventType struct {
	Type string
	Kind EventKind
	// Audience: who receives it (docs/protocol.md, "Who receives what").
	Audience Audience
	// Reserved: named by PROTOCOL.md (clients may see it one day) but not
	// emitted by this version.
	Reserved bool
}

// EventTypes is every event type, in the order of PROTOCOL.md, the
// internal ones last.
var EventTypes = []EventType{
	{Type: EventMessageCreated, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventMessageUpdated, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventMessageDeleted, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventReactionAdded, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventReactionRemoved, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventPinAdded, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventPinRemoved, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventChannelCreated, Kind: EventDurable, Audience: AudienceChannelAndUser},
	{Type: EventChannelUpdated, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventChannelArchived, Kind: EventDurable, Audience: AudienceChannel},
	{Type: EventChannelDeleted, Kind: EventDurable, Audience: AudienceChannel, Reserved: true},
	{Type: EventMemberJoined, Kind: EventDurable, Audience: AudienceChannelAndUser},
	{Type: EventMemberLeft, Kind: EventDurable, Audience: AudienceChannelAndUser},
	{Type: EventChannelRead, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventChannelSummary, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventChannelHot, Kind: EventBusOnly, Audience: AudienceViewers},
	{Type: EventThreadUpdated, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventThreadFollowed, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventThreadUnfollowed, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventThreadRead, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventMention, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventDMOpened, Kind: EventBusOnly, Audience: AudienceOwn},
	{Type: EventUserCreated, Kind: EventBusOnly, Audience: AudienceAdmins, Reserved: true},
	{Type: EventUserUpdated, Kind: EventBusOnly, Audience: AudienceInView},
	{Type: EventUserDeactivated, Kind: EventBusOnly, Audience: AudienceInView},
	{Type: EventUserStatus, Kind: EventBusOnly, Audience: AudienceInView},
	{Type: EventPresenceChanged, Kind: EventEphemeral, Audience: AudienceInView},
	{Type: EventTypingStarted, Kind: EventEphemeral, Audience: AudienceViewers},
	{Type: EventWorkspaceUpdated, Kind: EventBusOnly, Audience: AudienceAdmins, Reserved: true},
	{Type: EventWorkspaceMemberJoined, Kind: EventBusOnly, Audience: AudienceAdmins},
	{Type: EventWorkspaceMemberLeft, Kind: EventBusOnly, Audience: AudienceAdmins},
	{Type: EventPrefsUpdated, Kind: EventBusOnly, Audience: AudienceOwn, Reserved: true},
	// emoji.added and emoji.removed: PROTOCOL.md names them, but there
	// are no custom emoji yet, so nothing emits them.
	{Type: EventEmojiAdded, Kind: EventBusOnly, Audience: AudienceAdmins, Reserved: true},
	{Type: EventEmojiRemoved, Kind: EventBusOnly, Audience: AudienceAdmins, Reserved: true},
	{Type: EventMessageEphemeral, Kind: EventBusOnly, Audience: AudienceOwn},

	{Type: EventWorkspaceMemberUpdated, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventSessionRevoked, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventWorkspaceDeleted, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventPresenceQuery, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventPresenceState, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventPresenceAlive, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventPresenceBye, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventPresenceManual, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventPresenceManualSync, Kind: EventInternal, Audience: AudienceServers},
	{Type: EventPresenceManualSet, Kind: EventInternal, Audience: AudienceServers},
}

var eventTypeIndex = func() map[string]EventType {
	m := make(map[string]EventType, len(EventTypes))
	for _, t := range EventTypes {
		m[t.Type] = t
	}
	return m
}()

// LookupEventType returns the registry's entry for the event type t.
func LookupEventType(t string) (EventType, bool) {
	et, ok := eventTypeIndex[t]
	return et, ok
}

// IsEphemeralEvent reports whether events of type t may be dropped.
func IsEphemeralEvent(t string) bool { return eventTypeIndex[t].Kind == EventEphemeral }

// Bus topic prefixes (ARCHITECTURE §4): a topic is its prefix and an id.
const (
	TopicPrefixChannel   = "ch."
	TopicPrefixUser      = "user."
	TopicPrefixPresence  = "presence."
	TopicPrefixProfile   = "profile."
	TopicPrefixAdmins    = "admins."
	TopicPrefixDirectory = "dir."
)

// TopicPresenceControl is the one topic every presence tracker subscribes
// to; TopicNodePresence is one tracker's own.
const TopicPresenceControl = "presencectl"

// Bus topics: one per channel, per user (their own sessions: DMs,
// mentions, read state, their own membership and profile changes), per
// user's presence (between presence trackers), per user's profile (the
// sessions that have the user in view) and per workspace's admins.
func TopicChannel(id string) string  { return TopicPrefixChannel + id }
func TopicUser(id string) string     { return TopicPrefixUser + id }
func TopicPresence(id string) string { return TopicPrefixPresence + id }

// TopicProfile carries a user's user.updated and user.status to the
// sessions that have the user in view (presence_sub); a node subscribes
// once per user some session of it has in view.
func TopicProfile(id string) string { return TopicPrefixProfile + id }

// TopicAdmins carries what only a workspace's admins' sessions get
// (workspace.member_joined); the node of an admin's session subscribes.
func TopicAdmins(workspaceID string) string { return TopicPrefixAdmins + workspaceID }

// TopicDirectory carries every change to a workspace's directory (users,
// channels of every kind, memberships) for the servers' own caches. It is
// never forwarded to client sessions, so private channels may appear on
// it.
func TopicDirectory(id string) string { return TopicPrefixDirectory + id }

// TopicNodePresence is the presence tracker of node's own topic: answers
// to its queries and messages meant for it alone.
func TopicNodePresence(node string) string { return NodeTopic(node, "presence") }

// TopicKind is what a topic is about, from its prefix.
type TopicKind uint8

const (
	TopicKindOther TopicKind = iota
	TopicKindChannel
	TopicKindUser
	TopicKindPresence
	TopicKindProfile
	TopicKindAdmins
	TopicKindDirectory
)

// TopicKindOf returns the kind of topic.
func TopicKindOf(topic string) TopicKind {
	switch {
	case strings.HasPrefix(topic, TopicPrefixChannel):
		return TopicKindChannel
	case strings.HasPrefix(topic, TopicPrefixUser):
		return TopicKindUser
	case strings.HasPrefix(topic, TopicPrefixPresence):
		return TopicKindPresence
	case strings.HasPrefix(topic, TopicPrefixProfile):
		return TopicKindProfile
	case strings.HasPrefix(topic, TopicPrefixAdmins):
		return TopicKindAdmins
	case strings.HasPrefix(topic, TopicPrefixDirectory):
		return TopicKindDirectory
	}
	return TopicKindOther
}

// The broadcast mentions, as handles (without the @) that Mentions
// returns: they name no user but reach the whole channel (in a thread,
// its followers).
const (
	MentionChannel  = "channel"
	MentionHere     = "here"
	MentionEveryone = "everyone"
)

// BroadcastMentions lists the broadcast mentions.
var BroadcastMentions = []string{MentionChannel, MentionHere, MentionEveryone}

// IsBroadcastMention reports whether the mention handle h (from Mentions)
// is a broadcast mention rather than a user's handle.
func IsBroadcastMention(h string) bool {
	return h == MentionChannel || h == MentionHere || h == MentionEveryone
}
