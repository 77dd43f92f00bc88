// Session: framework-agnostic client state for one user in one workspace.
//
// It boots (thin boot, then `since` boots after a lost session), keeps the
// channels and DMs with their unread and mention counts, message windows per
// channel and per thread (older pages on demand), followed threads, presence
// of the users on screen, typing indicators, and a user cache that resolves
// ids lazily: from boot's references, the just-in-time `users` of gateway
// events, and batched, deduplicated POST /users/batch calls. It never
// downloads the workspace's user list.
//
// State is published as immutable snapshots: every change makes a new
// SessionState object (and new objects for the parts that changed), so a UI
// can hold it in a Svelte 5 `$state.raw` or use the Svelte store contract:
// `subscribe(fn)` calls fn at once and after every change, and returns the
// function that unsubscribes.

import { Api, ApiError, newClientMsgId } from './api';
import { Emitter, type Unsubscribe } from './emitter';
import { Gateway, type GatewayOptions, type WebSocketCtor } from './gateway';
import type {
	Boot,
	BootChannel,
	BootLimits,
	Channel,
	ConnectionStatus,
	Message,
	ParleyEvent,
	Presence,
	Reaction,
	Thread,
	ThreadsSummary,
	User,
	Workspace,
} from './types';

/** A message as the session holds it: pending while being sent, failed if sending failed. */
export interface LocalMessage extends Message {
	/** Sent by this client, not yet confirmed by the server. */
	pending?: boolean;
	/** Sending failed; `resend` tries again, `discard` drops it. */
	failed?: boolean;
	/** Why sending failed (the ApiError's message). */
	error?: string;
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
	/** Passed to the Gateway (backoff, random, log). */
	gateway?: Partial<Pick<GatewayOptions, 'backoffMinMs' | 'backoffMaxMs' | 'random' | 'log'>>;
}

/** The key of `typing` for a channel, or a thread in it. */
export function typingKey(channelId: string, threadRootId?: string): string {
	return threadRootId ? `${channelId}/${threadRootId}` : channelId;
}

const EMPTY_LIST: MessageList = { messages: [], hasOlder: false, hasNewer: false, loading: false, loaded: false };

/** Whether text mentions the handle (or everyone via @channel / @here / @everyone). */
export function mentions(text: string, handle: string | undefined): boolean {
	const re = /(^|[^\w@.-])@([a-z0-9._-]{2,32})/gi;
	let m: RegExpExecArray | null;
	while ((m = re.exec(text))) {
		const h = m[2].toLowerCase().replace(/[.]+$/, '');
		if (h === 'channel' || h === 'here' || h === 'everyone') return true;
		if (handle && h === handle.toLowerCase()) return true;
	}
	return false;
}

function bySeq(a: Message, b: Message): number {
	return a.seq - b.seq;
}

/** Where m already is in list (by id, or a pending copy by client_msg_id), searching from the end. */
function indexOfMessage(list: LocalMessage[], m: LocalMessage): number {
	for (let i = list.length - 1; i >= 0; i--) {
		const x = list[i];
		if (x.id === m.id) return i;
		if (x.pending || x.failed) {
			if (m.client_msg_id && x.client_msg_id === m.client_msg_id && x.user_id === m.user_id) return i;
		} else if (x.seq < m.seq) {
			return -1; // the list is in seq order: m is not further back
		}
	}
	return -1;
}

/**
 * Insert or replace messages (by id, and pending ones by client_msg_id),
 * keeping seq order. The common cases, a new message at the end and an edit,
 * cost one scan and one copy; only out-of-order inserts sort.
 */
function mergeMessages(list: LocalMessage[], add: LocalMessage[]): LocalMessage[] {
	const out = list.slice();
	let sorted = true;
	for (const m of add) {
		const i = indexOfMessage(out, m);
		if (i >= 0) {
			out[i] = keepMe(out[i], m);
			if ((i > 0 && out[i - 1].seq > m.seq) || (i < out.length - 1 && out[i + 1].seq < m.seq)) sorted = false;
			continue;
		}
		// Pending messages (seq MAX_SAFE_INTEGER) stay last: insert before them.
		let j = out.length;
		while (j > 0 && out[j - 1].seq > m.seq && (out[j - 1].pending || out[j - 1].failed)) j--;
		if (j > 0 && out[j - 1].seq > m.seq) sorted = false;
		out.splice(j, 0, m);
	}
	return sorted ? out : out.sort(bySeq);
}

/** Event payloads carry reactions with me=false; keep what this session knows. */
function keepMe(old: Message, next: Message): LocalMessage {
	if (!old.reactions?.length || !next.reactions) return next;
	const mine = new Set(old.reactions.filter((r) => r.me).map((r) => r.emoji));
	if (!mine.size) return next;
	return { ...next, reactions: next.reactions.map((r) => (mine.has(r.emoji) && !r.me ? { ...r, me: true } : r)) };
}

function applyReaction(m: Message, emoji: string, add: boolean, mine: boolean): Message {
	const rs: Reaction[] = m.reactions ? m.reactions.map((r) => ({ ...r })) : [];
	const r = rs.find((x) => x.emoji === emoji);
	if (add) {
		if (r) {
			if (mine && r.me) return m; // already counted (our own HTTP answer got here first)
			r.count++;
			if (mine) r.me = true;
		} else {
			rs.push({ emoji, count: 1, me: mine });
		}
	} else if (r) {
		if (mine && !r.me) return m;
		r.count--;
		if (mine) r.me = false;
	}
	return { ...m, reactions: rs.filter((x) => x.count > 0) };
}

export class Session {
	readonly api: Api;
	private readonly opts: SessionOptions;
	private readonly emitter = new Emitter<SessionEvents>();
	private readonly subscribers = new Set<(s: SessionState) => void>();
	private s: SessionState;
	private gw: Gateway | undefined;
	private workspaceId: string | undefined;
	private bootVersion: string | undefined;
	private wsUrl: string | undefined;
	private notifyScheduled = false;
	private stopped = false;

	// user resolution
	private wantUsers = new Set<string>();
	private inflightUsers = new Map<string, Promise<void>>();
	private missingUsers = new Set<string>();
	private userFlush: ReturnType<typeof setTimeout> | undefined;
	private nextUserFlush: Promise<void> | undefined;

