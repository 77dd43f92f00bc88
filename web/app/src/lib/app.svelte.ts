// The application's state: who is signed in, which workspace is open, and
// what is on screen. Server state lives in the client library's Session;
// this class holds its latest snapshot in `$state.raw` and adds what only
// the UI cares about (views, panels, dialogs, presence on screen).
//
// Components talk to the server only through this object (and the session's
// state operations); none reaches for the session's Api.

import { untrack } from 'svelte';
import {
	Api,
	ApiError,
	Session,
	type CommandInfo,
	type FileInfo,
	type InvitePreview,
	type Message,
	type SessionNotification,
	type SessionState,
	type User,
	type Workspace,
} from '@parley/client';
import { plainText } from './markdown';
import { Ephemerals, parseCommand } from './ephemeral.svelte';
import { watchPage } from './page';
import { formatRoute, parseRoute, type Route } from './route';

const TOKEN_KEY = 'parley.token';
const WS_KEY = 'parley.workspace';
const CHANNEL_KEY = 'parley.channel.';

export type Screen = 'loading' | 'auth' | 'workspaces' | 'chat';
export type View = 'channel' | 'threads' | 'directory' | 'search' | 'browse';
export type Panel =
	{ kind: 'thread'; rootId: string } | { kind: 'members' } | { kind: 'profile'; userId: string } | { kind: 'pins' } | { kind: 'files' } | null;
export type Dialog = 'switcher' | 'invite' | 'create-channel' | 'integrations' | FeatureDialog | null;
/** The dialogs of pins, group DMs, channel settings and the profile menu. */
export type FeatureDialog = 'new-message' | 'channel-settings' | 'edit-profile' | 'set-status' | 'preferences' | 'delete-workspace';

function store(): Storage | undefined {
	try {
		return globalThis.localStorage;
	} catch {
		return undefined;
	}
}

class App {
	readonly api = new Api({ onUnauthorized: () => this.forget() });

	screen = $state<Screen>('loading');
	me = $state.raw<User | null>(null);
	workspaces = $state.raw<Workspace[]>([]);
	session = $state.raw<Session | null>(null);
	/** The session's latest snapshot. */
	s = $state.raw<SessionState | null>(null);

	view = $state<View>('channel');
	panel = $state<Panel>(null);
	dialog = $state<Dialog>(null);
	/** Slash commands' answers shown to this user only, per channel (ephemeral.svelte.ts). */
	readonly ephemerals = new Ephemerals();
	private commandList: { ws: string; at: number; list: Promise<CommandInfo[]> } | null = null;
	searchQuery = $state('');
	/** A message to scroll to and flash in the channel view. */
	focusMessageId = $state<string | null>(null);
	notifyPermission = $state<NotificationPermission | 'unsupported'>(typeof Notification === 'undefined' ? 'unsupported' : Notification.permission);
	error = $state('');
	/** What the URL asked for and cannot be shown (unknown or forbidden): a "not found" state. */
	missing = $state<string | null>(null);
	/** The invite the page was opened with, and what the server says it is for (null: unknown or expired). */
	invite = $state<{ code: string; preview?: InvitePreview | null } | null>(null);
	/** Bumped by Esc in the channel view: the channel was marked read by hand. */
	readEpoch = $state(0);
	/** A message of the user's to edit (↑ in an empty composer). */
	editRequest = $state<string | null>(null);

	private unsubscribe: (() => void)[] = [];
	private pendingInvite: string | null = null;

	// ---- the URL -------------------------------------------------------------
	//
	// Every view has a URL (route.ts). An effect writes the current view's URL:
	// replaceState, or pushState when the change was a navigation (navigate()
	// marks it). While a URL is being applied (boot, Back/Forward), nothing is
	// written until the view is complete. Outside the chat screen the URL is
	// left alone: it is what to show after sign-in.

	/** The route the page was opened with, to show once a workspace is open. */
	private wanted: Route = { kind: 'home' };
	private applying = 0;
	private pushNext = false;

