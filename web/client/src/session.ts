// Session: framework-agnostic client state for one user in one workspace.
//
// It boots (thin boot, then `since` boots after a lost session), connects
// the gateway, and composes the owners of the session's parts, each with its
// own state and timers:
//
//   users.ts     the user cache (boot's references, JIT users, /users/batch)
//   channels.ts  channels and DMs, unread and mention counts, read markers
//   windows.ts   message windows per channel and per thread, sends, edits
//   threads.ts   the open thread, followed threads, the Threads badge
//   typing.ts    typing indicators and the user's own typing ops
//   presence.ts  presence of the users on screen
//   viewset.ts   the users in view: presence_sub, and fresh profiles of users back in view
//   notifier.ts  which mentions and DMs the app should announce
//   events.ts    the gateway event dispatch table over those owners
//
// State is published as immutable snapshots (state.ts): every change makes
// a new SessionState object (and new objects for the parts that changed), so
// a UI can hold it in a Svelte 5 `$state.raw` or use the Svelte store
// contract: `subscribe(fn)` calls fn at once and after every change, and
// returns the function that unsubscribes.
//
// The session touches no DOM: the app tells it when the page is hidden or
// visible (setVisible) and when the network is back (online).

import { Api, ApiError } from './api';
import { Channels, toView } from './channels';
import { Emitter, type Unsubscribe } from './emitter';
import { eventHandlers, type EventHandler } from './events';
import { Gateway } from './gateway';
import { Notifier } from './notifier';
import { Presence } from './presence';
import { Store, type ChannelView, type Core, type LocalMessage, type SessionEvents, type SessionOptions, type SessionState } from './state';
import { Threads } from './threads';
import { Typing } from './typing';
import type { Boot, FileInfo, Message, ParleyEvent, User } from './types';
import { Users } from './users';
import { ViewSet } from './viewset';
import { Windows } from './windows';

export type { ChannelView, LocalMessage, MessageList, SessionEvents, SessionNotification, SessionOptions, SessionState, ThreadList, TypingUser } from './state';
export { mentions } from './messages';
export { typingKey } from './typing';

export class Session {
	readonly api: Api;
	private readonly opts: SessionOptions;
	private readonly emitter = new Emitter<SessionEvents>();
	private readonly store = new Store();
	private gw: Gateway | undefined;
	private workspaceId: string | undefined;
	private bootVersion: string | undefined;
	private wsUrl: string | undefined;
	private stopped = false;

	private readonly users: Users;
	private readonly channels: Channels;
	private readonly windows: Windows;
	private readonly threads: Threads;
	private readonly typingState: Typing;
	private readonly presence: Presence;
	private readonly view: ViewSet;
	/** The channels last sent as focus. */
	private focused: string[] = [];
	private readonly handlers: Record<string, EventHandler>;

	constructor(opts: SessionOptions = {}) {
		this.opts = opts;
		this.api =
			opts.api ??
			new Api({
				baseUrl: opts.baseUrl,
				token: opts.token,
				onUnauthorized: () => this.loggedOut(),
			});
		const core: Core = {
			store: this.store,
			api: this.api,
			opts,
			gw: () => this.gw,
			workspaceId: () => this.workspaceId,
			fail: (e) => this.fail(e),
		};
		this.users = new Users(core);
		this.channels = new Channels(core, this.users);
		this.windows = new Windows(core, this.users);
		this.threads = new Threads(core, this.users, this.windows, () => this.reboot());
		this.typingState = new Typing(core, this.users);
		this.presence = new Presence(core);
		this.view = new ViewSet(
			{
				send: (ids) => this.gw?.presenceSub(ids),
				live: () => !!this.gw?.isLive,
				refresh: (ids) => void this.users.refresh(ids),
				receivedAt: (id) => this.users.receivedAt(id),
				left: (ids) => this.presence.forget(ids),
			},
			opts.viewSet,
		);
		const notifier = new Notifier(core, this.channels, this.emitter);
		this.handlers = eventHandlers({
			core,
			users: this.users,
			channels: this.channels,
			windows: this.windows,
			threads: this.threads,
			typing: this.typingState,
			presence: this.presence,
			notifier,
			focused: () => this.focused,
		});
	}

	// ---- observing ------------------------------------------------------

	/** The current snapshot. */
	get state(): SessionState {
		return this.store.s;
	}

	/** The store's snapshot, by the name the session's code (and its tests) use. */
	private get s(): SessionState {
		return this.store.s;
	}

	private set s(v: SessionState) {
		this.store.s = v;
	}

