// A scripted Parley server for the client library's unit tests: a real HTTP
// server and a real WebSocket server (the `ws` package) on a loopback port,
// speaking the gateway protocol and the catch-up endpoints (/sync, /events)
// from an in-memory event log, with hooks to make it misbehave exactly as a
// test needs (drop sockets, refuse resumes, skip seqs, delay answers).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, WebSocket } from 'ws';
import type { LogEntry, EventData, User } from '../src/types';

export interface FakeConn {
	ws: WebSocket;
	/** Frames received from the client, decoded. */
	frames: Record<string, unknown>[];
	session?: FakeSession;
}

export interface FakeSession {
	id: string;
	userId: string;
	s: number;
	/** Every event frame sent in this session, for replay. */
	sent: string[];
	conn?: FakeConn;
}

export interface RecordedRequest {
	method: string;
	path: string;
	query: URLSearchParams;
	body: unknown;
}

export class FakeParley {
	private http!: Server;
	private wss!: WebSocketServer;
	url = '';
	readonly conns: FakeConn[] = [];
	readonly sessions = new Map<string, FakeSession>();
	readonly requests: RecordedRequest[] = [];
	/** Durable log per channel. */
	readonly log = new Map<string, LogEntry[]>();
	readonly users = new Map<string, User>();
	/** Channels the user can no longer see: /sync says not_found, /events 404. */
	readonly gone = new Set<string>();
	heartbeatMs = 30000;
	/** How resume is answered. */
	resumeMode: 'ok' | 'invalid' = 'ok';
	/** Answers POST /boot (404 when unset). */
	bootAnswer: ((q: Record<string, unknown>) => unknown) | undefined;
	/** The next this many sockets are accepted and then never spoken to (no hello). */
	mute = 0;
	/** Refuse identify with this close code (e.g. 4004). */
	identifyClose: number | undefined;
	/** Held /sync answers: resolved by releaseSync(). */
	holdSync = false;
	private syncWaiters: Array<() => void> = [];
	/** Held /channels/{id}/messages answers (the page is taken before the hold): released by releaseMessages(). */
	holdMessages = false;
	private messagesWaiters: Array<() => void> = [];
	/** Statuses to answer the next requests to a path with (then it works again). */
	readonly failNext = new Map<string, number[]>();
	/** Every HTTP request is cut off unanswered, as with no network. */
	offline = false;
	/** The next this many message posts are stored, and their answers lost on the way. */
	loseAnswers = 0;
	/** Page size of /events. */
	eventsPage = 200;
	/** /sync answers too_far above this many missed events. */
	syncMax = 500;
	private nextSession = 1;
	private listeners: Array<() => void> = [];

