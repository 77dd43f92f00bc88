// Wire types of the Parley HTTP API and gateway (docs/protocol.md,
// httpapi/openapi.json). Field names are the server's JSON names; optional
// fields are those the server may leave out.

/** An RFC 3339 UTC timestamp. */
export type Time = string;

export type Role = 'owner' | 'admin' | 'member' | 'guest';
export type ChannelKind = 'public' | 'private' | 'dm' | 'group_dm';
export type Presence = 'online' | 'away' | 'offline';

export interface UserStatus {
	emoji: string;
	text: string;
	expires_at?: Time;
}

/** Email for missed mentions and DMs (GET/PUT /me/notifications, docs/email.md). */
export type NotifyMode = 'off' | 'on';

export interface NotifyPrefs {
	mode: NotifyMode;
	/** Least time between two emails, and how long an unread item waits: 900, 3600 or 86400. */
	interval_seconds: number;
}

export interface NotifySettings extends NotifyPrefs {
	/** The interval_seconds the server accepts. */
	intervals: number[];
	/** Whether the server sends email at all (an SMTP server is configured). */
	email_enabled: boolean;
}

export interface User {
	id: string;
	/** Only ever present on the caller's own user. */
	email?: string;
	name: string;
	handle: string;
	title: string;
	avatar_hash: string;
	status?: UserStatus;
	deactivated?: boolean;
	/** A bot user (an integration); absent for people. */
	is_bot?: boolean;
	created_at: Time;
	updated_at: Time;
}

export interface Workspace {
	id: string;
	org_id: string;
	name: string;
	slug: string;
	created_at: Time;
	/** The caller's role, where the endpoint knows it. */
	role?: Role;
}

/** What an invite's page may show before sign-up: the workspace it is for. */
export interface InvitePreview {
	workspace_name: string;
	workspace_slug: string;
}

export interface Invite {
	code: string;
	workspace_id: string;
	max_uses?: number;
	uses: number;
	expires_at: Time;
	created_by: string;
	created_at: Time;
}

/** The full channel object (GET /channels/{id}, channel browser, events). */
export interface Channel {
	id: string;
	workspace_id: string;
	name: string;
	kind: ChannelKind;
	topic: string;
	purpose: string;
	created_by: string;
	member_count: number;
	last_seq: number;
	created_at: Time;
	updated_at: Time;
	archived_at?: Time;
	dm_user_ids?: string[];
	/** A member may post once per this many seconds (0: off); admins and the creator are exempt. */
	slow_mode_seconds?: number;
	/** The channel takes at most this many posts a minute (0: no cap). */
	post_limit_per_minute?: number;
	is_member: boolean;
	last_read_seq: number;
	unread_count?: number;
	mention_count?: number;
}

/** A channel or DM as boot lists it: thin and caller-relative. */
export interface BootChannel {
	id: string;
	name: string;
	kind: ChannelKind;
	topic: string;
	member_count: number;
	last_seq: number;
	last_read_seq: number;
	unread_count: number;
	mention_count: number;
	updated_at: Time;
	archived_at?: Time;
	dm_user_ids?: string[];
}

export interface RateLimit {
	per_minute: number;
	burst: number;
}

export interface BootLimits {
	max_message_chars: number;
	max_body_bytes: number;
	max_page_size: number;
	max_group_dm_others: number;
	max_batch_users: number;
	max_upload_bytes?: number;
	rate_limits: Record<string, RateLimit>;
	/** The workspace's caps in force, by key (channels, invites; members and file_storage_bytes when set). */
	workspace?: Record<string, number>;
	/** Which features the workspace has on (integrations, file_uploads): hide what is off. */
	features?: Record<string, boolean>;
}

export interface Boot {
	self: User;
	workspace: Workspace;
	/** Public and private channels the caller is in, by name. */
	channels: BootChannel[];
	/** DMs and group DMs, most recently active first. */
	dms: BootChannel[];
	/** Opaque; pass as `since` to get only what changed. */
	version?: string;
	/** With `since` only: every channel and DM the caller is in now. */
	channel_ids?: string[];
	/** One-channel-first boot only. */
	channel?: Channel;
	messages?: Message[];
	users?: User[];
	/** The caller's followed threads, summarised (collapsed threads). */
	threads?: ThreadsSummary;
	ws_url: string;
	limits?: BootLimits;
	prefs: Record<string, unknown> | null;
}

