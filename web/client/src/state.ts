// The session's state: the snapshot types the UI reads, and the Store that
// holds the current snapshot and tells subscribers about new ones.
//
// Every change makes a new SessionState object (and new objects for the
// parts that changed); nothing reachable from a published snapshot is ever
// mutated. The owners of the session's parts (users, windows, threads,
// typing, ...) all write through Store.set.

import type { Api } from './api';
import type { Unsubscribe } from './emitter';
import type { Gateway, GatewayOptions, WebSocketCtor } from './gateway';
import type { OutboxStorage } from './outbox';
import type { ViewSetOptions } from './viewset';
import type { BootChannel, BootLimits, ConnectionStatus, Message, ParleyEvent, Presence, Thread, ThreadsSummary, User, Workspace } from './types';

/** A message as the session holds it: pending while being sent, failed if sending failed. */
export interface LocalMessage extends Message {
	/** Sent by this client, not yet confirmed by the server. */
	pending?: boolean;
	/** Sending failed; `resend` tries again, `discard` drops it. */
	failed?: boolean;
	/** Why sending failed (the ApiError's message). */
	error?: string;
	/** Failed for now (no connection, the server busy): it is sent again by itself when the connection is back. */
	queued?: boolean;
}

/** A window of messages, ascending by seq. */
export interface MessageList {
	messages: LocalMessage[];
	/** The server has messages before the first one here. */
	hasOlder: boolean;
	/** The server has messages after the last one here (after a jump into history). */
	hasNewer: boolean;
	/** A page is being fetched. */
	loading: boolean;
	/** The first page arrived. */
	loaded: boolean;
	/** Threads only: the root message. */
	root?: Message;
	/** The last load failed with this error. */
	error?: string;
}

/** A channel or DM in the session: boot's thin view plus membership. */
export interface ChannelView extends BootChannel {
	/** False for a public channel the user is only looking at. */
	is_member: boolean;
	purpose?: string;
}

export interface TypingUser {
	userId: string;
	/** Epoch ms after which the indicator goes away. */
	until: number;
}

export interface ThreadList {
	items: Thread[];
	loading: boolean;
	loaded: boolean;
	unreadOnly: boolean;
	error?: string;
}

export interface SessionState {
	status: ConnectionStatus;
	self?: User;
	workspace?: Workspace;
	limits?: BootLimits;
	/** Public and private channels the user is in, by name. */
	channels: ChannelView[];
	/** DMs and group DMs, most recently active first. */
	dms: ChannelView[];
	/** Every channel the session knows, members' and previewed ones. */
	channelsById: Record<string, ChannelView>;
	/** Top-level messages per channel id (replies live in `replies`). */
	messages: Record<string, MessageList>;
	/** Replies per thread root id. */
	replies: Record<string, MessageList>;
	threads: ThreadList;
	/** For the sidebar's Threads badge: followed threads with unread replies, and their mentions. */
	threadsSummary: ThreadsSummary;
	/** Users resolved so far, by id. */
	users: Record<string, User>;
	/** Presence of the subscribed users. */
	presence: Record<string, Presence>;
	/** Who is typing, by typingKey(channelId, threadRootId). */
	typing: Record<string, TypingUser[]>;
	/**
	 * Channels in focus that the server says are hot (channel.hot): their
	 * events come batched and their typing sampled. Only channels in focus
	 * are told, so a channel leaving focus (or a new session) is dropped.
	 */
	hotChannels: Record<string, true>;
	/** The channel on screen. */
	activeChannelId?: string;
	/** The thread open in the side panel. */
	activeThreadId?: string;
}

/** A message the user should be told about (browser notification). */
export interface SessionNotification {
	kind: 'mention' | 'dm';
	message: Message;
	channel?: ChannelView;
}

export interface SessionEvents extends Record<string, unknown> {
	/** Every gateway event after the session applied it. */
	event: ParleyEvent;
	/** A mention or DM arrived while the user was not looking at it. */
	notify: SessionNotification;
	/** The token is gone (4004 or a 401): log in again. */
	loggedOut: undefined;
	/** A background operation failed (already reflected in state where it matters). */
	error: Error;
}

export interface SessionOptions {
	/** An Api to use (its token is the session's); else one is made from baseUrl and token. */
	api?: Api;
	baseUrl?: string;
	token?: string;
	/** WebSocket implementation (default globalThis.WebSocket). */
	WebSocket?: WebSocketCtor;
	/** Override boot's ws_url (tests, dev proxies). */
	gatewayUrl?: string;
	/** Page size of history loads (default 50). */
	pageSize?: number;
	/** How long a typing indicator shows without news (default 6 s). */
	typingTtlMs?: number;
	/** The view set's timing and cap (viewset.ts). */
	viewSet?: ViewSetOptions;
	/**
	 * Where the outbox keeps unsent messages across reloads (per user and
	 * workspace): default the page's localStorage when there is one; null
	 * keeps them in memory only.
	 */
	storage?: OutboxStorage | null;
	/** Passed to the Gateway (backoff, random, log). */
	gateway?: Partial<Pick<GatewayOptions, 'backoffMinMs' | 'backoffMaxMs' | 'random' | 'log'>>;
}

/** What every owner of a part of the session shares: the store, the API, the gateway, error reporting. */
export interface Core {
	readonly store: Store;
	readonly api: Api;
	readonly opts: SessionOptions;
	/** The gateway, once started (undefined before start and after stop). */
	gw(): Gateway | undefined;
	/** The workspace the session was started in. */
	workspaceId(): string | undefined;
	/** Report a background failure (the session's 'error' event). */
	fail(e: unknown): void;
}

/** The workspace id, or an error when the session was never started. */
export function requireWorkspace(core: Core): string {
	const ws = core.workspaceId();
	if (!ws) throw new Error('parley: session not started');
	return ws;
}

/** Holds the current snapshot; subscribers hear about changes once per microtask. */
export class Store {
	/** The current snapshot (replaced, never mutated, by set). */
	s: SessionState = {
		status: 'idle',
		channels: [],
		dms: [],
		channelsById: {},
		messages: {},
		replies: {},
		threads: { items: [], loading: false, loaded: false, unreadOnly: false },
		threadsSummary: { unread_threads: 0, unread_mentions: 0 },
		users: {},
		presence: {},
		typing: {},
		hotChannels: {},
	};
	private readonly subscribers = new Set<(s: SessionState) => void>();
	private notifyScheduled = false;

	/** Svelte store contract: fn now and after every change; returns unsubscribe. */
	subscribe(fn: (s: SessionState) => void): Unsubscribe {
		this.subscribers.add(fn);
		fn(this.s);
		return () => {
			this.subscribers.delete(fn);
		};
	}

	/** A new snapshot with patch applied; the channel lists follow channelsById. */
	set(patch: Partial<SessionState>): void {
		this.s = { ...this.s, ...patch };
		if (patch.channelsById) {
			const all = Object.values(this.s.channelsById).filter((c) => c.is_member);
			this.s.channels = all.filter((c) => c.kind === 'public' || c.kind === 'private').sort((a, b) => a.name.localeCompare(b.name));
			this.s.dms = all
				.filter((c) => c.kind === 'dm' || c.kind === 'group_dm')
				.sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
		}
		if (this.notifyScheduled) return;
		this.notifyScheduled = true;
		queueMicrotask(() => {
			this.notifyScheduled = false;
			for (const fn of [...this.subscribers]) {
				try {
					fn(this.s);
				} catch (e) {
					console.error('parley: subscriber failed', e);
				}
			}
		});
	}
}