	constructor() {
		if (typeof window === 'undefined') return;
		$effect.root(() => {
			$effect(() => {
				const r = this.currentRoute();
				untrack(() => this.writeUrl(r));
			});
		});
		window.addEventListener('popstate', () => void this.onPopState());
	}

	/** The route of what is on screen; null when the URL should stay as it is. */
	currentRoute(): Route | null {
		const s = this.s;
		if (this.screen !== 'chat' || !s?.workspace || this.missing) return null;
		const ws = s.workspace.slug;
		switch (this.view) {
			case 'threads':
			case 'directory':
			case 'browse':
				return { kind: this.view, ws };
			case 'search':
				return { kind: 'search', ws, q: this.searchQuery };
		}
		if (this.panel?.kind === 'profile') return { kind: 'user', ws, user: this.panel.userId };
		const c = this.activeChannel;
		if (!c) return { kind: 'workspace', ws };
		const channel = c.kind === 'public' || c.kind === 'private' ? c.name : c.id;
		if (this.panel?.kind === 'thread') return { kind: 'channel', ws, channel, thread: this.panel.rootId };
		if (this.focusMessageId) return { kind: 'channel', ws, channel, message: this.focusMessageId };
		return { kind: 'channel', ws, channel };
	}

	private writeUrl(r: Route | null): void {
		if (!r || this.applying > 0) return;
		const href = formatRoute(r);
		const push = this.pushNext;
		this.pushNext = false;
		if (href === location.pathname + location.search) return;
		if (push) history.pushState(null, '', href);
		else history.replaceState(null, '', href);
	}

	/** The next URL change is a navigation: a new history entry. */
	private navigate(): void {
		this.pushNext = this.applying === 0;
		this.missing = null;
	}

	/** A permanent link to a message (channel by id: names change). */
	messageUrl(m: Pick<Message, 'id' | 'channel_id'>): string {
		const ws = this.s?.workspace?.slug ?? '';
		return location.origin + formatRoute({ kind: 'channel', ws, channel: m.channel_id, message: m.id });
	}

	/** Copy a message's link to the clipboard; false when the browser refused. */
	async copyLink(m: Pick<Message, 'id' | 'channel_id'>): Promise<boolean> {
		try {
			await navigator.clipboard.writeText(this.messageUrl(m));
			return true;
		} catch {
			return false;
		}
	}

	private async onPopState(): Promise<void> {
		const r = parseRoute(location.pathname, location.search);
		if (this.screen !== 'chat') {
			if (this.me && 'ws' in r) await this.openRoute(r);
			return;
		}
		await this.openRoute(r);
	}

	/** Show a route in the right workspace (opening it when it is not the open one). */
	private async openRoute(r: Route): Promise<void> {
		if (r.kind === 'invalid') {
			this.missing = 'There is no such page.';
			if (this.screen !== 'chat') this.screen = 'workspaces';
			return;
		}
		if (!('ws' in r)) return;
		const open = this.s?.workspace;
		if (this.screen === 'chat' && open && (open.slug === r.ws || open.id === r.ws)) {
			await this.applyRoute(r);
			return;
		}
		const ws = this.workspaces.find((w) => w.slug === r.ws || w.id === r.ws);
		if (!ws) {
			this.closeSession();
			this.missing = `There is no workspace “${r.ws}”, or you are not a member of it.`;
			this.screen = 'workspaces';
			return;
		}
		await this.openWorkspace(ws.id, r);
	}

	/** Show a route of the open workspace; the URL is written once, at the end. */
	private async applyRoute(r: Route): Promise<void> {
		const session = this.session;
		if (!session || !('ws' in r)) return;
		this.applying++;
		this.missing = null;
		try {
			switch (r.kind) {
				case 'threads':
				case 'directory':
				case 'browse':
					this.panel = null;
					this.showView(r.kind);
					break;
				case 'search':
					this.panel = null;
					this.searchQuery = r.q;
					this.showView('search');
					break;
				case 'user':
					if (this.view !== 'channel' || !this.activeChannel) await this.openDefaultChannel();
					this.panel = { kind: 'profile', userId: r.user };
					break;
				case 'workspace':
					await this.openDefaultChannel();
					break;
				case 'channel':
					await this.applyChannelRoute(session, r);
					break;
			}
		} finally {
			this.applying--;
		}
		this.writeUrl(this.currentRoute());
	}