export interface ThreadsSummary {
	/** Followed threads with unread replies. */
	unread_threads: number;
	/** Unread mentions in them. */
	unread_mentions: number;
}

export interface BootQuery {
	workspace_id: string;
	since?: string;
	channel_id?: string;
	limit?: number;
}

export interface Member {
	user_id: string;
	joined_at: Time;
	user?: User;
}

export interface Reaction {
	emoji: string;
	count: number;
	me: boolean;
}

export interface Message {
	id: string;
	/** Not on the wire any more (the session knows its workspace); old log entries may still carry it. */
	workspace_id?: string;
	channel_id: string;
	/** The channel seq of its message.created event. */
	seq: number;
	user_id: string;
	text: string;
	client_msg_id?: string;
	created_at: Time;
	edited_at?: Time;
	thread_root_id?: string;
	reply_count: number;
	last_reply_at?: Time;
	/** Event frames leave it out when false. */
	pinned?: boolean;
	/** Event frames leave it out when empty. */
	reactions?: Reaction[];
	/** Attached files (absent: none), without URLs: Api.getFile signs them. */
	files?: FileInfo[];
	/**
	 * A bot message's own name and icon (an incoming webhook's or a command
	 * answer's username, icon_emoji, icon_url); absent on other messages.
	 * Show it beside the bot's BOT badge, never instead of it.
	 */
	bot_profile?: BotProfile;
}

/** The name and icon one bot message asked for (docs/integrations.md). */
export interface BotProfile {
	/** One line, at most 80 characters. */
	name?: string;
	/** A shortcode without colons (robot_face). */
	icon_emoji?: string;
	/** An absolute http(s) URL: show it only as an image that sends no referrer. */
	icon_url?: string;
}

/** An uploaded file (docs/files.md). */
export interface FileInfo {
	id: string;
	name: string;
	size: number;
	/** Sniffed by the server from the bytes. */
	content_type: string;
	/** An image's pixels. */
	width?: number;
	height?: number;
	/** A thumbnail exists (images). */
	thumbnail?: boolean;
	user_id: string;
	created_at: Time;
	channel_id?: string;
	message_id?: string;
	/** Signed download path (relative to the server), for this user, until url_expires_at. */
	url?: string;
	thumbnail_url?: string;
	url_expires_at?: Time;
}

/** A resumable upload in progress: send chunks from offset. */
export interface Upload {
	id: string;
	workspace_id: string;
	name: string;
	size: number;
	offset: number;
	chunk_size: number;
	expires_at: Time;
}

export interface ReadState {
	channel_id: string;
	last_read_seq: number;
}

export interface Thread {
	root_id: string;
	workspace_id?: string;
	channel_id: string;
	reply_count: number;
	last_reply_at: Time;
	participants?: string[];
	following?: boolean;
	last_viewed_at?: Time;
	unread_replies: number;
	unread_mentions: number;
	root?: Message;
}

/** Search hit; matches in `highlight` are wrapped in U+E000 … U+E001. */
export interface SearchResult {
	message: Message;
	highlight: string;
}

export const HIGHLIGHT_START = '\ue000';
export const HIGHLIGHT_END = '\ue001';

export interface MentionSuggestion extends User {
	in_channel: boolean;
}

export interface ChannelHeader {
	channel: Channel;
	member_count: number;
	topic: string;
	purpose: string;
	members_preview: User[];
}

/** A durable log entry (/events, /sync). Same `d` as the gateway event. */
export interface LogEntry {
	channel_id: string;
	seq: number;
	t: string;
	d: EventData;
	created_at: Time;
}

export type SyncEntry = { events: LogEntry[] } | { too_far: true; last_seq: number } | { error: string };

/** Every list answer: items under a plural key plus `next_cursor` (absent or empty at the end). */
export type ListOf<K extends string, T> = { [P in K]: T[] } & { next_cursor?: string };

// ---- Gateway ------------------------------------------------------------

// The protocol's names. The server's registry (protocol.go) is the one list:
// test/protocol.test.ts holds these to protocol.gen.json, which Go writes
// from it (docs/protocol.md, "The registry").

/** Ops the server sends, in the order of docs/protocol.md. */
export const SERVER_OPS = ['hello', 'ready', 'resumed', 'invalid_session', 'event', 'heartbeat_ack', 'reconnect', 'presence_sub_limited'] as const;
/** Ops the client sends. */
export const CLIENT_OPS = ['identify', 'resume', 'heartbeat', 'focus', 'presence_sub', 'typing'] as const;