	async start(): Promise<void> {
		this.http = createServer((req, res) => void this.onRequest(req, res));
		this.wss = new WebSocketServer({ noServer: true });
		this.http.on('upgrade', (req, socket, head) => {
			if (!req.url?.startsWith('/api/v1/gateway')) {
				socket.destroy();
				return;
			}
			this.wss.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws));
		});
		await new Promise<void>((r) => this.http.listen(0, '127.0.0.1', r));
		this.url = `http://127.0.0.1:${(this.http.address() as AddressInfo).port}`;
	}

	async stop(): Promise<void> {
		for (const c of this.conns) c.ws.terminate();
		this.wss.close();
		this.http.closeAllConnections();
		await new Promise<void>((r) => this.http.close(() => r()));
	}

	/** Resolves once cond() holds, re-checked after every server-side happening. */
	waitFor(cond: () => boolean, what = 'condition', timeoutMs = 5000): Promise<void> {
		if (cond()) return Promise.resolve();
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				this.listeners = this.listeners.filter((l) => l !== check);
				reject(new Error(`timed out waiting for ${what}`));
			}, timeoutMs);
			const check = () => {
				if (!cond()) return;
				clearTimeout(timer);
				this.listeners = this.listeners.filter((l) => l !== check);
				resolve();
			};
			this.listeners.push(check);
		});
	}

	private changed(): void {
		for (const l of [...this.listeners]) l();
	}

	/** Append a durable event to a channel's log; returns the entry (not sent to anyone). */
	append(channelId: string, t: string, d: EventData = {}): LogEntry {
		const list = this.log.get(channelId) ?? [];
		const seq = (list.at(-1)?.seq ?? 0) + 1;
		const entry: LogEntry = { channel_id: channelId, seq, t, d: { channel_id: channelId, seq, ...d }, created_at: new Date().toISOString() };
		list.push(entry);
		this.log.set(channelId, list);
		return entry;
	}

	/** A message.created log entry. */
	appendMessage(channelId: string, text: string, userId = 'U2', threadRootId?: string): LogEntry {
		const list = this.log.get(channelId) ?? [];
		const seq = (list.at(-1)?.seq ?? 0) + 1;
		return this.append(channelId, 'message.created', {
			message: {
				id: `M${channelId}-${seq}`,
				workspace_id: 'W1',
				channel_id: channelId,
				seq,
				user_id: userId,
				text,
				created_at: new Date().toISOString(),
				reply_count: 0,
				pinned: false,
				reactions: [],
				...(threadRootId ? { thread_root_id: threadRootId } : {}),
			},
		});
	}

	/** Send an event frame to a session (queued into its replay buffer even while detached). */
	sendEvent(sess: FakeSession, t: string, d: EventData, users?: User[]): number {
		sess.s++;
		const frame = JSON.stringify({ op: 'event', s: sess.s, t, d, ...(users ? { users } : {}) });
		sess.sent.push(frame);
		if (sess.conn && sess.conn.ws.readyState === WebSocket.OPEN) sess.conn.ws.send(frame);
		return sess.s;
	}

	/**
	 * Send a channel.summary standing for the channel's log up to its newest
	 * entry (the caller appended those entries without sending them).
	 */
	sendSummary(sess: FakeSession, channelId: string, unread: number, mentions: number): number {
		const last = this.log.get(channelId)?.at(-1)?.seq ?? 0;
		return this.sendEvent(sess, 'channel.summary', { channel_id: channelId, last_seq: last, unread, mentions });
	}

	/** Send a log entry live to a session. */
	sendEntry(sess: FakeSession, e: LogEntry, users?: User[]): number {
		return this.sendEvent(sess, e.t, e.d, users);
	}

	/** The one live session (tests with a single client). */
	session(): FakeSession {
		const all = [...this.sessions.values()];
		if (all.length !== 1) throw new Error(`want one session, have ${all.length}`);
		return all[0];
	}

	/** Drop the session's socket as a network failure would (no close frame). */
	dropSocket(sess: FakeSession): void {
		const c = sess.conn;
		sess.conn = undefined;
		c?.ws.terminate();
	}

	/** Close the session's socket with a code. */
	closeSocket(sess: FakeSession, code: number, reason = ''): void {
		const c = sess.conn;
		sess.conn = undefined;
		c?.ws.close(code, reason);
	}

	sendRaw(sess: FakeSession, frame: unknown): void {
		sess.conn?.ws.send(JSON.stringify(frame));
	}

	releaseSync(): void {
		this.holdSync = false;
		const w = this.syncWaiters;
		this.syncWaiters = [];
		for (const f of w) f();
	}

	releaseMessages(): void {
		this.holdMessages = false;
		const w = this.messagesWaiters;
		this.messagesWaiters = [];
		for (const f of w) f();
	}

	framesOf(op: string): Record<string, unknown>[] {
		return this.conns.flatMap((c) => c.frames.filter((f) => f.op === op));
	}

	requestsTo(path: string): RecordedRequest[] {
		return this.requests.filter((r) => r.path === path);
	}

	// ---- gateway --------------------------------------------------------

	private onSocket(ws: WebSocket): void {
		const conn: FakeConn = { ws, frames: [] };
		this.conns.push(conn);
		if (this.mute > 0) {
			this.mute--;
			this.changed();
			return;
		}
		ws.send(JSON.stringify({ op: 'hello', heartbeat_ms: this.heartbeatMs, resume_window_s: 120 }));
		ws.on('message', (data) => {
			const f = JSON.parse(String(data)) as Record<string, unknown>;
			conn.frames.push(f);
			this.onFrame(conn, f);
			this.changed();
		});
		ws.on('close', () => {
			if (conn.session?.conn === conn) conn.session.conn = undefined;
			this.changed();
		});
		this.changed();
	}

	private onFrame(conn: FakeConn, f: Record<string, unknown>): void {
		switch (f.op) {
			case 'heartbeat':
				conn.ws.send('{"op":"heartbeat_ack"}');
				return;
			case 'identify': {
				if (this.identifyClose) {
					conn.ws.close(this.identifyClose, 'refused');
					return;
				}
				const sess: FakeSession = { id: `n1.s${this.nextSession++}`, userId: 'U1', s: 0, sent: [], conn };
				this.sessions.set(sess.id, sess);
				conn.session = sess;
				conn.ws.send(JSON.stringify({ op: 'ready', session_id: sess.id, user_id: sess.userId }));
				return;
			}
			case 'resume': {
				const sess = this.sessions.get(String(f.session_id));
				if (!sess || this.resumeMode === 'invalid') {
					if (sess) this.sessions.delete(sess.id);
					conn.ws.send(JSON.stringify({ op: 'invalid_session', reason: sess ? 'replay_unavailable' : 'unknown_session' }));
					return;
				}
				const seq = Number(f.seq);
				if (seq > sess.s) {
					conn.ws.close(4007, 'invalid resume seq');
					return;
				}
				if (sess.conn && sess.conn !== conn) sess.conn.ws.close(4009, 'taken over');
				sess.conn = conn;
				conn.session = sess;
				const replay = sess.sent.slice(seq);
				for (const fr of replay) conn.ws.send(fr);
				conn.ws.send(JSON.stringify({ op: 'resumed', replayed: replay.length }));
				return;
			}
		}
	}

	// ---- HTTP -----------------------------------------------------------

	private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
		const u = new URL(req.url ?? '/', this.url);
		let body: unknown = undefined;
		const chunks: Buffer[] = [];
		for await (const c of req) chunks.push(c as Buffer);
		if (chunks.length) body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
		const rec: RecordedRequest = { method: req.method ?? 'GET', path: u.pathname, query: u.searchParams, body };
		this.requests.push(rec);
		this.changed();
		const json = (status: number, v: unknown) => {
			res.writeHead(status, { 'Content-Type': 'application/json' });
			res.end(JSON.stringify(v));
		};
		if (this.offline) {
			res.socket?.destroy();
			return;
		}
		const fail = this.failNext.get(u.pathname);
		if (fail?.length) {
			const status = fail.shift()!;
			res.writeHead(status, { 'Content-Type': 'application/json', 'Retry-After': '0' });
			res.end(JSON.stringify({ error: { code: status === 429 ? 'rate_limited' : 'unavailable', message: 'try again' } }));
			return;
		}
		let m: RegExpMatchArray | null;
		if (req.method === 'POST' && u.pathname === '/api/v1/sync') {
			if (this.holdSync) await new Promise<void>((r) => this.syncWaiters.push(r));
			const want = (body as { channels: Record<string, number> }).channels;
			const out: Record<string, unknown> = {};
			for (const [id, last] of Object.entries(want)) {
				if (this.gone.has(id)) {
					out[id] = { error: 'not_found' };
					continue;
				}
				const list = this.log.get(id) ?? [];
				const missed = list.filter((e) => e.seq > last);
				out[id] = missed.length > this.syncMax ? { too_far: true, last_seq: list.at(-1)!.seq } : { events: missed };
			}
			json(200, { channels: out });
			return;
		}
		if (req.method === 'GET' && (m = u.pathname.match(/^\/api\/v1\/channels\/([^/]+)\/events$/))) {
			const id = decodeURIComponent(m[1]);
			const list = this.log.get(id) ?? [];
			if (this.gone.has(id)) return json(404, { error: { code: 'not_found', message: 'no such channel' } });
			const after = Number(u.searchParams.get('after_seq') ?? 0);
			const limit = Math.min(Number(u.searchParams.get('limit') ?? 50), this.eventsPage);
			const page = list.filter((e) => e.seq > after).slice(0, limit);
			return json(200, { events: page, ...(page.length === limit ? { next_cursor: String(page.at(-1)!.seq) } : {}) });
		}
		if (req.method === 'GET' && (m = u.pathname.match(/^\/api\/v1\/channels\/([^/]+)\/messages$/))) {
			// Top-level messages of the log, newest page first in seq order.
			const id = decodeURIComponent(m[1]);
			const limit = Number(u.searchParams.get('limit') ?? 50);
			const before = Number(u.searchParams.get('before_seq') ?? Infinity);
			const after = Number(u.searchParams.get('after_seq') ?? 0);
			const all = (this.log.get(id) ?? []).flatMap((e) => (e.t === 'message.created' && e.d.message && !e.d.message.thread_root_id ? [e.d.message] : []));
			const sel = all.filter((x) => x.seq > after && x.seq < before);
			const page = u.searchParams.has('after_seq') ? sel.slice(0, limit) : sel.slice(-limit);
			if (this.holdMessages) await new Promise<void>((r) => this.messagesWaiters.push(r));
			return json(200, { messages: page });
		}
		if (req.method === 'POST' && (m = u.pathname.match(/^\/api\/v1\/channels\/([^/]+)\/messages$/))) {
			// Posted as U1; a client_msg_id seen before answers the message it posted (the server's dedupe).
			const id = decodeURIComponent(m[1]);
			const p = body as { text: string; client_msg_id: string; thread_root_id?: string };
			const before = (this.log.get(id) ?? []).find((e) => e.d.message?.user_id === 'U1' && e.d.message.client_msg_id === p.client_msg_id);
			let entry = before;
			if (!entry) {
				entry = this.appendMessage(id, p.text, 'U1', p.thread_root_id);
				entry.d.message!.client_msg_id = p.client_msg_id;
			}
			if (this.loseAnswers > 0) {
				this.loseAnswers--;
				res.socket?.destroy();
				return;
			}
			return json(201, entry.d.message);
		}
		if (req.method === 'GET' && (m = u.pathname.match(/^\/api\/v1\/messages\/([^/]+)(\/replies)?$/))) {
			// A message of any channel's log, or a thread's replies.
			const id = decodeURIComponent(m[1]);
			const all = [...this.log.values()].flat().flatMap((e) => (e.t === 'message.created' && e.d.message ? [e.d.message] : []));
			if (m[2]) return json(200, { messages: all.filter((x) => x.thread_root_id === id) });
			const msg = all.find((x) => x.id === id);
			return msg ? json(200, msg) : json(404, { error: { code: 'not_found', message: 'no such message' } });
		}
		if (req.method === 'POST' && (m = u.pathname.match(/^\/api\/v1\/channels\/([^/]+)\/read$/))) {
			return json(200, { channel_id: decodeURIComponent(m[1]), last_read_seq: (body as { seq: number }).seq });
		}
		if (req.method === 'POST' && u.pathname === '/api/v1/boot' && this.bootAnswer) {
			return json(200, this.bootAnswer(body as Record<string, unknown>));
		}
		if (req.method === 'POST' && u.pathname === '/api/v1/users/batch') {
			const ids = (body as { ids: string[] }).ids;
			return json(200, { users: ids.flatMap((id) => (this.users.has(id) ? [this.users.get(id)!] : [])) });
		}
		json(404, { error: { code: 'not_found', message: 'no such endpoint' } });
	}
}

/** Polls cond (client-side state) until it holds, failing after a deadline. */
export async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
	const t0 = Date.now();
	while (!cond()) {
		if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
		await new Promise((r) => setTimeout(r, 10));
	}
}

export function fakeUser(id: string, handle: string): User {
	return {
		id,
		name: handle[0].toUpperCase() + handle.slice(1),
		handle,
		title: '',
		avatar_hash: '',
		created_at: '2026-01-01T00:00:00Z',
		updated_at: '2026-01-01T00:00:00Z',
	};
}
