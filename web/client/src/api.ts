// Api: a typed fetch wrapper for every HTTP endpoint of the Parley API.

import type {
	AuditEntry,
	Bot,
	BotToken,
	CommandInfo,
	CommandResult,
	Integration,
	Scope,
	Webhook,
	Boot,
	BootQuery,
	Channel,
	ChannelHeader,
	ChannelKind,
	FileInfo,
	Invite,
	InvitePreview,
	ListOf,
	LogEntry,
	Member,
	MentionSuggestion,
	Message,
	ReadState,
	SearchResult,
	SyncEntry,
	Thread,
	User,
	Upload,
	UserStatus,
	NotifyPrefs,
	NotifySettings,
	Workspace,
} from './types';

/** Files larger than this go up resumably, in chunks (8 MiB: the server's chunk size). */
export const RESUMABLE_OVER = 8 << 20;

/** An error answer of the API, or a failure in transit (status 0). */
export class ApiError extends Error {
	/** HTTP status; 0 when the request never got an answer. */
	readonly status: number;
	/** The API's error code (`not_found`, `forbidden`, …), or `network`. */
	readonly code: string;
	/** From Retry-After on 429 and 503, in milliseconds. */
	readonly retryAfterMs?: number;

	constructor(status: number, code: string, message: string, retryAfterMs?: number) {
		super(message);
		this.name = 'ApiError';
		this.status = status;
		this.code = code;
		this.retryAfterMs = retryAfterMs;
	}
}

export interface ApiOptions {
	/** Origin of the server, e.g. "http://127.0.0.1:8080"; "" (default) for the page's own origin. */
	baseUrl?: string;
	/** Bearer token; set later with setToken. */
	token?: string;
	/** fetch implementation (default globalThis.fetch). */
	fetch?: typeof fetch;
	/** Called when a request is answered 401: the token is gone. */
	onUnauthorized?: () => void;
	/**
	 * How many times a request that is safe to repeat is retried after a
	 * failure in transit, a 503 or a 429 (default 2). The wait honours
	 * Retry-After up to 5 s, else 300 ms then 1 s, with jitter.
	 */
	retries?: number;
}

export interface RequestOptions {
	signal?: AbortSignal;
	/** Safe to repeat (default: GET, PUT and DELETE are). */
	idempotent?: boolean;
}

export interface PageQuery {
	cursor?: string;
	limit?: number;
}

export interface HistoryQuery {
	before_seq?: number;
	after_seq?: number;
	limit?: number;
}

/** Answer of signup and login. */
export interface AuthResult {
	user: User;
	token: string;
}

export type SwitcherResult = { channels: Channel[]; users: User[] };

/** Escape one path segment. */
const seg = (s: string) => encodeURIComponent(s);

function query(q: Record<string, string | number | boolean | undefined>): string {
	const p = new URLSearchParams();
	for (const [k, v] of Object.entries(q)) {
		if (v !== undefined && v !== '') p.set(k, String(v));
	}
	const s = p.toString();
	return s ? `?${s}` : '';
}

function parseRetryAfter(h: string | null): number | undefined {
	if (!h) return undefined;
	const n = Number(h);
	if (Number.isFinite(n)) return Math.max(0, n * 1000);
	const t = Date.parse(h);
	return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}

/**
 * Api calls the HTTP API under /api/v1. Every method returns the decoded
 * answer or throws ApiError. It never retries on its own; callers decide.
 */
export class Api {
	readonly baseUrl: string;
	private token: string | undefined;
	private readonly fetchFn: typeof fetch;
	private readonly onUnauthorized?: () => void;
	private readonly retries: number;

	constructor(opts: ApiOptions = {}) {
		this.retries = opts.retries ?? 2;
		this.baseUrl = (opts.baseUrl ?? '').replace(/\/+$/, '');
		this.token = opts.token;
		this.fetchFn = opts.fetch ?? ((...a) => globalThis.fetch(...a));
		this.onUnauthorized = opts.onUnauthorized;
	}

	/** The bearer token in use, if any. */
	getToken(): string | undefined {
		return this.token;
	}

	setToken(token: string | undefined): void {
		this.token = token;
	}