	private async applyChannelRoute(session: Session, r: Extract<Route, { kind: 'channel' }>): Promise<void> {
		const id = await this.resolveChannel(r.channel);
		if (!id) {
			this.notFound(`There is no channel “${r.channel}” here, or you do not have access to it.`);
			return;
		}
		if (r.message) {
			let m: Message;
			try {
				m = await session.api.getMessage(r.message);
			} catch {
				this.notFound('That message does not exist any more, or you do not have access to it.');
				return;
			}
			if (m.channel_id !== id) {
				this.notFound('That message is not in this channel.');
				return;
			}
			if (this.panel?.kind === 'thread' && this.panel.rootId !== m.thread_root_id) this.closePanel();
			await this.jumpTo(m);
			return;
		}
		try {
			await this.openChannel(id);
		} catch {
			this.notFound(`There is no channel “${r.channel}” here, or you do not have access to it.`);
			return;
		}
		if (r.thread) {
			if (this.panel?.kind !== 'thread' || this.panel.rootId !== r.thread) await this.openThread(r.thread);
		} else if (this.panel?.kind === 'thread') this.closePanel();
	}

	/** A channel of the URL (an id, or a channel's name) as an id; null when it cannot be seen. */
	private async resolveChannel(key: string): Promise<string | null> {
		const st = this.session?.state;
		if (!st) return null;
		if (st.channelsById[key]) return key;
		const named = st.channels.find((c) => c.name === key);
		if (named) return named.id;
		// A public channel the user is not in, by id or by name (ids are
		// upper-case ULIDs with a prefix; names are lower case).
		if (!/[a-z]/.test(key)) {
			try {
				return (await this.sessionApi().getChannel(key)).id;
			} catch {
				return null; // not an id the user may see
			}
		}
		try {
			const page = await this.browseChannels(key, undefined);
			return page?.channels.find((c) => c.name === key)?.id ?? null;
		} catch {
			return null;
		}
	}

	private notFound(text: string): void {
		this.session?.closeChannel();
		this.panel = null;
		this.focusMessageId = null;
		this.view = 'channel';
		this.missing = text;
	}

	/** Open the channel a workspace starts in: the last one seen, else #general. */
	private async openDefaultChannel(): Promise<void> {
		const st = this.session?.state;
		if (!st) return;
		const ws = st.workspace?.id ?? '';
		const lastChannel = store()?.getItem(CHANNEL_KEY + ws) ?? undefined;
		const target =
			(lastChannel && st.channelsById[lastChannel]?.is_member && lastChannel) ||
			st.channels.find((c) => c.name === 'general')?.id ||
			st.channels[0]?.id ||
			st.dms[0]?.id;
		if (target) await this.openChannel(target);
	}

	/** Start: resume a stored session, or show the log-in screen. */
	async init(): Promise<void> {
		const route = parseRoute(location.pathname, location.search);
		if (route.kind === 'invite') {
			this.pendingInvite = route.code;
			this.invite = { code: route.code };
			this.api.invitePreview(route.code).then(
				(p) => this.invite?.code === route.code && (this.invite = { code: route.code, preview: p }),
				() => this.invite?.code === route.code && (this.invite = { code: route.code, preview: null }),
			);
		} else this.wanted = route;
		const token = store()?.getItem(TOKEN_KEY);
		if (!token) {
			this.screen = 'auth';
			return;
		}
		this.api.setToken(token);
		try {
			this.me = await this.api.me();
		} catch (e) {
			if (e instanceof ApiError && e.status === 401) {
				this.forget();
				return;
			}
			this.error = `Cannot reach the server: ${(e as Error).message}`;
			this.screen = 'auth';
			return;
		}
		await this.afterAuth();
	}

