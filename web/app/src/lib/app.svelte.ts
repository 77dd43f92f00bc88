// The application's state: who is signed in, which workspace is open, and
// what is on screen. Server state lives in the client library's Session;
// this class holds its latest snapshot in `$state.raw` and adds what only
// the UI cares about (views, panels, dialogs, presence on screen).
//
// Components talk to the server only through this object (and the session's
// state operations); none reaches for the session's Api.

import { Api, ApiError, Session, type SessionNotification, type SessionState, type User, type Workspace } from '@parley/client';
import { plainText } from './markdown';
import { watchPage } from './page';

const TOKEN_KEY = 'parley.token';
const WS_KEY = 'parley.workspace';
const CHANNEL_KEY = 'parley.channel.';

export type Screen = 'loading' | 'auth' | 'workspaces' | 'chat';
export type View = 'channel' | 'threads' | 'directory' | 'search' | 'browse';
export type Panel = { kind: 'thread'; rootId: string } | { kind: 'members' } | { kind: 'profile'; userId: string } | { kind: 'pins' } | null;
export type Dialog = 'switcher' | 'invite' | 'create-channel' | FeatureDialog | null;
/** The dialogs of pins, group DMs, channel settings and the profile menu. */
export type FeatureDialog = 'new-message' | 'channel-settings' | 'edit-profile' | 'set-status' | 'preferences';

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
	searchQuery = $state('');
	/** A message to scroll to and flash in the channel view. */
	focusMessageId = $state<string | null>(null);
	notifyPermission = $state<NotificationPermission | 'unsupported'>(typeof Notification === 'undefined' ? 'unsupported' : Notification.permission);
	error = $state('');

	private unsubscribe: (() => void)[] = [];
	private pendingInvite: string | null = null;

	/** Start: resume a stored session, or show the log-in screen. */
	async init(): Promise<void> {
		const m = /^\/invite\/([^/?#]+)/.exec(location.pathname);
		if (m) this.pendingInvite = decodeURIComponent(m[1]);
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
			history.replaceState(null, '', '/');
			try {
				await this.acceptInvite(code);
				return;
			} catch (e) {
				this.error = `The invite did not work: ${(e as Error).message}`;
			}
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
	async openWorkspace(wsId: string): Promise<void> {
		this.closeSession();
		const token = this.api.getToken();
		const session = new Session({ token });
		this.session = session;
		this.unsubscribe.push(
			watchPage(session),
			session.subscribe((s) => (this.s = s)),
			session.on('loggedOut', () => this.forget()),
			session.on('notify', (n) => this.notify(n)),
			// Background failures (a user lookup, a read marker) are already
			// reflected in state where it matters; keep a trace for developers.
			session.on('error', (e) => console.warn('parley:', e.message)),
		);
		const lastChannel = store()?.getItem(CHANNEL_KEY + wsId) ?? undefined;
		await session.start(wsId, { channelId: lastChannel });
		store()?.setItem(WS_KEY, wsId);
		this.view = 'channel';
		this.panel = null;
		this.screen = 'chat';
		const st = session.state;
		const target =
			(lastChannel && st.channelsById[lastChannel]?.is_member && lastChannel) ||
			st.channels.find((c) => c.name === 'general')?.id ||
			st.channels[0]?.id ||
			st.dms[0]?.id;
		if (target) await this.openChannel(target);
	}

	/** Back to the workspace picker. */
	switchWorkspace(): void {
		this.closeSession();
		store()?.removeItem(WS_KEY);
		this.screen = 'workspaces';
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
		this.view = 'channel';
		this.focusMessageId = focusMessageId;
		if ((this.panel?.kind === 'members' || this.panel?.kind === 'pins') && this.s?.activeChannelId !== channelId) this.panel = null;
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
		this.panel = { kind: 'thread', rootId };
		await this.session?.openThread(rootId);
		void this.session?.markThreadRead(rootId);
	}

	closePanel(): void {
		if (this.panel?.kind === 'thread') this.session?.closeThread();
		this.panel = null;
	}

	/** Jump to a message (search result): load around it and flash it. */
	async jumpTo(m: { id: string; channel_id: string; seq: number; thread_root_id?: string }): Promise<void> {
		const session = this.session;
		if (!session) return;
		this.view = 'channel';
		const target = await session.jumpTo(m);
		this.focusMessageId = target;
		if (m.thread_root_id) this.panel = { kind: 'thread', rootId: m.thread_root_id };
	}

	showView(v: View): void {
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

	/** The open session's Api. */
	private sessionApi(): Api {
		if (!this.session) throw new Error('parley: no workspace is open');
		return this.session.api;
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
					.listUsers(ws, { q, cursor, limit: 48 })
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

	/** A page of a channel's members; authors not cached yet are looked up. */
	async membersPage(channelId: string, cursor: string | undefined) {
		const p = await this.sessionApi().listMembers(channelId, { cursor, limit: 50 });
		this.session?.addUsers(p.members.flatMap((m) => (m.user ? [m.user] : [])));
		this.session?.ensureUsers(p.members.filter((m) => !m.user).map((m) => m.user_id));
		return p;
	}

	/** Users to complete an @mention in a channel (flagged when already in it). */
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