	/** The gateway URL on the API's own host (ws:// or wss://). */
	gatewayUrl(): string {
		const base = this.baseUrl || (typeof location !== 'undefined' ? location.origin : '');
		return base.replace(/^http/, 'ws') + '/api/v1/gateway';
	}

	/**
	 * Low-level request; path is relative to /api/v1. Requests that are safe
	 * to repeat are retried (see ApiOptions.retries).
	 */
	async request<T>(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<T> {
		const idempotent = opts.idempotent ?? (method === 'GET' || method === 'PUT' || method === 'DELETE');
		for (let attempt = 0; ; attempt++) {
			try {
				return await this.once<T>(method, path, body, opts.signal);
			} catch (e) {
				if (!(e instanceof ApiError) || !idempotent || attempt >= this.retries || opts.signal?.aborted) throw e;
				if (e.status !== 0 && e.status !== 503 && e.status !== 429) throw e;
				const base = e.retryAfterMs !== undefined ? Math.min(e.retryAfterMs, 5000) : attempt === 0 ? 300 : 1000;
				await new Promise((r) => setTimeout(r, base + Math.random() * 250));
			}
		}
	}

	private async once<T>(method: string, path: string, body: unknown, signal: AbortSignal | undefined): Promise<T> {
		const headers: Record<string, string> = { Accept: 'application/json' };
		if (this.token) headers.Authorization = `Bearer ${this.token}`;
		if (body !== undefined) headers['Content-Type'] = 'application/json';
		let res: Response;
		try {
			res = await this.fetchFn(`${this.baseUrl}/api/v1${path}`, {
				method,
				headers,
				body: body === undefined ? undefined : JSON.stringify(body),
				signal,
			});
		} catch (e) {
			if (signal?.aborted) throw e;
			throw new ApiError(0, 'network', `${method} ${path}: ${(e as Error).message ?? e}`);
		}
		if (res.status === 204) return undefined as T;
		const text = await res.text();
		let data: unknown = undefined;
		if (text) {
			try {
				data = JSON.parse(text);
			} catch {
				if (res.ok) throw new ApiError(res.status, 'decode', `${method} ${path}: answer is not JSON`);
			}
		}
		if (!res.ok) {
			const err = (data as { error?: { code?: string; message?: string } } | undefined)?.error;
			if (res.status === 401) this.onUnauthorized?.();
			throw new ApiError(
				res.status,
				err?.code ?? `http_${res.status}`,
				err?.message ?? `${method} ${path}: HTTP ${res.status}`,
				parseRetryAfter(res.headers.get('Retry-After')),
			);
		}
		return data as T;
	}

	// ---- accounts -------------------------------------------------------

	/** Create an account; the returned token is also kept for later calls. */
	async signup(p: { email: string; password: string; name: string; handle: string }): Promise<AuthResult> {
		const r = await this.request<AuthResult>('POST', '/auth/signup', p);
		this.token = r.token;
		return r;
	}

	/** Log in; the returned token is also kept for later calls. */
	async login(email: string, password: string): Promise<AuthResult> {
		const r = await this.request<AuthResult>('POST', '/auth/login', { email, password });
		this.token = r.token;
		return r;
	}

	/** Revoke the token (its sockets close with 4004) and forget it. */
	async logout(): Promise<void> {
		try {
			await this.request<void>('POST', '/auth/logout');
		} finally {
			this.token = undefined;
		}
	}

	me(): Promise<User> {
		return this.request('GET', '/me');
	}

	updateMe(p: Partial<Pick<User, 'name' | 'title' | 'avatar_hash'>>): Promise<User> {
		return this.request('PATCH', '/me', p);
	}

	setStatus(s: UserStatus): Promise<User> {
		return this.request('PUT', '/me/status', s);
	}

	/** The caller's email notification preference. */
	notifyPrefs(): Promise<NotifySettings> {
		return this.request('GET', '/me/notifications');
	}

	/** Set the caller's email notification preference (either field may be left out). */
	setNotifyPrefs(p: Partial<NotifyPrefs>): Promise<NotifySettings> {
		return this.request('PUT', '/me/notifications', p, { idempotent: true });
	}

	/** Users by id (at most limits.max_batch_users per call). */
	usersBatch(ids: string[]): Promise<ListOf<'users', User>> {
		return this.request('POST', '/users/batch', { ids }, { idempotent: true });
	}

	// ---- workspaces -----------------------------------------------------

	createWorkspace(name: string, slug: string): Promise<Workspace> {
		return this.request('POST', '/workspaces', { name, slug });
	}

	listWorkspaces(): Promise<ListOf<'workspaces', Workspace>> {
		return this.request('GET', '/workspaces');
	}

	getWorkspace(ws: string): Promise<Workspace> {
		return this.request('GET', `/workspaces/${seg(ws)}`);
	}

	createInvite(ws: string, p: { max_uses?: number; expires_in_s?: number } = {}): Promise<Invite> {
		return this.request('POST', `/workspaces/${seg(ws)}/invites`, p);
	}

	/** Which workspace an invite is for (no session needed): unknown and expired codes are 404. */
	invitePreview(code: string): Promise<InvitePreview> {
		return this.request('GET', `/invites/${seg(code)}`);
	}

	acceptInvite(code: string): Promise<Workspace> {
		return this.request('POST', `/invites/${seg(code)}/accept`);
	}

	setMemberRole(ws: string, userId: string, role: string): Promise<void> {
		return this.request('PUT', `/workspaces/${seg(ws)}/members/${seg(userId)}/role`, { role });
	}

	/**
	 * The workspace directory, a page at a time (q filters by name/handle).
	 * Deactivated users only with include_deactivated (an admin's list).
	 */
	listUsers(ws: string, q: { q?: string; include_deactivated?: boolean } & PageQuery = {}): Promise<ListOf<'users', User>> {
		const { include_deactivated, ...rest } = q;
		return this.request('GET', `/workspaces/${seg(ws)}/users${query({ ...rest, include_deactivated: include_deactivated ? 'true' : undefined })}`);
	}

	// ---- lifecycle (docs/lifecycle.md) ----------------------------------

	/** Deactivate a member's account: their sockets close with 4010, their tokens stop working. */
	deactivateUser(ws: string, userId: string): Promise<User> {
		return this.request('POST', `/workspaces/${seg(ws)}/members/${seg(userId)}/deactivate`, undefined, { idempotent: true });
	}

	reactivateUser(ws: string, userId: string): Promise<User> {
		return this.request('POST', `/workspaces/${seg(ws)}/members/${seg(userId)}/reactivate`, undefined, { idempotent: true });
	}

	/** Remove a member from the workspace and every channel of it. */
	removeWorkspaceMember(ws: string, userId: string): Promise<void> {
		return this.request('DELETE', `/workspaces/${seg(ws)}/members/${seg(userId)}`);
	}

	/** Make userId the owner; the caller (the owner) becomes an admin. */
	transferOwnership(ws: string, userId: string): Promise<void> {
		return this.request('POST', `/workspaces/${seg(ws)}/owner`, { user_id: userId });
	}

	/** Delete the workspace (owner only); confirm is its slug, typed by the owner. */
	deleteWorkspace(ws: string, confirm: string): Promise<{ workspace_id: string; status: string }> {
		return this.request('DELETE', `/workspaces/${seg(ws)}${query({ confirm })}`);
	}

	/** Quick switcher: ranked channels and people matching q. */
	switcher(ws: string, q: string): Promise<SwitcherResult> {
		return this.request('GET', `/workspaces/${seg(ws)}/switcher${query({ q })}`);
	}

	boot(q: BootQuery): Promise<Boot> {
		return this.request('POST', '/boot', q, { idempotent: true });
	}

	// ---- channels -------------------------------------------------------

	createChannel(ws: string, p: { name: string; kind: 'public' | 'private'; topic?: string }): Promise<Channel> {
		return this.request('POST', `/workspaces/${seg(ws)}/channels`, p);
	}

	/** Channel browser: the workspace's channels the caller can see. */
	listChannels(ws: string, q: { q?: string } & PageQuery = {}): Promise<ListOf<'channels', Channel>> {
		return this.request('GET', `/workspaces/${seg(ws)}/channels${query({ ...q })}`);
	}

	/** Open (or find) a DM (one other) or group DM (2–8 others). */
	openDM(workspaceId: string, userIds: string[]): Promise<Channel> {
		return this.request('POST', '/dms', { workspace_id: workspaceId, user_ids: userIds }, { idempotent: true });
	}

	getChannel(id: string): Promise<Channel> {
		return this.request('GET', `/channels/${seg(id)}`);
	}

	updateChannel(
		id: string,
		p: { name?: string; topic?: string; purpose?: string; slow_mode_seconds?: number; post_limit_per_minute?: number },
	): Promise<Channel> {
		return this.request('PATCH', `/channels/${seg(id)}`, p);
	}

	archiveChannel(id: string): Promise<Channel> {
		return this.request('POST', `/channels/${seg(id)}/archive`);
	}

	joinChannel(id: string): Promise<Channel> {
		return this.request('POST', `/channels/${seg(id)}/join`);
	}

	leaveChannel(id: string): Promise<Channel> {
		return this.request('POST', `/channels/${seg(id)}/leave`);
	}

	addMembers(id: string, userIds: string[]): Promise<Channel> {
		return this.request('POST', `/channels/${seg(id)}/members`, { user_ids: userIds });
	}

	removeMember(id: string, userId: string): Promise<void> {
		return this.request('DELETE', `/channels/${seg(id)}/members/${seg(userId)}`);
	}

	listMembers(id: string, q: PageQuery = {}): Promise<ListOf<'members', Member>> {
		return this.request('GET', `/channels/${seg(id)}/members${query({ ...q })}`);
	}

	/** People to offer after `@`: channel members first, each with in_channel. */
	mentionSuggestions(id: string, q: string, limit?: number): Promise<ListOf<'users', MentionSuggestion>> {
		return this.request('GET', `/channels/${seg(id)}/mention-suggestions${query({ q, limit })}`);
	}

	/** Channel header: member count, topic, purpose, a few members. */
	channelHeader(id: string): Promise<ChannelHeader> {
		return this.request('GET', `/channels/${seg(id)}/header`);
	}

	/** Move the caller's read marker to seq. */
	markRead(id: string, seq: number): Promise<ReadState> {
		return this.request('POST', `/channels/${seg(id)}/read`, { seq }, { idempotent: true });
	}

	// ---- messages -------------------------------------------------------

	/** Post a message; the same clientMsgId twice returns the first message. */
	postMessage(channelId: string, p: { text: string; client_msg_id: string; thread_root_id?: string; file_ids?: string[] }): Promise<Message> {
		return this.request('POST', `/channels/${seg(channelId)}/messages`, p, { idempotent: true }); // client_msg_id makes it safe
	}

	/** A page of history, ascending by seq (no cursor: the latest). */
	listMessages(channelId: string, q: HistoryQuery = {}): Promise<ListOf<'messages', Message>> {
		return this.request('GET', `/channels/${seg(channelId)}/messages${query({ ...q })}`);
	}

	// ---- files (docs/files.md) -------------------------------------------

	/**
	 * Upload a file (not attached yet: post it with file_ids). Files larger
	 * than one chunk go resumably, chunk by chunk, each chunk retried after a
	 * failure from the offset the server reports. onProgress gets the bytes
	 * sent so far. XMLHttpRequest where there is one (it reports upload
	 * progress), fetch elsewhere.
	 */
	async uploadFile(workspaceId: string, file: Blob, name: string, onProgress?: (sent: number) => void, signal?: AbortSignal): Promise<FileInfo> {
		if (file.size > RESUMABLE_OVER) return this.uploadResumable(workspaceId, file, name, onProgress, signal);
		return this.send<FileInfo>('POST', `/workspaces/${seg(workspaceId)}/files${query({ name })}`, file, onProgress, signal);
	}

	private async uploadResumable(workspaceId: string, file: Blob, name: string, onProgress?: (sent: number) => void, signal?: AbortSignal): Promise<FileInfo> {
		let u = await this.request<Upload>('POST', `/workspaces/${seg(workspaceId)}/uploads`, { name, size: file.size });
		let failures = 0;
		while (u.offset < u.size) {
			const chunk = file.slice(u.offset, Math.min(u.size, u.offset + u.chunk_size));
			const base = u.offset;
			try {
				u = await this.send<Upload>('PUT', `/uploads/${seg(u.id)}${query({ offset: u.offset })}`, chunk, (n) => onProgress?.(base + n), signal);
				failures = 0;
			} catch (e) {
				if (signal?.aborted || !(e instanceof ApiError) || (e.status !== 0 && e.status !== 409 && e.status < 500) || ++failures > 3) throw e;
				u = await this.request<Upload>('GET', `/uploads/${seg(u.id)}`); // where did it get to?
			}
		}
		return this.request<FileInfo>('POST', `/uploads/${seg(u.id)}/complete`, undefined, { idempotent: false });
	}

	/** Send raw bytes and decode the JSON answer, reporting upload progress. */
	private send<T>(method: string, path: string, body: Blob, onProgress?: (sent: number) => void, signal?: AbortSignal): Promise<T> {
		const url = `${this.baseUrl}/api/v1${path}`;
		if (typeof XMLHttpRequest === 'undefined') {
			const headers: Record<string, string> = { 'Content-Type': 'application/octet-stream' };
			if (this.token) headers.Authorization = `Bearer ${this.token}`;
			return this.fetchFn(url, { method, headers, body, signal }).then(
				async (res) => {
					const data = await res.json().catch(() => undefined);
					if (!res.ok) throw new ApiError(res.status, data?.error?.code ?? `http_${res.status}`, data?.error?.message ?? `HTTP ${res.status}`);
					onProgress?.(body.size);
					return data as T;
				},
				(e: Error) => {
					if (signal?.aborted) throw e;
					throw new ApiError(0, 'network', `${method} ${path}: ${e.message ?? e}`);
				},
			);
		}
		return new Promise<T>((resolve, reject) => {
			const xhr = new XMLHttpRequest();
			xhr.open(method, url);
			if (this.token) xhr.setRequestHeader('Authorization', `Bearer ${this.token}`);
			xhr.setRequestHeader('Content-Type', 'application/octet-stream');
			xhr.upload.onprogress = (e) => onProgress?.(e.loaded);
			xhr.onerror = () => reject(new ApiError(0, 'network', `${method} ${path}: the upload failed`));
			xhr.onabort = () => reject(new ApiError(0, 'aborted', 'upload cancelled'));
			xhr.onload = () => {
				let data: { error?: { code?: string; message?: string } } | undefined;
				try {
					data = JSON.parse(xhr.responseText);
				} catch {
					data = undefined;
				}
				if (xhr.status >= 200 && xhr.status < 300) return resolve(data as T);
				if (xhr.status === 401) this.onUnauthorized?.();
				reject(new ApiError(xhr.status, data?.error?.code ?? `http_${xhr.status}`, data?.error?.message ?? `HTTP ${xhr.status}`));
			};
			signal?.addEventListener('abort', () => xhr.abort());
			xhr.send(body);
		});
	}

	/** A file's metadata with download URLs signed for the caller. */
	getFile(id: string): Promise<FileInfo> {
		return this.request('GET', `/files/${seg(id)}`);
	}

	/** A page of the files attached in a channel, newest first, with signed URLs. */
	listChannelFiles(channelId: string, cursor?: string): Promise<ListOf<'files', FileInfo>> {
		return this.request('GET', `/channels/${seg(channelId)}/files${query({ cursor })}`);
	}

	/** Delete an unattached file of the caller's. */
	deleteFile(id: string): Promise<void> {
		return this.request('DELETE', `/files/${seg(id)}`);
	}

	/** A signed path made absolute against the API's base. */
	fileUrl(path: string): string {
		return `${this.baseUrl}${path}`;
	}

	listPins(channelId: string): Promise<ListOf<'messages', Message>> {
		return this.request('GET', `/channels/${seg(channelId)}/pins`);
	}

	getMessage(id: string): Promise<Message> {
		return this.request('GET', `/messages/${seg(id)}`);
	}

	editMessage(id: string, text: string): Promise<Message> {
		return this.request('PATCH', `/messages/${seg(id)}`, { text });
	}

	deleteMessage(id: string): Promise<void> {
		return this.request('DELETE', `/messages/${seg(id)}`);
	}

	/** Add the caller's reaction; emoji is a shortcode such as "thumbsup". */
	addReaction(id: string, emoji: string): Promise<Message> {
		return this.request('PUT', `/messages/${seg(id)}/reactions/${seg(emoji)}`);
	}

	removeReaction(id: string, emoji: string): Promise<Message> {
		return this.request('DELETE', `/messages/${seg(id)}/reactions/${seg(emoji)}`);
	}

	pin(id: string): Promise<Message> {
		return this.request('PUT', `/messages/${seg(id)}/pin`);
	}

	unpin(id: string): Promise<Message> {
		return this.request('DELETE', `/messages/${seg(id)}/pin`);
	}

	// ---- threads --------------------------------------------------------

	/** A page of a thread's replies, ascending. */
	listReplies(rootId: string, q: { after_seq?: number; limit?: number } = {}): Promise<ListOf<'messages', Message>> {
		return this.request('GET', `/messages/${seg(rootId)}/replies${query({ ...q })}`);
	}

	/** Followed threads, with unread reply and mention counts. */
	listThreads(ws: string, q: { unread?: boolean } & PageQuery = {}): Promise<ListOf<'threads', Thread>> {
		return this.request('GET', `/workspaces/${seg(ws)}/threads${query({ ...q, unread: q.unread ? 'true' : undefined })}`);
	}

	followThread(rootId: string): Promise<Thread> {
		return this.request('PUT', `/threads/${seg(rootId)}/follow`);
	}

	unfollowThread(rootId: string): Promise<Thread> {
		return this.request('DELETE', `/threads/${seg(rootId)}/follow`);
	}

	markThreadRead(rootId: string): Promise<Thread> {
		return this.request('POST', `/threads/${seg(rootId)}/read`, undefined, { idempotent: true });
	}

	// ---- search ---------------------------------------------------------

	/** Messages the caller may see that match q. */
	search(ws: string, q: string, p: PageQuery = {}): Promise<ListOf<'results', SearchResult>> {
		return this.request('GET', `/workspaces/${seg(ws)}/search${query({ q, ...p })}`);
	}

	// ---- export ---------------------------------------------------------

	/**
	 * The workspace as a Parley export zip (docs/import.md); its owner only.
	 * With private, the private channels too.
	 */
	async exportWorkspace(ws: string, opts: { private?: boolean; signal?: AbortSignal } = {}): Promise<Blob> {
		const path = `/workspaces/${seg(ws)}/export${query({ private: opts.private ? 'true' : undefined })}`;
		const headers: Record<string, string> = { Accept: 'application/zip, application/json' };
		if (this.token) headers.Authorization = `Bearer ${this.token}`;
		let res: Response;
		try {
			res = await this.fetchFn(`${this.baseUrl}/api/v1${path}`, { method: 'GET', headers, signal: opts.signal });
		} catch (e) {
			if (opts.signal?.aborted) throw e;
			throw new ApiError(0, 'network', `GET ${path}: ${(e as Error).message ?? e}`);
		}
		if (!res.ok) {
			let err: { code?: string; message?: string } | undefined;
			try {
				err = ((await res.json()) as { error?: { code?: string; message?: string } }).error;
			} catch {
				err = undefined;
			}
			if (res.status === 401) this.onUnauthorized?.();
			throw new ApiError(
				res.status,
				err?.code ?? `http_${res.status}`,
				err?.message ?? `GET ${path}: HTTP ${res.status}`,
				parseRetryAfter(res.headers.get('Retry-After')),
			);
		}
		return res.blob();
	}

	// ---- catch-up -------------------------------------------------------

	/** A page of a channel's durable event log after afterSeq, ascending. */
	listEvents(channelId: string, afterSeq: number, limit?: number): Promise<ListOf<'events', LogEntry>> {
		return this.request('GET', `/channels/${seg(channelId)}/events${query({ after_seq: afterSeq, limit })}`);
	}

	/** Missed events of many channels (at most 500) in one call. */
	sync(channels: Record<string, number>): Promise<{ channels: Record<string, SyncEntry> }> {
		return this.request('POST', '/sync', { channels }, { idempotent: true });
	}

	// ---- integrations (docs/integrations.md) ----------------------------

	/** Create a bot user (workspace admins). */
	createBot(ws: string, p: { name: string; handle: string }): Promise<Bot> {
		return this.request('POST', `/workspaces/${seg(ws)}/bots`, p);
	}

	listBots(ws: string): Promise<ListOf<'bots', Bot>> {
		return this.request('GET', `/workspaces/${seg(ws)}/bots`);
	}

	/** Deactivate a bot and revoke its tokens. */
	revokeBot(ws: string, botId: string): Promise<void> {
		return this.request('DELETE', `/workspaces/${seg(ws)}/bots/${seg(botId)}`);
	}

	/** A scoped token for a bot; its `token` is shown only in this answer. */
	createBotToken(ws: string, botId: string, p: { label?: string; scopes: Scope[] }): Promise<BotToken> {
		return this.request('POST', `/workspaces/${seg(ws)}/bots/${seg(botId)}/tokens`, p);
	}

	listBotTokens(ws: string, botId: string): Promise<ListOf<'tokens', BotToken>> {
		return this.request('GET', `/workspaces/${seg(ws)}/bots/${seg(botId)}/tokens`);
	}

	revokeBotToken(ws: string, tokenId: string): Promise<void> {
		return this.request('DELETE', `/workspaces/${seg(ws)}/bot-tokens/${seg(tokenId)}`);
	}

	/** What the workspace's bots did, newest first. */
	botAudit(ws: string, q: { bot_id?: string } & PageQuery = {}): Promise<ListOf<'entries', AuditEntry>> {
		return this.request('GET', `/workspaces/${seg(ws)}/bot-audit${query({ bot_id: q.bot_id, cursor: q.cursor, limit: q.limit })}`);
	}

	/** An incoming webhook for a channel; its `url` is shown only in this answer. */
	createWebhook(channelId: string, name: string): Promise<Webhook> {
		return this.request('POST', `/channels/${seg(channelId)}/webhooks`, { name });
	}

	listWebhooks(ws: string): Promise<ListOf<'webhooks', Webhook>> {
		return this.request('GET', `/workspaces/${seg(ws)}/webhooks`);
	}

	deleteWebhook(ws: string, hookId: string): Promise<void> {
		return this.request('DELETE', `/workspaces/${seg(ws)}/webhooks/${seg(hookId)}`);
	}

	/** A slash command or outgoing webhook (workspace admins). */
	createIntegration(
		ws: string,
		p: {
			kind: 'command' | 'outgoing';
			name: string;
			url: string;
			description?: string;
			channel_id?: string;
			trigger_words?: string[];
		},
	): Promise<Integration> {
		return this.request('POST', `/workspaces/${seg(ws)}/integrations`, p);
	}

	listIntegrations(ws: string): Promise<ListOf<'integrations', Integration>> {
		return this.request('GET', `/workspaces/${seg(ws)}/integrations`);
	}

	deleteIntegration(ws: string, id: string): Promise<void> {
		return this.request('DELETE', `/workspaces/${seg(ws)}/integrations/${seg(id)}`);
	}

	/** The commands a member may type: built-ins first. */
	listCommands(ws: string): Promise<ListOf<'commands', CommandInfo>> {
		return this.request('GET', `/workspaces/${seg(ws)}/commands`);
	}

	/** Run "/command text" in a channel. Never retried: a command may have effects. */
	runCommand(channelId: string, p: { command: string; text: string; thread_root_id?: string }): Promise<CommandResult> {
		return this.request('POST', `/channels/${seg(channelId)}/commands`, p, { idempotent: false });
	}
}

/** A fresh client_msg_id. */
export function newClientMsgId(): string {
	const c = globalThis.crypto;
	if (c && 'randomUUID' in c) return c.randomUUID();
	return `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

export type { ChannelKind };