/** The gateway's close codes. */
export const CloseCode = {
	normal: 1000,
	goingAway: 1001,
	frameTooBig: 1009,
	unknownError: 4000,
	unknownOp: 4001,
	decodeError: 4002,
	notIdentified: 4003,
	authFailed: 4004,
	alreadyIdentified: 4005,
	invalidSeq: 4007,
	rateLimited: 4008,
	sessionTimeout: 4009,
	/** The account was deactivated (docs/lifecycle.md). */
	accountDeactivated: 4010,
	/** Removed from the session's workspace, or it was deleted. */
	workspaceGone: 4011,
	/** Sent by clients only: a socket dropped to be resumed. */
	clientReconnecting: 4900,
} as const;

/** Close codes after which the client gives up instead of reconnecting. */
export const FATAL_CLOSE_CODES: ReadonlySet<number> = new Set([
	CloseCode.unknownOp,
	CloseCode.decodeError,
	CloseCode.authFailed,
	CloseCode.alreadyIdentified,
	CloseCode.accountDeactivated,
	CloseCode.workspaceGone,
]);

/**
 * Every event type a client may see, with how it travels: `durable` (in a
 * channel's log, with a seq), `bus_only` (no seq) or `ephemeral` (may be
 * dropped). Servers may add types: clients ignore those they do not know.
 */
export const EVENT_TYPES = {
	'message.created': 'durable',
	'message.updated': 'durable',
	'message.deleted': 'durable',
	'reaction.added': 'durable',
	'reaction.removed': 'durable',
	'pin.added': 'durable',
	'pin.removed': 'durable',
	'channel.created': 'durable',
	'channel.updated': 'durable',
	'channel.archived': 'durable',
	'channel.deleted': 'durable',
	'member.joined': 'durable',
	'member.left': 'durable',
	'channel.read': 'bus_only',
	'channel.summary': 'bus_only',
	'channel.hot': 'bus_only',
	'thread.updated': 'bus_only',
	'thread.followed': 'bus_only',
	'thread.unfollowed': 'bus_only',
	'thread.read': 'bus_only',
	mention: 'bus_only',
	'dm.opened': 'bus_only',
	'user.created': 'bus_only',
	'user.updated': 'bus_only',
	'user.deactivated': 'bus_only',
	'user.status': 'bus_only',
	'presence.changed': 'ephemeral',
	'typing.started': 'ephemeral',
	'workspace.updated': 'bus_only',
	'workspace.member_joined': 'bus_only',
	'workspace.member_left': 'bus_only',
	'prefs.updated': 'bus_only',
	'emoji.added': 'bus_only',
	'emoji.removed': 'bus_only',
	'message.ephemeral': 'bus_only',
} as const;

export type EventType = keyof typeof EVENT_TYPES;

/** Mentions that name no user but reach the whole channel (handles, without the @). */
export const BROADCAST_MENTIONS: readonly string[] = ['channel', 'here', 'everyone'];

/** Event payloads. Every channel event carries channel_id; durable ones seq. */
export interface EventData {
	channel_id?: string;
	seq?: number;
	message?: Message;
	message_id?: string;
	thread_root_id?: string;
	emoji?: string;
	user_id?: string;
	actor_id?: string;
	member_count?: number;
	channel?: Channel;
	last_read_seq?: number;
	user?: User;
	presence?: Presence;
	workspace_id?: string;
	role?: Role;
	thread?: Thread;
	/** channel.summary: the channel's seq the summary reaches (ChannelSummary). */
	last_seq?: number;
	/** channel.summary: messages in the summarized range that count as unread (ChannelSummary). */
	unread?: number;
	/** channel.summary: of those, the ones that mention the user (ChannelSummary). */
	mentions?: number;
	/** channel.hot: hot mode on or off (ChannelHot). */
	on?: boolean;
	[key: string]: unknown;
}

/**
 * channel.summary: sent instead of a channel's durable events to a session
 * that does not have the channel in focus (huge and hot channels, never DMs).
 * It stands for the channel's events after the session's previous position
 * up to last_seq, which the session was not sent: the next durable event of
 * the channel has seq last_seq+1 (or comes after another summary). The range
 * is no gap to fill: its unread messages and mentions are added to the
 * channel's counts (replies count in their thread; @here comes as `mention`).
 */
export interface ChannelSummary {
	channel_id: string;
	last_seq: number;
	unread: number;
	mentions: number;
}