	async signup(p: { email: string; password: string; name: string; handle: string }): Promise<void> {
		const r = await this.api.signup(p);
		this.remember(r.token, r.user);
		await this.afterAuth();
	}

	async login(email: string, password: string): Promise<void> {
		const r = await this.api.login(email, password);
		this.remember(r.token, r.user);
		await this.afterAuth();
	}

	private remember(token: string, user: User) {
		store()?.setItem(TOKEN_KEY, token);
		this.api.setToken(token);
		this.me = user;
	}

	private async afterAuth(): Promise<void> {
		this.workspaces = (await this.api.listWorkspaces()).workspaces;
		if (this.pendingInvite) {
			const code = this.pendingInvite;
			this.pendingInvite = null;
			this.invite = null;
			history.replaceState(null, '', '/');
			try {
				await this.acceptInvite(code);
				return;
			} catch (e) {
				this.error = `The invite did not work: ${(e as Error).message}`;
			}
		}
		// A link the page was opened with (kept through the log-in screen).
		const want = this.wanted;
		this.wanted = { kind: 'home' };
		if (want.kind !== 'home') {
			await this.openRoute(want);
			if (this.screen === 'chat' || this.missing) return;
		}
		const last = store()?.getItem(WS_KEY);
		const pick = this.workspaces.find((w) => w.id === last) ?? (this.workspaces.length === 1 ? this.workspaces[0] : undefined);
		if (pick) await this.openWorkspace(pick.id);
		else this.screen = 'workspaces';
	}

	async createWorkspace(name: string, slug: string): Promise<void> {
		const ws = await this.api.createWorkspace(name, slug);
		this.workspaces = [...this.workspaces, ws];
		await this.openWorkspace(ws.id);
	}

	async acceptInvite(code: string): Promise<void> {
		const ws = await this.api.acceptInvite(code);
		if (!this.workspaces.some((w) => w.id === ws.id)) this.workspaces = [...this.workspaces, ws];
		await this.openWorkspace(ws.id);
	}

	/** Boot into a workspace and connect; opens the last channel seen there. */
	async openWorkspace(wsId: string, route?: Route): Promise<void> {
		this.closeSession();
		this.missing = null;
		const token = this.api.getToken();
		const session = new Session({ token });
		this.session = session;
		this.unsubscribe.push(
			watchPage(session),
			session.subscribe((s) => (this.s = s)),
			session.on('loggedOut', () => this.forget()),
			session.on('notify', (n) => this.notify(n)),
			session.on('event', (ev) => this.ephemerals.apply(ev)),
			// Background failures (a user lookup, a read marker) are already
			// reflected in state where it matters; keep a trace for developers.
			session.on('error', (e) => console.warn('parley:', e.message)),
		);
		const deep = route && route.kind !== 'workspace' && 'ws' in route;
		const lastChannel = deep ? undefined : (store()?.getItem(CHANNEL_KEY + wsId) ?? undefined);
		this.applying++; // the URL is written once the view is there
		try {
			await session.start(wsId, { channelId: lastChannel });
			store()?.setItem(WS_KEY, wsId);
			this.view = 'channel';
			this.panel = null;
			this.screen = 'chat';
		} finally {
			this.applying--;
		}
		if (deep) await this.applyRoute(route);
		else await this.applyRoute({ kind: 'workspace', ws: session.state.workspace?.slug ?? wsId });
	}

	/** Back to the workspace picker. */
	switchWorkspace(): void {
		this.closeSession();
		store()?.removeItem(WS_KEY);
		this.missing = null;
		this.screen = 'workspaces';
		history.pushState(null, '', '/');
	}

	private closeSession() {
		for (const u of this.unsubscribe) u();
		this.unsubscribe = [];
		this.session?.stop();
		this.session = null;
		this.s = null;
	}

	async logout(): Promise<void> {
		const s = this.session;
		this.closeSession();
		if (s) await s.logout();
		else await this.api.logout().catch(() => {});
		this.forget();
		history.replaceState(null, '', '/');
	}