	/** Svelte store contract: fn now and after every change; returns unsubscribe. */
	subscribe(fn: (s: SessionState) => void): Unsubscribe {
		return this.store.subscribe(fn);
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
		this.store.set(patch);
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
		// Messages a previous page left unsent (the user is known now).
		this.windows.outbox.resume();
		this.windows.restoreOutbox();
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
			// Connected again: what could not be sent goes now, in order.
			if (st === 'ready') this.windows.outbox.flush();
			if (st === 'logged_out') this.loggedOut();
		});
		gw.on('invalidSession', () => void this.reboot());
		gw.on('channelLost', ({ channelId }) => this.channels.remove(channelId));
		gw.on('session', ({ resumed }) => {
			this.view.sessionLive(resumed);
			// A new session hears channel.hot again for the hot channels in
			// focus; a channel that cooled meanwhile says nothing.
			if (!resumed) this.set({ hotChannels: {} });
		});
		// What the view asked for before the gateway existed.
		const focus = this.focusIds();
		if (focus.length) gw.focus(focus);
		const inView = this.view.current();
		if (inView.length) gw.presenceSub(inView);
		gw.start();
	}

	/** Disconnect and stop all timers. State stays readable. */
	stop(): void {
		this.stopped = true;
		this.gw?.stop();
		this.gw = undefined;
		this.windows.outbox.stop();
		this.view.stop();
		this.typingState.stop();
		this.threads.stop();
		this.channels.stop();
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
		this.channels.setVisible(visible);
	}

	/** The network is back: reconnect now rather than at the end of a long backoff. */
	online(): void {
		this.windows.outbox.flush();
		if (this.gw?.status === 'reconnecting' || this.gw?.status === 'connecting') this.gw.reconnectNow();
	}

	/** Show the one-channel-first boot; returns the channel and its last seq when its messages were shown. */
	private applyFirstChannelBoot(b: Boot): { id: string; seq: number } | undefined {
		if (this.stopped || this.s.self) return undefined; // the full boot won the race
		const byId = { ...this.s.channelsById };
		const c = b.channels[0] ?? b.channel;
		if (c) byId[c.id] = toView(c, true);
		this.users.add(b.users ?? []);
		this.users.add([b.self]);
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
		for (const c of [...b.channels, ...b.dms]) byId[c.id] = toView(c, true);
		if (since && b.channel_ids) {
			const keep = new Set(b.channel_ids);
			for (const c of Object.values(byId)) if (c.is_member && !keep.has(c.id)) delete byId[c.id];
		}
		for (const c of [...b.channels, ...b.dms]) this.gw?.trackChannel(c.id, c.last_seq);
		this.users.add([b.self, ...(b.users ?? [])]);
		this.set({ self: b.self, workspace: b.workspace, limits: b.limits ?? this.s.limits, channelsById: byId });
		if (b.threads) this.threads.resetSummary(b.threads);
		const dmUsers = b.dms.flatMap((d) => d.dm_user_ids ?? []);
		if (dmUsers.length) void this.users.ensure(dmUsers);
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

	// ---- events ---------------------------------------------------------

	private onEvent(ev: ParleyEvent): void {
		if (ev.users?.length) this.users.add(ev.users);
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
		const ch = d.channel_id;
		// The channel's last seq before this event: counts from a boot already
		// include events up to it (a catch-up may deliver them again).
		const prevLast = ch ? (this.s.channelsById[ch]?.last_seq ?? 0) : 0;
		if (ch && typeof d.seq === 'number' && this.s.channelsById[ch] && d.seq > prevLast) {
			this.channels.patch(ch, { last_seq: d.seq });
		}
		this.handlers[ev.t]?.(ev, prevLast);
	}

	// ---- users ----------------------------------------------------------

	/** A cached user, or undefined (and a lookup is scheduled). */
	user(id: string): User | undefined {
		return this.users.user(id);
	}

	/**
	 * Resolve users by id: ids not cached yet are fetched with POST
	 * /users/batch, batched across callers of the same tick and deduplicated
	 * against lookups in flight. Resolves when those lookups finished.
	 */
	ensureUsers(ids: string[]): Promise<void> {
		return this.users.ensure(ids);
	}

	/**
	 * A part of the screen (a source: 'sidebar', 'messages', 'profile', ...,
	 * see VIEW_SOURCES) shows these users; [] when it shows none. The union
	 * is the session's view set: presence_sub follows it (debounced), and a
	 * user coming back into view is fetched again if their copy may be stale.
	 */
	setViewUsers(source: string, userIds: string[]): void {
		this.view.set(source, userIds);
	}

	/** The users on screen, as one source ('view'); replaces the previous set. */
	setPresenceView(userIds: string[]): void {
		this.view.set('view', userIds);
	}

	/** The view set as last sent (presence_sub). */
	get viewUsers(): string[] {
		return this.view.current();
	}

	/** Users the app read over HTTP (directory and member pages): fresh copies for the cache. */
	addUsers(users: User[]): void {
		this.users.add(users);
	}

	// ---- channels -------------------------------------------------------

	/**
	 * Show a channel: it becomes the focus, its latest messages are loaded if
	 * they are not, and it is marked read. A public channel the user is not in
	 * is previewed (is_member false).
	 */
	async openChannel(channelId: string): Promise<void> {
		this.set({ activeChannelId: channelId });
		this.refocus();
		try {
			await this.channels.ensure(channelId);
		} catch (e) {
			this.fail(e);
			throw e;
		}
		const list = this.s.messages[channelId];
		// A preview gets the channel's events only while in focus: what came
		// before is read over HTTP, and its stream starts after that.
		const previewing = !this.s.channelsById[channelId]?.is_member;
		if (previewing || !list?.loaded || list.hasNewer) await this.windows.loadLatest(channelId);
		if (previewing && this.s.activeChannelId === channelId && !this.s.channelsById[channelId]?.is_member) {
			const shown = this.s.messages[channelId]?.messages ?? [];
			const last = shown.reduce((n, m) => (m.pending || m.failed ? n : Math.max(n, m.seq)), 0);
			this.gw?.trackChannel(channelId, last);
		}
		this.channels.scheduleRead(channelId, 0);
	}

	/** Leave the channel view (e.g. for the Threads view). */
	closeChannel(): void {
		this.set({ activeChannelId: undefined });
		this.refocus();
	}

	/** Load the latest page of a channel (replacing a window that jumped into history). */
	loadLatest(channelId: string): Promise<void> {
		return this.windows.loadLatest(channelId);
	}

	/** Load the page before the first loaded message; resolves false when there is no more. */
	loadOlder(channelId: string): Promise<boolean> {
		return this.windows.loadOlder(channelId);
	}

	/** Load the page after the last loaded message (after a jump); resolves false at the newest. */
	loadNewer(channelId: string): Promise<boolean> {
		return this.windows.loadNewer(channelId);
	}

	/**
	 * Jump to a message (search results): load a window around its seq. A
	 * reply opens its thread instead, with the window around the root.
	 * Resolves with the message's id to scroll to.
	 */
	async jumpTo(message: Pick<Message, 'id' | 'channel_id' | 'seq' | 'thread_root_id'>): Promise<string> {
		const ch = message.channel_id;
		this.set({ activeChannelId: ch });
		this.refocus();
		await this.channels.ensure(ch);
		let seq = message.seq;
		if (message.thread_root_id) {
			const root = await this.api.getMessage(message.thread_root_id);
			seq = root.seq;
			void this.openThread(root.id);
		}
		await this.windows.loadAround(ch, seq);
		return message.thread_root_id ?? message.id;
	}

	/** Move the read marker to the channel's last seq (no call if already there). */
	markRead(channelId: string): Promise<void> {
		return this.channels.markRead(channelId);
	}

	/** Create a channel; the user is its first member. */
	createChannel(name: string, kind: 'public' | 'private' = 'public', topic?: string): Promise<ChannelView> {
		return this.channels.create(name, kind, topic);
	}

	/** Join a public channel. */
	joinChannel(channelId: string): Promise<ChannelView> {
		return this.channels.join(channelId);
	}

	leaveChannel(channelId: string): Promise<void> {
		return this.channels.leave(channelId);
	}

	/** Open (or find) a DM with the given users (the caller is implied). */
	openDM(userIds: string[]): Promise<ChannelView> {
		return this.channels.openDM(userIds);
	}

	/**
	 * Rename a channel or change its topic or purpose. The answer updates the
	 * channel at once (its channel.updated event says the same later).
	 */
	async updateChannel(channelId: string, p: { name?: string; topic?: string; purpose?: string }): Promise<ChannelView | undefined> {
		const c = await this.api.updateChannel(channelId, p);
		this.channels.patch(channelId, { name: c.name, topic: c.topic, purpose: c.purpose, archived_at: c.archived_at, member_count: c.member_count });
		return this.s.channelsById[channelId];
	}

	/** Archive a channel: it stays readable, and nothing more can be written into it. */
	async archiveChannel(channelId: string): Promise<ChannelView | undefined> {
		const c = await this.api.archiveChannel(channelId);
		this.channels.patch(channelId, { archived_at: c.archived_at ?? new Date().toISOString() });
		return this.s.channelsById[channelId];
	}

	// ---- messages -------------------------------------------------------

	/**
	 * Send a message. It shows at once as pending and is replaced by the
	 * server's copy. Sends go out in order; one that cannot go for now
	 * (offline) shows `failed` and `queued` and is sent again by itself when
	 * the connection is back (same client_msg_id); one refused for good
	 * stays `failed` with its `error`. Resolves once posted.
	 */
	send(channelId: string, text: string, threadRootId?: string, files?: FileInfo[]): Promise<Message> {
		return this.windows.send(channelId, text, threadRootId, files);
	}

	/** Try a failed message again (same client_msg_id: never posted twice). */
	resend(local: LocalMessage): Promise<Message> {
		return this.windows.resend(local);
	}

	/** Drop a failed message from the list. */
	discard(local: LocalMessage): void {
		this.windows.discard(local);
	}

	editMessage(messageId: string, text: string): Promise<Message> {
		return this.windows.edit(messageId, text);
	}

	deleteMessage(messageId: string): Promise<void> {
		return this.windows.delete(messageId);
	}

	/** Toggle the user's reaction on a message. */
	toggleReaction(message: Message, emoji: string): Promise<void> {
		return this.windows.toggleReaction(message, emoji);
	}

	react(messageId: string, emoji: string): Promise<void> {
		return this.windows.react(messageId, emoji);
	}

	unreact(messageId: string, emoji: string): Promise<void> {
		return this.windows.unreact(messageId, emoji);
	}

	/** Pin or unpin a message; every loaded copy shows it at once (pin.added / pin.removed follow). */
	async pin(messageId: string, pinned: boolean): Promise<Message> {
		const m = pinned ? await this.api.pin(messageId) : await this.api.unpin(messageId);
		this.windows.map(messageId, (x) => ({ ...x, pinned }));
		return m;
	}

	// ---- the user's own profile and status ------------------------------

	/** Change the user's own name or title; the answer is the new self. */
	async updateProfile(p: { name?: string; title?: string }): Promise<User> {
		return this.ownUser(await this.api.updateMe(p));
	}

	/** Set the user's custom status (emoji and text both empty: clear it); expiresAt is an RFC 3339 time. */
	async setStatus(emoji: string, text: string, expiresAt?: string): Promise<User> {
		return this.ownUser(await this.api.setStatus({ emoji, text, ...(expiresAt ? { expires_at: expiresAt } : {}) }));
	}

	private ownUser(u: User): User {
		this.users.add([u]);
		const self = this.s.self;
		if (self && self.id === u.id) this.set({ self: { ...u, email: u.email ?? self.email } });
		return u;
	}

	/** Say the user is typing (throttled to one op per 3 s per channel or thread). */
	typing(channelId: string, threadRootId?: string): void {
		this.typingState.send(channelId, threadRootId);
	}

	// ---- threads --------------------------------------------------------

	/** Open a thread in the side panel: its root and all its replies. */
	async openThread(rootId: string): Promise<void> {
		try {
			await this.threads.open(rootId);
		} finally {
			this.refocus();
		}
	}

	closeThread(): void {
		this.threads.close();
		this.refocus();
	}

	/**
	 * The channels on screen: the open channel, and the channel of the open
	 * thread (opened from the Threads view, it may be another). Typing goes
	 * only to sessions that have its channel in focus, and a public channel
	 * the user is not in is delivered (previewed) only while in focus.
	 */
	private focusIds(): string[] {
		const ids: string[] = [];
		const ch = this.s.activeChannelId;
		if (ch) ids.push(ch);
		const root = this.s.activeThreadId;
		const threadCh = root ? this.s.replies[root]?.root?.channel_id : undefined;
		if (threadCh && threadCh !== ch) ids.push(threadCh);
		return ids;
	}

	/**
	 * Send the channels on screen. A previewed channel that leaves the
	 * screen is no longer delivered, so the gateway stops tracking it (a
	 * later preview starts its stream afresh).
	 */
	private refocus(): void {
		const next = this.focusIds();
		let hot: Record<string, true> | undefined;
		for (const id of this.focused) {
			if (next.includes(id)) continue;
			if (this.s.channelsById[id] && !this.s.channelsById[id].is_member) this.gw?.untrackChannel(id);
			// channel.hot goes only to sessions with the channel in focus: no
			// word of it cooling would come.
			if (this.s.hotChannels[id]) delete (hot ??= { ...this.s.hotChannels })[id];
		}
		if (hot) this.set({ hotChannels: hot });
		this.focused = next;
		this.gw?.focus(next);
	}

	/** Load the followed threads (all, or only those with unread replies). */
	loadThreads(unreadOnly = false): Promise<void> {
		return this.threads.load(unreadOnly);
	}

	markThreadRead(rootId: string): Promise<void> {
		return this.threads.markRead(rootId);
	}

	followThread(rootId: string, follow: boolean): Promise<void> {
		return this.threads.follow(rootId, follow);
	}
}

export { ApiError };