	private presenceIds = '';
	private typingSent = new Map<string, number>();
	private typingTimer: ReturnType<typeof setTimeout> | undefined;
	private readTimers = new Map<string, ReturnType<typeof setTimeout>>();
	private threadsRefresh: ReturnType<typeof setTimeout> | undefined;
	private visible = true;
	/** The last known unread state of threads, to keep threadsSummary by deltas. */
	private threadUnread = new Map<string, { replies: number; mentions: number }>();
	private summaryRefresh: ReturnType<typeof setTimeout> | undefined;
	/** Messages already notified (a mention may come as message.created and as mention). */
	private notified = new Set<string>();
	/** Replies already counted in their root's reply_count. */
	private countedReplies = new Set<string>();
	private deletedReplies = new Set<string>();
	private unlistenVisibility: (() => void) | undefined;
	/**
	 * Per channel, while loadLatest is out: the top-level messages created or
	 * updated and the ids deleted meanwhile. The page may predate them, and
	 * the list ignores them until it is loaded; they are applied to the page.
	 */
	private duringLoad = new Map<string, { msgs: Message[]; deleted: Set<string> }>();

	constructor(opts: SessionOptions = {}) {
		this.opts = opts;
		this.api =
			opts.api ??
			new Api({
				baseUrl: opts.baseUrl,
				token: opts.token,
				onUnauthorized: () => this.loggedOut(),
			});
		this.s = {
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
		};
		if (typeof document !== 'undefined' && typeof window !== 'undefined') {
			const onVis = () => this.setVisible(document.visibilityState === 'visible');
			// Back online: retry now rather than at the end of a long backoff.
			const onOnline = () => {
				if (this.gw?.status === 'reconnecting' || this.gw?.status === 'connecting') this.gw.reconnectNow();
			};
			document.addEventListener('visibilitychange', onVis);
			window.addEventListener('online', onOnline);
			this.unlistenVisibility = () => {
				document.removeEventListener('visibilitychange', onVis);
				window.removeEventListener('online', onOnline);
			};
			this.visible = document.visibilityState === 'visible';
		}
	}

	// ---- observing ------------------------------------------------------

	/** The current snapshot. */
	get state(): SessionState {
		return this.s;
	}

	/** Svelte store contract: fn now and after every change; returns unsubscribe. */
	subscribe(fn: (s: SessionState) => void): Unsubscribe {
		this.subscribers.add(fn);
		fn(this.s);
		return () => {
			this.subscribers.delete(fn);
		};
	}

	/** Discrete happenings: 'event', 'notify', 'loggedOut', 'error'. */
	on<K extends keyof SessionEvents>(type: K, fn: (v: SessionEvents[K]) => void): Unsubscribe {
		return this.emitter.on(type, fn);
	}

	/** The gateway in use (after start), e.g. for its stats. */
	get gateway(): Gateway | undefined {
		return this.gw;
	}