	/** Drop the token and show the log-in screen. */
	forget(): void {
		this.closeSession();
		store()?.removeItem(TOKEN_KEY);
		this.api.setToken(undefined);
		this.me = null;
		this.workspaces = [];
		this.screen = 'auth';
	}

	// ---- navigation ----------------------------------------------------------

	get activeChannel() {
		const id = this.s?.activeChannelId;
		return id ? this.s?.channelsById[id] : undefined;
	}

	async openChannel(channelId: string, focusMessageId: string | null = null): Promise<void> {
		const session = this.session;
		if (!session) return;
		this.navigate();
		this.view = 'channel';
		this.focusMessageId = focusMessageId;
		if ((this.panel?.kind === 'members' || this.panel?.kind === 'pins' || this.panel?.kind === 'files') && this.s?.activeChannelId !== channelId)
			this.panel = null;
		if (this.s?.workspace) store()?.setItem(CHANNEL_KEY + this.s.workspace.id, channelId);
		await session.openChannel(channelId);
	}

	async openDM(userId: string): Promise<void> {
		await this.openConversation([userId]);
	}

	/** Open (or create) the DM or group DM with these people (the user is implied). */
	async openConversation(userIds: string[]): Promise<void> {
		const session = this.session;
		if (!session) return;
		const c = await session.openDM(userIds);
		await this.openChannel(c.id);
	}

	async openThread(rootId: string): Promise<void> {
		this.navigate();
		this.panel = { kind: 'thread', rootId };
		await this.session?.openThread(rootId);
		void this.session?.markThreadRead(rootId);
	}

	closePanel(): void {
		this.navigate();
		if (this.panel?.kind === 'thread') this.session?.closeThread();
		this.panel = null;
	}

	/** Jump to a message (search result): load around it and flash it. */
	async jumpTo(m: { id: string; channel_id: string; seq: number; thread_root_id?: string }): Promise<void> {
		const session = this.session;
		if (!session) return;
		this.navigate();
		this.view = 'channel';
		const target = await session.jumpTo(m);
		this.focusMessageId = target;
		if (m.thread_root_id) this.panel = { kind: 'thread', rootId: m.thread_root_id };
	}

	/** Alt+↑/↓: the previous or next conversation in the sidebar's order (unread ones only with Shift). */
	async stepChannel(delta: 1 | -1, unreadOnly = false): Promise<void> {
		const s = this.s;
		if (!s) return;
		const order = [...s.channels, ...s.dms];
		if (order.length === 0) return;
		const here = this.view === 'channel' ? order.findIndex((c) => c.id === s.activeChannelId) : -1;
		for (let k = 1; k <= order.length; k++) {
			const i = ((((here < 0 ? (delta > 0 ? -1 : 0) : here) + delta * k) % order.length) + order.length) % order.length;
			const c = order[i];
			if (c.id === s.activeChannelId && this.view === 'channel') continue;
			if (unreadOnly && c.unread_count === 0) continue;
			await this.openChannel(c.id);
			return;
		}
	}

	/** Esc in the channel view: mark the channel read now. */
	markActiveRead(): void {
		const id = this.view === 'channel' ? this.s?.activeChannelId : undefined;
		if (!id) return;
		this.readEpoch++;
		void this.session?.markRead(id).catch((e: Error) => console.warn('parley:', e.message));
	}

	showView(v: View): void {
		this.navigate();
		this.view = v;
		if (v !== 'channel') this.session?.closeChannel();
	}

	// ---- server reads and writes for the views ------------------------------------
	//
	// Views page lists and run one-off requests through these, not through the
	// session's Api: what they need is named here, with the workspace filled in.

	private get workspaceId(): string | undefined {
		return this.s?.workspace?.id;
	}

	/** Whether the user administers the open workspace (owner or admin). */
	get isAdmin(): boolean {
		const r = this.s?.workspace?.role;
		return r === 'owner' || r === 'admin';
	}

	/** The open session's Api. */
	private sessionApi(): Api {
		if (!this.session) throw new Error('parley: no workspace is open');
		return this.session.api;
	}