/**
 * channel.hot: to sessions with the channel in focus, when it turns hot or
 * cools and on focusing a hot channel. A hot channel's events come batched
 * and its typing indicators sampled.
 */
export interface ChannelHot {
	channel_id: string;
	on: boolean;
}

/**
 * An event as the library hands it to the application, whether it came live
 * on the socket, from a resume replay, or from /sync and /events catch-up.
 */
export interface ParleyEvent {
	/** Event type, e.g. "message.created". */
	t: string;
	d: EventData;
	/** Session sequence; absent for events from catch-up. */
	s?: number;
	/** Just-in-time users that came with the frame. */
	users?: User[];
	/** Where the event came from. */
	source: 'live' | 'catchup';
}

/** Frames the server sends. */
export type ServerFrame =
	| { op: 'hello'; heartbeat_ms: number; resume_window_s: number }
	| { op: 'ready'; session_id: string; user_id: string }
	| { op: 'resumed'; replayed: number }
	| { op: 'invalid_session'; reason: string }
	| { op: 'event'; s: number; t: string; d: EventData; users?: User[] }
	| { op: 'heartbeat_ack' }
	| { op: 'reconnect'; reason: string; retry_after_ms: number }
	| { op: 'presence_sub_limited'; limit: number; requested: number };

/** Frames the client sends. */
export type ClientFrame =
	| { op: 'identify'; token: string; workspace_id: string }
	| { op: 'resume'; token: string; session_id: string; seq: number }
	| { op: 'heartbeat' }
	| { op: 'focus'; channel_ids: string[] }
	| { op: 'presence_sub'; user_ids: string[] }
	| { op: 'typing'; channel_id: string; thread_root_id?: string };

/** The gateway connection's state, for a "reconnecting" banner. */
export type ConnectionStatus =
	| 'idle' // not started, or stopped by the application
	| 'connecting' // first connection in progress
	| 'ready' // identified or resumed, caught up, live
	| 'reconnecting' // lost the socket; retrying with backoff
	| 'logged_out' // the token was refused or revoked (close 4004), or the account deactivated (4010): log in again
	| 'workspace_gone' // removed from the workspace, or it was deleted (close 4011)
	| 'failed'; // a protocol error the library cannot recover from

// ---- integrations (docs/integrations.md) ------------------------------

/** Token scopes of bot tokens. */
export type Scope = 'channels:read' | 'channels:join' | 'chat:write' | 'reactions:write';

export interface Bot {
	user: User;
	workspace_id: string;
	/** What made it: an admin ("bot"), a webhook, a command or an outgoing webhook. */
	kind: 'bot' | 'webhook' | 'command' | 'outgoing';
	created_by: string;
	created_at: Time;
	revoked_at?: Time;
}

export interface BotToken {
	id: string;
	bot_id: string;
	label: string;
	scopes: Scope[];
	created_by: string;
	created_at: Time;
	revoked_at?: Time;
	/** Only in the answer that created it. */
	token?: string;
}

export interface Webhook {
	id: string;
	workspace_id: string;
	channel_id: string;
	bot_id: string;
	name: string;
	created_by: string;
	created_at: Time;
	/** Only in the answer that created it (it holds the secret). */
	url?: string;
}

export interface Integration {
	id: string;
	workspace_id: string;
	kind: 'command' | 'outgoing';
	name: string;
	channel_id?: string;
	trigger_words?: string[];
	url: string;
	description: string;
	signing_secret: string;
	bot_id: string;
	created_by: string;
	created_at: Time;
}

export interface AuditEntry {
	id: string;
	bot_id: string;
	at: Time;
	action: string;
	target: string;
	status: number;
}

/** A slash command as the composer offers it. */
export interface CommandInfo {
	name: string;
	usage?: string;
	description: string;
	builtin: boolean;
}

/** A message shown to one user only, never stored (event message.ephemeral). */
export interface EphemeralMessage {
	id: string;
	channel_id: string;
	/** The bot that answered, or "" for the server's own notices. */
	user_id: string;
	text: string;
	/** The thread it belongs in (the command was typed there); absent: the channel. */
	thread_root_id?: string;
	/** The name and icon the command's answer asked for. */
	bot_profile?: BotProfile;
	created_at: Time;
}

/** What running a slash command did. */
export interface CommandResult {
	response_type: 'ephemeral' | 'in_channel';
	message?: Message;
	ephemeral?: EphemeralMessage;
}