	private set(patch: Partial<SessionState>): void {
		this.s = { ...this.s, ...patch };
		if (patch.channelsById) {
			const all = Object.values(this.s.channelsById).filter((c) => c.is_member);
			this.s.channels = all.filter((c) => c.kind === 'public' || c.kind === 'private').sort((a, b) => a.name.localeCompare(b.name));
			this.s.dms = all.filter((c) => c.kind === 'dm' || c.kind === 'group_dm').sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
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

	private fail(e: unknown): void {
		this.emitter.emit('error', e instanceof Error ? e : new Error(String(e)));
	}

	// ---- lifecycle ------------------------------------------------------

	/**
	 * Boot into a workspace and connect the gateway. With channelId, a
	 * one-channel-first boot runs in parallel so that channel shows at once.
	 * Resolves when the full boot is applied (the socket connects after).
	 */
	async start(workspaceId: string, opts: { channelId?: string } = {}): Promise<void> {
		this.workspaceId = workspaceId;
		this.stopped = false;
		this.set({ status: 'connecting' });
		const first = opts.channelId
			? this.api.boot({ workspace_id: workspaceId, channel_id: opts.channelId }).then(
					(b) => this.applyFirstChannelBoot(b),
					() => undefined,
				)
			: undefined;
		let boot: Boot;
		try {
			boot = await this.api.boot({ workspace_id: workspaceId });
		} catch (e) {
			this.set({ status: 'idle' });
			throw e;
		}
		const shown = await first;
		if (this.stopped) return;
		this.applyBoot(boot, false);
		const channels: Record<string, number> = {};
		for (const c of [...boot.channels, ...boot.dms]) channels[c.id] = c.last_seq;
		// The first channel's messages came from the one-channel boot: when the
		// full boot is further on, the gateway catches that channel up from
		// where those messages end (unread counts already include the rest).
		if (shown && channels[shown.id] !== undefined && shown.seq < channels[shown.id]) channels[shown.id] = shown.seq;
		this.wsUrl = boot.ws_url;
		const gw = new Gateway({
			api: this.api,
			workspaceId,
			// Asked on every connect: a later boot may name another node.
			url: () => this.opts.gatewayUrl || this.wsUrl || this.api.gatewayUrl(),
			WebSocket: this.opts.WebSocket,
			channels,
			...this.opts.gateway,
		});
		this.gw = gw;
		gw.on('event', (ev) => this.onEvent(ev));
		gw.on('status', (st) => {
			this.set({ status: st });
			if (st === 'logged_out') this.loggedOut();
		});
		gw.on('invalidSession', () => void this.reboot());
		gw.on('channelLost', ({ channelId }) => this.removeChannel(channelId));
		gw.start();
		// What the view asked for before the gateway existed.
		const focus = this.s.activeChannelId;
		if (focus) gw.focus([focus]);
		if (this.presenceIds) gw.presenceSub(this.presenceIds.split(','));
	}

	/** Disconnect and stop all timers. State stays readable. */
	stop(): void {
		this.stopped = true;
		this.gw?.stop();
		this.gw = undefined;
		clearTimeout(this.typingTimer);
		clearTimeout(this.threadsRefresh);
		clearTimeout(this.summaryRefresh);
		for (const t of this.readTimers.values()) clearTimeout(t);
		this.readTimers.clear();
		this.unlistenVisibility?.();
		this.unlistenVisibility = undefined;
		this.set({ status: 'idle' });
	}

	/** Log out (revoking the token) and stop. */
	async logout(): Promise<void> {
		this.stop();
		try {
			await this.api.logout();
		} catch {
			// the token is forgotten either way
		}
	}

	private loggedOut(): void {
		this.gw?.stop();
		this.set({ status: 'logged_out' });
		this.emitter.emit('loggedOut', undefined);
	}

	/** The page became visible or hidden: messages on screen are read only while visible. */
	setVisible(visible: boolean): void {
		this.visible = visible;
		if (visible && this.s.activeChannelId) this.scheduleRead(this.s.activeChannelId, 0);
	}

	private toView(c: BootChannel | Channel, isMember: boolean): ChannelView {
		return {
			id: c.id,
			name: c.name,
			kind: c.kind,
			topic: c.topic,
			purpose: (c as Channel).purpose,
			member_count: c.member_count,
			last_seq: c.last_seq,
			last_read_seq: c.last_read_seq,
			unread_count: c.unread_count ?? 0,
			mention_count: c.mention_count ?? 0,
			updated_at: c.updated_at,
			archived_at: c.archived_at,
			dm_user_ids: c.dm_user_ids,
			is_member: isMember,
		};
	}

	/** Show the one-channel-first boot; returns the channel and its last seq when its messages were shown. */
	private applyFirstChannelBoot(b: Boot): { id: string; seq: number } | undefined {
		if (this.stopped || this.s.self) return undefined; // the full boot won the race
		const byId = { ...this.s.channelsById };
		const c = b.channels[0] ?? b.channel;
		if (c) byId[c.id] = this.toView(c, true);
		this.addUsers(b.users ?? []);
		this.addUsers([b.self]);
		const patch: Partial<SessionState> = { self: b.self, workspace: b.workspace, limits: b.limits, channelsById: byId };
		if (c && b.messages) {
			const size = this.opts.pageSize ?? 50;
			patch.messages = {
				...this.s.messages,
				[c.id]: { messages: b.messages.filter((m) => !m.thread_root_id), hasOlder: b.messages.length >= size, hasNewer: false, loading: false, loaded: true },
			};
		}
		this.set(patch);
		return c && b.messages ? { id: c.id, seq: c.last_seq } : undefined;
	}

	private applyBoot(b: Boot, since: boolean): void {
		this.bootVersion = b.version;
		if (b.ws_url) this.wsUrl = b.ws_url;
		const byId: Record<string, ChannelView> = since ? { ...this.s.channelsById } : {};
		if (!since) {
			// Keep previewed (non-member) channels the UI may be showing.
			for (const c of Object.values(this.s.channelsById)) if (!c.is_member) byId[c.id] = c;
		}
		for (const c of [...b.channels, ...b.dms]) byId[c.id] = this.toView(c, true);
		if (since && b.channel_ids) {
			const keep = new Set(b.channel_ids);
			for (const c of Object.values(byId)) if (c.is_member && !keep.has(c.id)) delete byId[c.id];
		}
		for (const c of [...b.channels, ...b.dms]) this.gw?.trackChannel(c.id, c.last_seq);
		this.addUsers([b.self, ...(b.users ?? [])]);
		this.set({ self: b.self, workspace: b.workspace, limits: b.limits ?? this.s.limits, channelsById: byId });
		if (b.threads) {
			this.threadUnread.clear();
			this.set({ threadsSummary: { unread_threads: b.threads.unread_threads, unread_mentions: b.threads.unread_mentions } });
		}
		const dmUsers = b.dms.flatMap((d) => d.dm_user_ids ?? []);
		if (dmUsers.length) void this.ensureUsers(dmUsers);
	}

	/** After a lost session: boot again (only what changed) to refresh counts and channels. */
	private async reboot(): Promise<void> {
		if (!this.workspaceId) return;
		try {
			const b = await this.api.boot({ workspace_id: this.workspaceId, since: this.bootVersion });
			if (!this.stopped) this.applyBoot(b, !!this.bootVersion);
		} catch (e) {
			this.fail(e);
		}
	}

	// ---- users ----------------------------------------------------------

	private addUsers(users: User[]): void {
		if (!users.length) return;
		const next = { ...this.s.users };
		for (const u of users) {
			if (!u) continue;
			const old = next[u.id];
			// The user's own object carries email; public copies do not.
			next[u.id] = old?.email && !u.email ? { ...u, email: old.email } : u;
			this.missingUsers.delete(u.id);
		}
		this.set({ users: next });
	}

	/** A cached user, or undefined (and a lookup is scheduled). */
	user(id: string): User | undefined {
		const u = this.s.users[id];
		if (!u) void this.ensureUsers([id]);
		return u;
	}

	/**
	 * Resolve users by id: ids not cached yet are fetched with POST
	 * /users/batch, batched across callers of the same tick and deduplicated
	 * against lookups in flight. Resolves when those lookups finished.
	 */
	ensureUsers(ids: string[]): Promise<void> {
		const waits = new Set<Promise<void>>();
		for (const id of ids) {
			if (!id || this.s.users[id] || this.missingUsers.has(id)) continue;
			const inflight = this.inflightUsers.get(id);
			if (inflight) {
				waits.add(inflight);
				continue;
			}
			this.wantUsers.add(id);
			waits.add(this.scheduleUserFlush());
		}
		return waits.size ? Promise.all(waits).then(() => undefined) : Promise.resolve();
	}

	/** The promise of the next batch lookup, scheduling it if needed. */
	private scheduleUserFlush(): Promise<void> {
		if (!this.nextUserFlush) {
			this.nextUserFlush = new Promise<void>((resolve) => {
				this.userFlush = setTimeout(() => {
					this.userFlush = undefined;
					this.nextUserFlush = undefined;
					this.flushUsers().then(resolve, resolve);
				}, 0);
			});
		}
		return this.nextUserFlush;
	}

	private async flushUsers(): Promise<void> {
		const ids = [...this.wantUsers];
		this.wantUsers.clear();
		const max = this.s.limits?.max_batch_users || 200;
		const calls: Promise<void>[] = [];
		for (let i = 0; i < ids.length; i += max) {
			const chunk = ids.slice(i, i + max);
			const call = this.api.usersBatch(chunk).then(
				(r) => {
					this.addUsers(r.users);
					const got = new Set(r.users.map((u) => u.id));
					for (const id of chunk) if (!got.has(id)) this.missingUsers.add(id);
				},
				(e) => this.fail(e),
			);
			const done = call.finally(() => {
				for (const id of chunk) if (this.inflightUsers.get(id) === done) this.inflightUsers.delete(id);
			});
			for (const id of chunk) this.inflightUsers.set(id, done);
			calls.push(done);
		}
		await Promise.all(calls);
	}

	/** The users whose presence dots are on screen; replaces the previous set. */
	setPresenceView(userIds: string[]): void {
		const ids = [...new Set(userIds)].sort();
		const key = ids.join(',');
		if (key === this.presenceIds) return;
		this.presenceIds = key;
		this.gw?.presenceSub(ids);
	}

	// ---- channels -------------------------------------------------------

	/**
	 * Show a channel: it becomes the focus, its latest messages are loaded if
	 * they are not, and it is marked read. A public channel the user is not in
	 * is previewed (is_member false).
	 */
	async openChannel(channelId: string): Promise<void> {
		this.set({ activeChannelId: channelId });
		this.gw?.focus([channelId]);
		if (!this.s.channelsById[channelId]) {
			try {
				const c = await this.api.getChannel(channelId);
				this.set({ channelsById: { ...this.s.channelsById, [c.id]: this.toView(c, c.is_member) } });
			} catch (e) {
				this.fail(e);
				throw e;
			}
		}
		const list = this.s.messages[channelId];
		if (!list?.loaded || list.hasNewer) await this.loadLatest(channelId);
		this.scheduleRead(channelId, 0);
	}

	/** Leave the channel view (e.g. for the Threads view). */
	closeChannel(): void {
		this.set({ activeChannelId: undefined });
		this.gw?.focus([]);
	}

	private setList(kind: 'messages' | 'replies', id: string, patch: Partial<MessageList>): void {
		const cur = this.s[kind][id] ?? EMPTY_LIST;
		this.set({ [kind]: { ...this.s[kind], [id]: { ...cur, ...patch } } } as Partial<SessionState>);
	}

	private authorsOf(ms: Message[]): void {
		const ids = new Set<string>();
		for (const m of ms) ids.add(m.user_id);
		if (ids.size) void this.ensureUsers([...ids]);
	}

	/** Load the latest page of a channel (replacing a window that jumped into history). */
	async loadLatest(channelId: string): Promise<void> {
		const size = this.opts.pageSize ?? 50;
		this.setList('messages', channelId, { loading: true, error: undefined });
		let live = this.duringLoad.get(channelId);
		if (!live) this.duringLoad.set(channelId, (live = { msgs: [], deleted: new Set() }));
		try {
			const page = await this.api.listMessages(channelId, { limit: size });
			if (this.duringLoad.get(channelId) === live) this.duringLoad.delete(channelId);
			const cur = this.s.messages[channelId];
			const pending = (cur?.messages ?? []).filter((m) => m.pending || m.failed);
			const pageLast = page.messages.at(-1)?.seq ?? 0;
			const keepLive = cur?.loaded && !cur.hasNewer ? cur.messages.filter((m) => !m.pending && !m.failed && m.seq > pageLast) : [];
			const inPage = new Set(page.messages.map((m) => m.id));
			const arrived = live.msgs.filter((m) => m.seq > pageLast || inPage.has(m.id));
			const msgs = mergeMessages(page.messages.filter((m) => !m.thread_root_id), [...keepLive, ...arrived, ...pending]).filter((m) => !live.deleted.has(m.id));
			this.setList('messages', channelId, { messages: msgs, hasOlder: page.messages.length >= size, hasNewer: false, loading: false, loaded: true });
			this.authorsOf(page.messages);
		} catch (e) {
			if (this.duringLoad.get(channelId) === live) this.duringLoad.delete(channelId);
			this.setList('messages', channelId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	/** Load the page before the first loaded message; resolves false when there is no more. */
	async loadOlder(channelId: string): Promise<boolean> {
		const cur = this.s.messages[channelId];
		if (!cur?.loaded) {
			await this.loadLatest(channelId);
			return this.s.messages[channelId]?.hasOlder ?? false;
		}
		if (cur.loading || !cur.hasOlder) return cur.hasOlder;
		const first = cur.messages.find((m) => !m.pending && !m.failed);
		if (!first) return false;
		const size = this.opts.pageSize ?? 50;
		this.setList('messages', channelId, { loading: true });
		try {
			const page = await this.api.listMessages(channelId, { before_seq: first.seq, limit: size });
			const now = this.s.messages[channelId] ?? EMPTY_LIST;
			const hasOlder = page.messages.length >= size;
			this.setList('messages', channelId, {
				messages: mergeMessages(now.messages, page.messages.filter((m) => !m.thread_root_id)),
				hasOlder,
				loading: false,
			});
			this.authorsOf(page.messages);
			return hasOlder;
		} catch (e) {
			this.setList('messages', channelId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	/** Load the page after the last loaded message (after a jump); resolves false at the newest. */
	async loadNewer(channelId: string): Promise<boolean> {
		const cur = this.s.messages[channelId];
		if (!cur?.loaded || !cur.hasNewer || cur.loading) return cur?.hasNewer ?? false;
		const last = [...cur.messages].reverse().find((m) => !m.pending && !m.failed);
		if (!last) {
			await this.loadLatest(channelId);
			return false;
		}
		const size = this.opts.pageSize ?? 50;
		this.setList('messages', channelId, { loading: true });
		try {
			const page = await this.api.listMessages(channelId, { after_seq: last.seq, limit: size });
			const now = this.s.messages[channelId] ?? EMPTY_LIST;
			const hasNewer = page.messages.length >= size;
			this.setList('messages', channelId, { messages: mergeMessages(now.messages, page.messages.filter((m) => !m.thread_root_id)), hasNewer, loading: false });
			this.authorsOf(page.messages);
			return hasNewer;
		} catch (e) {
			this.setList('messages', channelId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	/**
	 * Jump to a message (search results): load a window around its seq. A
	 * reply opens its thread instead, with the window around the root.
	 * Resolves with the message's id to scroll to.
	 */
	async jumpTo(message: Pick<Message, 'id' | 'channel_id' | 'seq' | 'thread_root_id'>): Promise<string> {
		const ch = message.channel_id;
		this.set({ activeChannelId: ch });
		this.gw?.focus([ch]);
		if (!this.s.channelsById[ch]) {
			const c = await this.api.getChannel(ch);
			this.set({ channelsById: { ...this.s.channelsById, [c.id]: this.toView(c, c.is_member) } });
		}
		let seq = message.seq;
		if (message.thread_root_id) {
			const root = await this.api.getMessage(message.thread_root_id);
			seq = root.seq;
			void this.openThread(root.id);
		}
		const cur = this.s.messages[ch];
		if (cur?.loaded && cur.messages.some((m) => m.seq === seq)) return message.thread_root_id ?? message.id;
		const half = Math.max(10, Math.floor((this.opts.pageSize ?? 50) / 2));
		this.setList('messages', ch, { loading: true });
		const [before, after] = await Promise.all([
			this.api.listMessages(ch, { before_seq: seq + 1, limit: half }),
			this.api.listMessages(ch, { after_seq: seq, limit: half }),
		]);
		const msgs = [...before.messages, ...after.messages].filter((m) => !m.thread_root_id);
		this.setList('messages', ch, {
			messages: mergeMessages([], msgs),
			hasOlder: before.messages.length >= half,
			hasNewer: after.messages.length >= half,
			loading: false,
			loaded: true,
		});
		this.authorsOf(msgs);
		return message.thread_root_id ?? message.id;
	}

	/** Move the read marker to the channel's last seq (no call if already there). */
	async markRead(channelId: string): Promise<void> {
		const c = this.s.channelsById[channelId];
		if (!c || !c.is_member) return;
		const seq = c.last_seq;
		if (c.last_read_seq >= seq && !c.unread_count && !c.mention_count) return;
		this.patchChannel(channelId, { last_read_seq: Math.max(seq, c.last_read_seq), unread_count: 0, mention_count: 0 });
		try {
			await this.api.markRead(channelId, seq);
		} catch (e) {
			this.fail(e);
		}
	}

	private scheduleRead(channelId: string, delayMs: number): void {
		if (!this.visible) return;
		clearTimeout(this.readTimers.get(channelId));
		this.readTimers.set(
			channelId,
			setTimeout(() => {
				this.readTimers.delete(channelId);
				if (this.s.activeChannelId === channelId && this.visible) void this.markRead(channelId);
			}, delayMs),
		);
	}

	private patchChannel(id: string, patch: Partial<ChannelView>): void {
		const c = this.s.channelsById[id];
		if (!c) return;
		this.set({ channelsById: { ...this.s.channelsById, [id]: { ...c, ...patch } } });
	}

	private removeChannel(id: string): void {
		const c = this.s.channelsById[id];
		if (!c) return;
		const byId = { ...this.s.channelsById };
		if (c.kind === 'public') byId[id] = { ...c, is_member: false };
		else delete byId[id];
		this.set({ channelsById: byId });
	}

	private addChannel(c: Channel | BootChannel, isMember: boolean): void {
		const old = this.s.channelsById[c.id];
		const v = this.toView(c, isMember);
		if (old) {
			// Event copies of a channel carry no caller-relative state.
			v.last_read_seq = Math.max(old.last_read_seq, v.last_read_seq);
			v.unread_count = old.unread_count;
			v.mention_count = old.mention_count;
			v.last_seq = Math.max(old.last_seq, v.last_seq);
		}
		this.set({ channelsById: { ...this.s.channelsById, [c.id]: v } });
		this.gw?.trackChannel(c.id, v.last_seq);
		if (v.dm_user_ids?.length) void this.ensureUsers(v.dm_user_ids);
	}

	/** Create a channel; the user is its first member. */
	async createChannel(name: string, kind: 'public' | 'private' = 'public', topic?: string): Promise<ChannelView> {
		const c = await this.api.createChannel(this.requireWorkspace(), { name, kind, topic });
		this.addChannel({ ...c, last_read_seq: c.last_seq }, true);
		return this.s.channelsById[c.id];
	}

	/** Join a public channel. */
	async joinChannel(channelId: string): Promise<ChannelView> {
		const c = await this.api.joinChannel(channelId);
		this.addChannel({ ...c, last_read_seq: c.last_seq, unread_count: 0, mention_count: 0 }, true);
		return this.s.channelsById[c.id];
	}

	async leaveChannel(channelId: string): Promise<void> {
		await this.api.leaveChannel(channelId);
		this.removeChannel(channelId);
	}

	/** Open (or find) a DM with the given users (the caller is implied). */
	async openDM(userIds: string[]): Promise<ChannelView> {
		const c = await this.api.openDM(this.requireWorkspace(), userIds);
		this.addChannel(c, true);
		return this.s.channelsById[c.id];
	}

	private requireWorkspace(): string {
		if (!this.workspaceId) throw new Error('parley: session not started');
		return this.workspaceId;
	}

	// ---- messages -------------------------------------------------------

	/**
	 * Send a message. It shows at once as pending and is replaced by the
	 * server's copy; on failure it stays with `failed` set.
	 */
	async send(channelId: string, text: string, threadRootId?: string): Promise<Message> {
		const cmid = newClientMsgId();
		const local: LocalMessage = {
			id: `local:${cmid}`,
			workspace_id: this.workspaceId ?? '',
			channel_id: channelId,
			seq: Number.MAX_SAFE_INTEGER,
			user_id: this.s.self?.id ?? '',
			text,
			client_msg_id: cmid,
			created_at: new Date().toISOString(),
			thread_root_id: threadRootId,
			reply_count: 0,
			pinned: false,
			reactions: [],
			pending: true,
		};
		return this.sendLocal(local);
	}

	private async sendLocal(local: LocalMessage): Promise<Message> {
		const kind = local.thread_root_id ? 'replies' : 'messages';
		const key = local.thread_root_id ?? local.channel_id;
		this.putLocal(kind, key, local);
		try {
			const m = await this.api.postMessage(local.channel_id, { text: local.text, client_msg_id: local.client_msg_id!, thread_root_id: local.thread_root_id });
			this.upsertMessage(m);
			return m;
		} catch (e) {
			const why = e instanceof ApiError ? `${e.message} (${e.status || e.code})` : String(e);
			this.putLocal(kind, key, { ...local, pending: false, failed: true, error: why });
			this.fail(e);
			throw e;
		}
	}

	private putLocal(kind: 'messages' | 'replies', key: string, m: LocalMessage): void {
		const cur = this.s[kind][key];
		if (kind === 'messages' && (!cur?.loaded || cur.hasNewer)) return;
		const list = (cur?.messages ?? []).filter((x) => x.id !== m.id);
		this.setList(kind, key, { messages: [...list, m].sort(bySeq), loaded: cur?.loaded ?? kind === 'replies' });
	}

	/** Try a failed message again (same client_msg_id: never posted twice). */
	resend(local: LocalMessage): Promise<Message> {
		return this.sendLocal({ ...local, failed: false, pending: true, error: undefined });
	}

	/** Drop a failed message from the list. */
	discard(local: LocalMessage): void {
		const kind = local.thread_root_id ? 'replies' : 'messages';
		const key = local.thread_root_id ?? local.channel_id;
		const cur = this.s[kind][key];
		if (cur) this.setList(kind, key, { messages: cur.messages.filter((m) => m.id !== local.id) });
	}

	async editMessage(messageId: string, text: string): Promise<Message> {
		const m = await this.api.editMessage(messageId, text);
		this.upsertMessage(m);
		return m;
	}

	async deleteMessage(messageId: string): Promise<void> {
		await this.api.deleteMessage(messageId);
		this.dropMessage(messageId);
	}

	/** Toggle the user's reaction on a message. */
	async toggleReaction(message: Message, emoji: string): Promise<void> {
		const mine = message.reactions?.some((r) => r.emoji === emoji && r.me);
		const m = mine ? await this.api.removeReaction(message.id, emoji) : await this.api.addReaction(message.id, emoji);
		if (m) this.upsertMessage(m, true);
	}

	async react(messageId: string, emoji: string): Promise<void> {
		const m = await this.api.addReaction(messageId, emoji);
		if (m) this.upsertMessage(m, true);
	}

	async unreact(messageId: string, emoji: string): Promise<void> {
		const m = await this.api.removeReaction(messageId, emoji);
		if (m) this.upsertMessage(m, true);
	}

	/** Say the user is typing (throttled to one op per 3 s per channel or thread). */
	typing(channelId: string, threadRootId?: string): void {
		const key = typingKey(channelId, threadRootId);
		const now = Date.now();
		if ((this.typingSent.get(key) ?? 0) + 3000 > now) return;
		this.typingSent.set(key, now);
		this.gw?.typing(channelId, threadRootId);
	}

	/** Every loaded copy of a message, replaced; `own` answers carry the caller's `me`. */
	private upsertMessage(m: Message, own = false): void {
		if (m.thread_root_id) {
			this.countReply(m);
			const cur = this.s.replies[m.thread_root_id];
			if (cur) this.setList('replies', m.thread_root_id, { messages: own ? this.replaceOwn(cur.messages, m) : mergeMessages(cur.messages, [m]) });
		} else {
			this.duringLoad.get(m.channel_id)?.msgs.push(m);
			const cur = this.s.messages[m.channel_id];
			if (cur?.loaded) {
				const present = indexOfMessage(cur.messages, m) >= 0;
				if (present || !cur.hasNewer) {
					let msgs = own ? this.replaceOwn(cur.messages, m) : mergeMessages(cur.messages, [m]);
					let hasOlder = cur.hasOlder;
					// A channel that is not on screen keeps only its latest messages
					// (older ones load again on demand): busy background channels
					// must not grow without bound.
					const cap = 4 * (this.opts.pageSize ?? 50);
					if (!present && m.channel_id !== this.s.activeChannelId && msgs.length > cap) {
						msgs = msgs.slice(msgs.length - cap);
						hasOlder = true;
					}
					this.setList('messages', m.channel_id, { messages: msgs, hasOlder });
				}
			}
			for (const [rootId, list] of Object.entries(this.s.replies)) {
				if (rootId === m.id && list.root) this.setList('replies', rootId, { root: own ? m : keepMe(list.root, m) });
			}
		}
	}

	/**
	 * Bump the root's reply_count for a confirmed reply, once per reply id,
	 * whichever copy comes first (the HTTP answer, message.created, or
	 * thread.updated, which sets the count outright).
	 */
	private countReply(m: Message, absolute?: { reply_count: number; last_reply_at: string }): void {
		if (!m.thread_root_id || m.id.startsWith('local:')) return;
		if (this.countedReplies.has(m.id) && !absolute) return;
		this.countedReplies.add(m.id);
		if (this.countedReplies.size > 5000) this.countedReplies.delete(this.countedReplies.values().next().value!);
		this.mapMessage(m.thread_root_id, (r) =>
			absolute ? { ...r, reply_count: absolute.reply_count, last_reply_at: absolute.last_reply_at } : { ...r, reply_count: r.reply_count + 1, last_reply_at: m.created_at },
		);
	}

	private replaceOwn(list: LocalMessage[], m: Message): LocalMessage[] {
		return mergeMessages(
			list.map((x) => (x.id === m.id ? m : x)),
			list.some((x) => x.id === m.id) ? [] : [m],
		);
	}

	private mapMessage(id: string, fn: (m: Message) => Message): void {
		let patchMessages: Record<string, MessageList> | undefined;
		for (const [ch, list] of Object.entries(this.s.messages)) {
			const i = list.messages.findIndex((x) => x.id === id);
			if (i < 0) continue;
			const msgs = list.messages.slice();
			msgs[i] = fn(msgs[i]);
			patchMessages = { ...(patchMessages ?? this.s.messages), [ch]: { ...list, messages: msgs } };
		}
		let patchReplies: Record<string, MessageList> | undefined;
		for (const [root, list] of Object.entries(this.s.replies)) {
			const i = list.messages.findIndex((x) => x.id === id);
			const isRoot = list.root?.id === id;
			if (i < 0 && !isRoot) continue;
			const msgs = i >= 0 ? list.messages.slice() : list.messages;
			if (i >= 0) msgs[i] = fn(msgs[i]);
			patchReplies = { ...(patchReplies ?? this.s.replies), [root]: { ...list, messages: msgs, root: isRoot && list.root ? fn(list.root) : list.root } };
		}
		const patch: Partial<SessionState> = {};
		if (patchMessages) patch.messages = patchMessages;
		if (patchReplies) patch.replies = patchReplies;
		if (patchMessages || patchReplies) this.set(patch);
	}

	private dropMessage(id: string): void {
		for (const l of this.duringLoad.values()) l.deleted.add(id);
		const messages = { ...this.s.messages };
		let changed = false;
		for (const [ch, list] of Object.entries(messages)) {
			if (list.messages.some((m) => m.id === id)) {
				messages[ch] = { ...list, messages: list.messages.filter((m) => m.id !== id) };
				changed = true;
			}
		}
		const replies = { ...this.s.replies };
		for (const [root, list] of Object.entries(replies)) {
			if (list.messages.some((m) => m.id === id)) {
				replies[root] = { ...list, messages: list.messages.filter((m) => m.id !== id) };
				changed = true;
			}
		}
		if (changed) this.set({ messages, replies });
	}

	// ---- threads --------------------------------------------------------

	/** Open a thread in the side panel: its root and all its replies. */
	async openThread(rootId: string): Promise<void> {
		this.set({ activeThreadId: rootId });
		const cur = this.s.replies[rootId];
		if (cur?.loaded) return;
		this.setList('replies', rootId, { loading: true, error: undefined });
		try {
			const [root, first] = await Promise.all([this.api.getMessage(rootId), this.api.listReplies(rootId, { limit: 200 })]);
			let msgs = first.messages;
			let page = first;
			while (page.next_cursor && msgs.length < 2000) {
				page = await this.api.listReplies(rootId, { after_seq: msgs.at(-1)!.seq, limit: 200 });
				msgs = msgs.concat(page.messages);
			}
			const now = this.s.replies[rootId];
			this.setList('replies', rootId, { root, messages: mergeMessages(now?.messages ?? [], msgs), loading: false, loaded: true, hasOlder: false, hasNewer: false });
			this.authorsOf([root, ...msgs]);
		} catch (e) {
			this.setList('replies', rootId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	closeThread(): void {
		this.set({ activeThreadId: undefined });
	}

	/** Load the followed threads (all, or only those with unread replies). */
	async loadThreads(unreadOnly = false): Promise<void> {
		this.set({ threads: { ...this.s.threads, loading: true, unreadOnly, error: undefined } });
		try {
			const r = await this.api.listThreads(this.requireWorkspace(), { unread: unreadOnly, limit: 50 });
			this.set({ threads: { items: r.threads, loading: false, loaded: true, unreadOnly } });
			for (const t of r.threads) this.threadUnread.set(t.root_id, { replies: t.unread_replies, mentions: t.unread_mentions });
			if (!unreadOnly && !r.next_cursor) {
				this.set({
					threadsSummary: {
						unread_threads: r.threads.filter((t) => t.unread_replies > 0).length,
						unread_mentions: r.threads.reduce((n, t) => n + t.unread_mentions, 0),
					},
				});
			}
			this.authorsOf(r.threads.flatMap((t) => (t.root ? [t.root] : [])));
		} catch (e) {
			this.set({ threads: { ...this.s.threads, loading: false, error: (e as Error).message } });
			throw e;
		}
	}

	async markThreadRead(rootId: string): Promise<void> {
		// Nothing to do when the thread is known to be read: calling again and
		// again (say, from a UI effect) costs no requests.
		const known = this.threadUnread.get(rootId);
		if (known && !known.replies && !known.mentions) return;
		try {
			const t = await this.api.markThreadRead(rootId);
			this.applyThread(t, 'read');
		} catch (e) {
			this.fail(e);
		}
	}

	/** Apply a thread's new state (from an event or an answer): list entry, root message, summary. */
	private applyThread(t: Thread, why: 'updated' | 'read' | 'followed' | 'unfollowed', reply?: Message): void {
		const prev = this.threadUnread.get(t.root_id) ?? this.s.threads.items.find((x) => x.root_id === t.root_id);
		const cur = { replies: t.unread_replies ?? 0, mentions: t.unread_mentions ?? 0 };
		let before: { replies: number; mentions: number } | undefined;
		if (prev) before = 'replies' in prev ? prev : { replies: prev.unread_replies, mentions: prev.unread_mentions };
		else if (why === 'updated' && reply) {
			// Unknown before: this reply is the only change.
			const self = this.s.self;
			const mine = self && reply.user_id === self.id;
			before = { replies: mine ? cur.replies : Math.max(0, cur.replies - 1), mentions: !mine && mentions(reply.text, self?.handle) ? Math.max(0, cur.mentions - 1) : cur.mentions };
		}
		this.threadUnread.set(t.root_id, cur);
		if (before) {
			const sum = this.s.threadsSummary;
			this.set({
				threadsSummary: {
					unread_threads: Math.max(0, sum.unread_threads + (cur.replies > 0 ? 1 : 0) - (before.replies > 0 ? 1 : 0)),
					unread_mentions: Math.max(0, sum.unread_mentions + cur.mentions - before.mentions),
				},
			});
		} else {
			this.refreshSummarySoon();
		}
		// The list: replace the entry (keeping its root), add a newly followed one, drop an unfollowed one.
		const items = this.s.threads.items;
		const i = items.findIndex((x) => x.root_id === t.root_id);
		let next = items;
		if (why === 'unfollowed' || t.following === false) {
			if (i >= 0) next = items.filter((x) => x.root_id !== t.root_id);
		} else if (i >= 0) {
			next = items.slice();
			next[i] = { ...items[i], ...t, root: t.root ?? items[i].root };
			if (why === 'updated') next.sort((a, b) => Date.parse(b.last_reply_at) - Date.parse(a.last_reply_at));
		} else if (this.s.threads.loaded && (why === 'updated' || why === 'followed') && (!this.s.threads.unreadOnly || cur.replies > 0)) {
			next = [t, ...items];
			this.refreshThreadsSoon(); // to get its root message
		}
		if (next !== items) this.set({ threads: { ...this.s.threads, items: next } });
		if (typeof t.reply_count === 'number') {
			if (reply) this.countReply(reply, { reply_count: t.reply_count, last_reply_at: t.last_reply_at });
			else this.mapMessage(t.root_id, (r) => (r.reply_count === t.reply_count ? r : { ...r, reply_count: t.reply_count, last_reply_at: t.last_reply_at }));
		}
	}

	/** When the summary cannot be kept by deltas: a `since` boot brings it (and only what changed). */
	private refreshSummarySoon(): void {
		if (this.summaryRefresh || !this.workspaceId) return;
		this.summaryRefresh = setTimeout(() => {
			this.summaryRefresh = undefined;
			void this.reboot();
		}, 300);
	}

	async followThread(rootId: string, follow: boolean): Promise<void> {
		if (follow) await this.api.followThread(rootId);
		else await this.api.unfollowThread(rootId);
		this.refreshThreadsSoon();
	}

	private refreshThreadsSoon(): void {
		if (!this.s.threads.loaded || this.threadsRefresh) return;
		this.threadsRefresh = setTimeout(() => {
			this.threadsRefresh = undefined;
			this.loadThreads(this.s.threads.unreadOnly).catch(() => {});
		}, 200);
	}

	// ---- events ---------------------------------------------------------

	private onEvent(ev: ParleyEvent): void {
		if (ev.users?.length) this.addUsers(ev.users);
		try {
			this.applyEvent(ev);
		} catch (e) {
			this.fail(e);
		}
		this.emitter.emit('event', ev);
	}

	/** Apply one event to the state (exposed for tests and for events the app obtains itself). */
	applyEvent(ev: ParleyEvent): void {
		const d = ev.d;
		const self = this.s.self?.id;
		const ch = d.channel_id;
		// The channel's last seq before this event: counts from a boot already
		// include events up to it (a catch-up may deliver them again).
		const prevLast = ch ? (this.s.channelsById[ch]?.last_seq ?? 0) : 0;
		if (ch && typeof d.seq === 'number' && this.s.channelsById[ch] && d.seq > prevLast) {
			this.patchChannel(ch, { last_seq: d.seq });
		}
		switch (ev.t) {
			case 'message.created': {
				const m = d.message;
				if (!m) return;
				this.onMessageCreated(m, ev.source, typeof d.seq === 'number' && d.seq <= prevLast);
				return;
			}
			case 'message.updated':
				if (d.message) this.upsertMessage(d.message);
				return;
			case 'message.deleted': {
				if (!d.message_id) return;
				this.dropMessage(d.message_id);
				if (d.thread_root_id && !this.deletedReplies.has(d.message_id)) {
					this.deletedReplies.add(d.message_id);
					this.mapMessage(d.thread_root_id, (r) => ({ ...r, reply_count: Math.max(0, r.reply_count - 1) }));
				}
				return;
			}
			case 'reaction.added':
			case 'reaction.removed':
				if (d.message_id && d.emoji) {
					const add = ev.t === 'reaction.added';
					this.mapMessage(d.message_id, (m) => applyReaction(m, d.emoji!, add, d.user_id === self));
				}
				return;
			case 'pin.added':
			case 'pin.removed':
				if (d.message_id) this.mapMessage(d.message_id, (m) => ({ ...m, pinned: ev.t === 'pin.added' }));
				return;
			case 'channel.created':
				if (d.channel && (d.channel.kind !== 'public' || d.user_id === self)) {
					this.addChannel({ ...d.channel, last_read_seq: d.user_id === self ? d.channel.last_seq : 0 }, true);
				}
				return;
			case 'channel.updated':
			case 'channel.archived':
				if (ch && d.channel && this.s.channelsById[ch]) {
					this.patchChannel(ch, { name: d.channel.name, topic: d.channel.topic, purpose: d.channel.purpose, archived_at: d.channel.archived_at, member_count: d.channel.member_count });
				}
				return;
			case 'member.joined':
				if (!ch) return;
				if (d.user_id === self && !this.s.channelsById[ch]?.is_member) {
					this.api.getChannel(ch).then(
						(c) => this.addChannel({ ...c, last_read_seq: c.last_seq }, true),
						(e) => this.fail(e),
					);
				} else if (typeof d.member_count === 'number') {
					this.patchChannel(ch, { member_count: d.member_count });
				}
				return;
			case 'member.left':
				if (!ch) return;
				if (d.user_id === self) this.removeChannel(ch);
				else if (typeof d.member_count === 'number') this.patchChannel(ch, { member_count: d.member_count });
				return;
			case 'channel.read':
				if (ch && typeof d.last_read_seq === 'number') {
					const c = this.s.channelsById[ch];
					if (c && d.last_read_seq >= c.last_read_seq) {
						const all = d.last_read_seq >= c.last_seq;
						this.patchChannel(ch, all ? { last_read_seq: d.last_read_seq, unread_count: 0, mention_count: 0 } : { last_read_seq: d.last_read_seq });
					}
				}
				return;
			case 'channel.summary':
				if (ch) {
					const p: Partial<ChannelView> = {};
					if (typeof d.unread_count === 'number') p.unread_count = d.unread_count;
					if (typeof d.mention_count === 'number') p.mention_count = d.mention_count;
					if (typeof d.last_seq === 'number') p.last_seq = d.last_seq;
					this.patchChannel(ch, p);
				}
				return;
			case 'dm.opened':
				if (d.channel) this.addChannel(d.channel, true);
				return;
			case 'user.updated':
			case 'user.status':
			case 'workspace.member_joined':
				if (d.user) this.addUsers([d.user]);
				return;
			case 'presence.changed':
				if (d.user_id && d.presence) this.set({ presence: { ...this.s.presence, [d.user_id]: d.presence } });
				return;
			case 'typing.started':
				if (ch && d.user_id && d.user_id !== self) this.addTyping(typingKey(ch, d.thread_root_id), d.user_id);
				return;
			case 'thread.updated':
				if (d.thread) this.applyThread(d.thread, 'updated', d.message);
				if (d.message?.thread_root_id) {
					// A follower who is not in the channel gets no message.created: the reply comes here.
					const r = d.message;
					const cur = this.s.replies[r.thread_root_id!];
					if (cur?.loaded) this.setList('replies', r.thread_root_id!, { messages: mergeMessages(cur.messages, [r]) });
					if (ev.source === 'live' && d.thread?.unread_mentions) this.maybeNotify(r, mentions(r.text, this.s.self?.handle));
				}
				return;
			case 'thread.read':
				if (d.thread) this.applyThread(d.thread, 'read');
				return;
			case 'thread.followed':
				if (d.thread) this.applyThread(d.thread, 'followed');
				return;
			case 'thread.unfollowed':
				if (d.thread) this.applyThread(d.thread, 'unfollowed');
				return;
			case 'mention':
				if (d.message && ev.source === 'live') this.maybeNotify(d.message, true);
				return;
		}
	}

	private onMessageCreated(m: Message, source: ParleyEvent['source'], counted: boolean): void {
		const self = this.s.self;
		const c = this.s.channelsById[m.channel_id];
		const mine = !!self && m.user_id === self.id;
		this.clearTyping(typingKey(m.channel_id, m.thread_root_id), m.user_id);
		if (m.thread_root_id) {
			const cur = this.s.replies[m.thread_root_id];
			if (cur?.loaded) this.setList('replies', m.thread_root_id, { messages: mergeMessages(cur.messages, [m]) });
			this.countReply(m);
		} else {
			this.upsertMessage(m);
		}
		if (!c) return;
		const patch: Partial<ChannelView> = {};
		if (c.kind === 'dm' || c.kind === 'group_dm') patch.updated_at = m.created_at;
		const looking = this.s.activeChannelId === m.channel_id && this.visible;
		if (mine) {
			if (!m.thread_root_id && m.seq > c.last_read_seq && c.last_read_seq >= c.last_seq - 1) patch.last_read_seq = m.seq;
		} else if (!m.thread_root_id) {
			if (looking) {
				this.scheduleRead(m.channel_id, 500);
			} else if (m.seq > c.last_read_seq && !counted) {
				patch.unread_count = c.unread_count + 1;
				if (mentions(m.text, self?.handle)) patch.mention_count = c.mention_count + 1;
			}
		}
		if (Object.keys(patch).length) this.patchChannel(m.channel_id, patch);
		if (!mine && source === 'live') this.maybeNotify(m, false);
	}

	/** Tell the app about a mention or a DM the user is not looking at (once per message). */
	private maybeNotify(m: Message, mentioned: boolean): void {
		const self = this.s.self;
		if (!self || m.user_id === self.id || this.notified.has(m.id)) return;
		const c = this.s.channelsById[m.channel_id];
		const dm = c?.kind === 'dm' || c?.kind === 'group_dm';
		const mention = mentioned || mentions(m.text, self.handle);
		if (!dm && !mention) return;
		const looking = this.s.activeChannelId === m.channel_id && this.visible && (!m.thread_root_id || this.s.activeThreadId === m.thread_root_id);
		if (looking) return;
		this.notified.add(m.id);
		if (this.notified.size > 1000) this.notified.delete(this.notified.values().next().value!);
		this.emitter.emit('notify', { kind: mention ? 'mention' : 'dm', message: m, channel: c });
	}

	private addTyping(key: string, userId: string): void {
		const ttl = this.opts.typingTtlMs ?? 6000;
		const now = Date.now();
		const list = (this.s.typing[key] ?? []).filter((t) => t.userId !== userId && t.until > now);
		list.push({ userId, until: now + ttl });
		this.set({ typing: { ...this.s.typing, [key]: list } });
		void this.ensureUsers([userId]);
		this.scheduleTypingSweep();
	}

	private clearTyping(key: string, userId: string): void {
		const list = this.s.typing[key];
		if (!list?.some((t) => t.userId === userId)) return;
		this.set({ typing: { ...this.s.typing, [key]: list.filter((t) => t.userId !== userId) } });
	}

	private scheduleTypingSweep(): void {
		if (this.typingTimer) return;
		let next = Infinity;
		for (const l of Object.values(this.s.typing)) for (const t of l) next = Math.min(next, t.until);
		if (next === Infinity) return;
		this.typingTimer = setTimeout(
			() => {
				this.typingTimer = undefined;
				const now = Date.now();
				const typing: Record<string, TypingUser[]> = {};
				for (const [k, l] of Object.entries(this.s.typing)) {
					const keep = l.filter((t) => t.until > now);
					if (keep.length) typing[k] = keep;
				}
				this.set({ typing });
				this.scheduleTypingSweep();
			},
			Math.max(0, next - Date.now()) + 10,
		);
	}
}

export { ApiError };