	/** Upload a file to the open workspace (not attached yet: send it with a message). */
	uploadFile(file: File, onProgress?: (sent: number) => void, signal?: AbortSignal): Promise<FileInfo> {
		const ws = this.workspaceId;
		if (!ws) return Promise.reject(new Error('parley: no workspace is open'));
		return this.sessionApi().uploadFile(ws, file, file.name || 'pasted-file', onProgress, signal);
	}

	/** A file with download URLs signed for the user, cached until a minute before they expire. */
	signedFile(id: string): Promise<FileInfo> {
		const hit = this.signed.get(id);
		if (hit && hit.until > Date.now()) return hit.file;
		const file = this.sessionApi().getFile(id);
		this.signed.set(id, { file, until: Date.now() + 60_000 });
		file.then(
			(f) => this.signed.set(id, { file, until: f.url_expires_at ? Date.parse(f.url_expires_at) - 60_000 : 0 }),
			() => this.signed.delete(id),
		);
		return file;
	}
	private readonly signed = new Map<string, { file: Promise<FileInfo>; until: number }>();

	/** A page of the channel's files, newest first. */
	channelFiles(channelId: string, cursor?: string) {
		return this.sessionApi().listChannelFiles(channelId, cursor);
	}

	/** A signed path as a URL the browser can open. */
	fileUrl(path: string): string {
		return this.sessionApi().fileUrl(path);
	}

	/** A page of the channels the user can see; null before a workspace is open. */
	browseChannels(q: string, cursor: string | undefined) {
		const ws = this.workspaceId;
		return ws ? this.sessionApi().listChannels(ws, { q, cursor, limit: 50 }) : null;
	}

	/** A page of the user directory (its users go to the cache, fresh); null before a workspace is open. */
	directoryPage(q: string, cursor: string | undefined) {
		const ws = this.workspaceId;
		return ws
			? this.sessionApi()
					.listUsers(ws, { q, cursor, limit: 48, include_deactivated: this.isAdmin })
					.then((p) => {
						this.session?.addUsers(p.users);
						return p;
					})
			: null;
	}

	/** A page of search results; null before a workspace is open or without a query. */
	searchPage(q: string, cursor: string | undefined) {
		const ws = this.workspaceId;
		return ws && q ? this.sessionApi().search(ws, q, { cursor }) : null;
	}

	/** The quick switcher's matches; null before a workspace is open. */
	switcher(term: string) {
		const ws = this.workspaceId;
		return ws ? this.sessionApi().switcher(ws, term) : null;
	}

	/** A new invite to the open workspace; null before a workspace is open. */
	createInvite() {
		const ws = this.workspaceId;
		return ws ? this.sessionApi().createInvite(ws) : null;
	}

	// ---- lifecycle (docs/lifecycle.md): admins act on members ----------------

	/** Deactivate or reactivate a member of the open workspace; the cache gets the new user. */
	async setDeactivated(userId: string, deactivated: boolean) {
		const ws = this.workspaceId;
		if (!ws) return;
		const api = this.sessionApi();
		const u = deactivated ? await api.deactivateUser(ws, userId) : await api.reactivateUser(ws, userId);
		this.session?.addUsers([u]);
	}

	/** Remove a member from the open workspace (and every channel of it). */
	async removeMember(userId: string) {
		const ws = this.workspaceId;
		if (ws) await this.sessionApi().removeWorkspaceMember(ws, userId);
	}

	/** Hand the open workspace to another member; the caller becomes an admin. */
	async transferOwnership(userId: string) {
		const ws = this.workspaceId;
		if (!ws) return;
		await this.sessionApi().transferOwnership(ws, userId);
		const w = this.s?.workspace;
		if (w) this.workspaces = this.workspaces.map((x) => (x.id === w.id ? { ...x, role: 'admin' } : x));
	}

	/** Delete the open workspace (owner; confirm is its slug) and go back to the picker. */
	async deleteWorkspace(confirm: string) {
		const ws = this.workspaceId;
		if (!ws) return;
		await this.sessionApi().deleteWorkspace(ws, confirm);
		this.workspaces = this.workspaces.filter((w) => w.id !== ws);
		this.dialog = null;
		this.switchWorkspace();
	}

	/** A page of a channel's members; authors not cached yet are looked up. */
	async membersPage(channelId: string, cursor: string | undefined) {
		const p = await this.sessionApi().listMembers(channelId, { cursor, limit: 50 });
		this.session?.addUsers(p.members.flatMap((m) => (m.user ? [m.user] : [])));
		this.session?.ensureUsers(p.members.filter((m) => !m.user).map((m) => m.user_id));
		return p;
	}

	/** Users to complete an @mention in a channel (flagged when already in it). */
	/** The slash commands of the open workspace, for the composer (cached a minute). */
	commands(): Promise<CommandInfo[]> {
		const ws = this.s?.workspace?.id;
		if (!ws) return Promise.resolve([]);
		const c = this.commandList;
		if (c && c.ws === ws && Date.now() - c.at < 60_000) return c.list;
		const list = this.sessionApi()
			.listCommands(ws)
			.then((r) => r.commands)
			.catch(() => [] as CommandInfo[]);
		this.commandList = { ws, at: Date.now(), list };
		return list;
	}

	/** Forget the cached command list (after the integrations dialog changed it). */
	commandsChanged(): void {
		this.commandList = null;
	}

	/**
	 * Run "/command args" typed in a channel's composer, or in the reply box
	 * of the thread threadRootId (the command runs in that thread: its posts
	 * are replies, its private answers show in the thread panel); false when
	 * text is no command (send it as a message). A failure is shown like the
	 * command's own private answers, in the same place.
	 */
	runCommand(channelId: string, text: string, threadRootId?: string): boolean {
		const cmd = parseCommand(text);
		if (!cmd) return false;
		this.sessionApi()
			.runCommand(channelId, { command: cmd.name, text: cmd.args, thread_root_id: threadRootId })
			.then(
				(r) => {
					if (r.ephemeral) this.ephemerals.add(r.ephemeral);
				},
				(e) => this.ephemerals.notice(channelId, `/${cmd.name} failed: ${(e as Error).message}`, threadRootId),
			);
		return true;
	}

	async mentionSuggestions(channelId: string, q: string) {
		return (await this.sessionApi().mentionSuggestions(channelId, q, 8)).users;
	}

	async addMember(channelId: string, userId: string): Promise<void> {
		await this.sessionApi().addMembers(channelId, [userId]);
	}

	/** The full channel (with created_by), for what the channel menu offers. */
	channelDetails(channelId: string) {
		return this.sessionApi().getChannel(channelId);
	}

	async setTopic(channelId: string, topic: string): Promise<void> {
		await this.session?.api.updateChannel(channelId, { topic });
	}

	// ---- the users in view: only users on screen ---------------------------------

	/**
	 * A part of the screen (a source of the library's VIEW_SOURCES) reports
	 * the users it shows with name, avatar or status; [] when it goes. The
	 * session keeps presence_sub equal to the union and refreshes users that
	 * come back into view.
	 */
	setVisibleUsers(source: string, ids: string[]): void {
		this.session?.setViewUsers(source, ids);
	}

	// ---- notifications -----------------------------------------------------------

	/** Ask for permission; call from a click (browsers require a user gesture). */
	async enableNotifications(): Promise<void> {
		if (typeof Notification === 'undefined') return;
		this.notifyPermission = await Notification.requestPermission();
	}

	private notify(n: SessionNotification): void {
		if (this.notifyPermission !== 'granted') return;
		const author = this.session?.user(n.message.user_id);
		const where = n.channel ? (n.kind === 'dm' ? 'Direct message' : `#${n.channel.name}`) : '';
		const title = `${author?.name ?? 'Someone'}${where ? ' · ' + where : ''}`;
		try {
			const note = new Notification(title, { body: plainText(n.message.text), tag: n.message.id });
			note.onclick = () => {
				window.focus();
				void this.jumpTo(n.message);
				note.close();
			};
		} catch {
			// Some browsers only allow notifications from a service worker.
		}
	}
}

export const app = new App();
