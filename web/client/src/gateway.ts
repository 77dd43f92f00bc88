// Gateway: the WebSocket side of the client library (docs/protocol.md).
//
// One Gateway keeps one logical session alive across sockets: hello →
// identify (or resume), heartbeats, jittered exponential reconnect, resume
// with the last session seq, and on invalid_session or 4007 a fresh identify
// followed by /sync catch-up of every tracked channel. Per tracked channel it
// hands durable events to the application in seq order exactly once: it drops
// duplicates and fills gaps from /channels/{id}/events before the next event.
// A channel.summary moves a channel's position to its last_seq without a gap
// fill: the server summarized those events instead of sending them.

import type { Api } from './api';
import { ApiError } from './api';
import { Emitter, type Unsubscribe } from './emitter';
import {
	CloseCode,
	FATAL_CLOSE_CODES,
	type ConnectionStatus,
	type EventData,
	type LogEntry,
	type ParleyEvent,
	type ServerFrame,
	type ClientFrame,
} from './types';

/** The part of the browser WebSocket API the gateway uses (the `ws` package fits too). */
export interface WebSocketLike {
	readonly readyState: number;
	send(data: string): void;
	close(code?: number, reason?: string): void;
	onopen: ((ev: unknown) => void) | null;
	onmessage: ((ev: { data: unknown }) => void) | null;
	onclose: ((ev: { code: number; reason: string }) => void) | null;
	onerror: ((ev: unknown) => void) | null;
}

export type WebSocketCtor = new (url: string) => WebSocketLike;

export interface GatewayOptions {
	api: Api;
	workspaceId: string;
	/** Gateway URL (boot's ws_url); default api.gatewayUrl(). A function is asked on every connect. */
	url?: string | (() => string);
	/** WebSocket implementation; default globalThis.WebSocket. */
	WebSocket?: WebSocketCtor;
	/** Channels the application already has, with the last seq it handled: caught up on connect. */
	channels?: Record<string, number>;
	/** Reconnect backoff bounds (defaults 250 ms and 30 s). */
	backoffMinMs?: number;
	backoffMaxMs?: number;
	/** Random source in [0,1) for jitter (tests pass their own). */
	random?: () => number;
	/** Diagnostic log; default silent. */
	log?: (msg: string, ...args: unknown[]) => void;
}

export interface GatewayStats {
	connects: number;
	reconnects: number;
	resumes: number;
	invalidSessions: number;
	heartbeatTimeouts: number;
	catchUps: number;
	gapsFilled: number;
	gapsUnfillable: number;
	duplicatesDropped: number;
	sGaps: number;
	/** channel.summary frames that moved a tracked channel's position. */
	summaries: number;
	/** channel.summary frames dropped: the channel was already past their last_seq. */
	summariesStale: number;
}

export interface GatewayEvents extends Record<string, unknown> {
	/** Every event, in order per channel, live or from catch-up. */
	event: ParleyEvent;
	/** The connection state changed. */
	status: ConnectionStatus;
	/** A session is live: `resumed` false after identify (then catch-up runs), true after resume. */
	session: { sessionId: string; userId: string; resumed: boolean };
	/** The old session could not be resumed: a new one was identified. Re-boot with `since`. */
	invalidSession: { reason: string };
	/** The user can no longer see a tracked channel (sync said not_found, or own member.left). */
	channelLost: { channelId: string };
	/** Catch-up after a fresh identify finished (or failed and will be retried). */
	caughtUp: { channels: number; events: number };
}

/** The private close code the client uses for sockets it means to resume. */
export const CLIENT_RECONNECT_CODE = CloseCode.clientReconnecting;

/**
 * Reconnect delay for the n-th consecutive failed attempt (n ≥ 1): "equal
 * jitter" over an exponential cap, so between cap/2 and cap where cap =
 * min(max, min·2^(n−1)).
 */
export function backoffDelay(attempt: number, minMs: number, maxMs: number, random: () => number): number {
	const cap = Math.min(maxMs, minMs * 2 ** Math.max(0, Math.min(attempt - 1, 30)));
	return cap / 2 + random() * (cap / 2);
}

/** Delay after a server `reconnect {retry_after_ms}`: that, plus up to 1 s or half of it of jitter. */
export function retryAfterDelay(retryAfterMs: number, random: () => number): number {
	const r = Math.max(0, retryAfterMs);
	return r + random() * Math.max(1000, r / 2);
}

/** Event types that are durable channel events (they have a channel seq). */
function isMemberOnly(t: string): boolean {
	return t.startsWith('message.') || t.startsWith('reaction.') || t.startsWith('pin.');
}

export class Gateway {
	private readonly api: Api;
	private readonly workspaceId: string;
	private readonly urlOpt?: string | (() => string);
	private readonly WS: WebSocketCtor;
	private readonly minMs: number;
	private readonly maxMs: number;
	private readonly random: () => number;
	private readonly log: (msg: string, ...args: unknown[]) => void;
	private readonly emitter = new Emitter<GatewayEvents>();

	private ws: WebSocketLike | undefined;
	private started = false;
	private everReady = false;
	private _status: ConnectionStatus = 'idle';
	private sessionId: string | undefined;
	private _userId: string | undefined;
	private lastS = 0;
	private attempt = 0;
	private needCatchUp = true;
	private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
	private heartbeatTimer: ReturnType<typeof setTimeout> | undefined;
	private watchdog: ReturnType<typeof setTimeout> | undefined;
	private heartbeatMs = 30000;
	private nextDelayMs: number | undefined;
	/** Serial processing: frames and catch-up run one at a time, in order. */
	private queue: Promise<void> = Promise.resolve();
	/** Bumped by stop(); queued work of an older generation is skipped. */
	private generation = 0;
	private readonly tracked = new Map<string, number>();
	private focusIds: string[] | undefined;
	private presenceIds: string[] | undefined;
	/**
	 * The session may not hold presenceIds: they changed while no socket was
	 * live, or the last presence_sub went out on a socket that died before a
	 * later heartbeat was answered (the server reads a socket's frames in
	 * order, so an ack proves the frames before it were read). A resumed
	 * session keeps its presence_sub set (the server carries it across
	 * resumes and nodes); only an unconfirmed one is sent again.
	 */
	private presenceUnconfirmed = false;
	/** A presence_sub went out on the current socket with no heartbeat after it yet. */
	private presenceInFlight = false;
	/** A heartbeat went out after the last presence_sub: its ack confirms the set. */
	private presenceBeatSent = false;

	readonly stats: GatewayStats = {
		connects: 0,
		reconnects: 0,
		resumes: 0,
		invalidSessions: 0,
		heartbeatTimeouts: 0,
		catchUps: 0,
		gapsFilled: 0,
		gapsUnfillable: 0,
		duplicatesDropped: 0,
		sGaps: 0,
		summaries: 0,
		summariesStale: 0,
	};

	constructor(opts: GatewayOptions) {
		this.api = opts.api;
		this.workspaceId = opts.workspaceId;
		this.urlOpt = opts.url;
		const ctor = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketCtor }).WebSocket;
		if (!ctor) throw new Error('parley: no WebSocket implementation (pass options.WebSocket)');
		this.WS = ctor;
		this.minMs = opts.backoffMinMs ?? 250;
		this.maxMs = opts.backoffMaxMs ?? 30000;
		this.random = opts.random ?? Math.random;
		this.log = opts.log ?? (() => {});
		for (const [id, seq] of Object.entries(opts.channels ?? {})) this.tracked.set(id, seq);
	}

	/** Subscribe to one kind of gateway event; returns the unsubscribe function. */
	on<K extends keyof GatewayEvents>(type: K, fn: (v: GatewayEvents[K]) => void): Unsubscribe {
		return this.emitter.on(type, fn);
	}

	get status(): ConnectionStatus {
		return this._status;
	}

	/** The user id the session belongs to (after the first ready). */
	get userId(): string | undefined {
		return this._userId;
	}

	/** Open the first socket. */
	start(): void {
		if (this.started) return;
		this.started = true;
		this.setStatus('connecting');
		this.connect();
	}

	/** Close for good (code 1000); the session is left to expire. */
	stop(): void {
		this.started = false;
		this.live = false;
		this.generation++;
		this.clearTimers();
		const ws = this.ws;
		this.ws = undefined;
		if (ws) this.detach(ws, CloseCode.normal);
		this.setStatus('idle');
	}

	/** Drop the socket now and reconnect (resuming): for tests and "network changed" hints. */
	reconnectNow(): void {
		if (!this.started) return;
		const ws = this.ws;
		if (ws) this.detach(ws, CLIENT_RECONNECT_CODE);
		this.ws = undefined;
		this.onSocketGone(CLIENT_RECONNECT_CODE, 0);
	}

	/**
	 * Start handling a channel's events after lastSeq (events at or below it
	 * are duplicates). A channel already tracked keeps its own position: a
	 * boot that ran meanwhile must not skip events the catch-up still has to
	 * deliver.
	 */
	trackChannel(channelId: string, lastSeq: number): void {
		if (!this.tracked.has(channelId)) this.tracked.set(channelId, lastSeq);
	}

	untrackChannel(channelId: string): void {
		this.tracked.delete(channelId);
	}

	/** The last seq handled for a tracked channel. */
	lastSeq(channelId: string): number | undefined {
		return this.tracked.get(channelId);
	}

	/** The channels on screen (sent now and again after every reconnect). */
	focus(channelIds: string[]): void {
		if (this.focusIds && this.focusIds.length === channelIds.length && this.focusIds.every((id, i) => id === channelIds[i])) return;
		this.focusIds = [...channelIds];
		this.sendIfLive({ op: 'focus', channel_ids: this.focusIds });
	}

	/**
	 * Replace the session's set of users in view (presence_sub): their
	 * presence, profile and status changes come to this session. Sent now
	 * when a socket is live; else on the next session: always after a fresh
	 * identify, after a resume only when the server may lack it.
	 */
	presenceSub(userIds: string[]): void {
		this.presenceIds = [...userIds];
		if (this.ws && this.live) this.writePresence(this.ws);
		else this.presenceUnconfirmed = true;
	}

	/** Whether a socket is live (identified or resumed) right now. */
	get isLive(): boolean {
		return !!this.ws && this.live;
	}

	private writePresence(ws: WebSocketLike): void {
		this.send(ws, { op: 'presence_sub', user_ids: this.presenceIds ?? [] });
		this.presenceInFlight = true;
		this.presenceBeatSent = false;
	}

	/** Tell the channel's other members the user is typing (callers throttle to one per 3 s). */
	typing(channelId: string, threadRootId?: string): void {
		this.sendIfLive(threadRootId ? { op: 'typing', channel_id: channelId, thread_root_id: threadRootId } : { op: 'typing', channel_id: channelId });
	}

	// ---- sockets --------------------------------------------------------

	private url(): string {
		const u = typeof this.urlOpt === 'function' ? this.urlOpt() : this.urlOpt;
		return u || this.api.gatewayUrl();
	}

	private connect(): void {
		if (!this.started) return;
		this.stats.connects++;
		let ws: WebSocketLike;
		try {
			ws = new this.WS(this.url());
		} catch (e) {
			this.log('gateway: connect failed', e);
			this.onSocketGone(4000, undefined);
			return;
		}
		this.ws = ws;
		ws.onmessage = (ev) => {
			if (this.ws !== ws) return;
			this.onFrame(ws, ev.data);
		};
		ws.onclose = (ev) => {
			if (this.ws !== ws) return;
			this.ws = undefined;
			this.onSocketGone(ev.code, undefined);
		};
		ws.onerror = () => {
			// onclose follows; nothing to do here.
		};
		// A socket that opens (or hangs opening) but never says hello must
		// not stall the gateway: the watchdog runs from the start.
		this.armWatchdog(ws);
	}

	/** Close a socket we are done with, without its handlers firing into our state. */
	private detach(ws: WebSocketLike, code: number): void {
		ws.onmessage = null;
		ws.onclose = null;
		// A no-op rather than null: closing a socket that is still opening
		// reports an error, which a Node EventEmitter without a listener throws.
		ws.onerror = () => {};
		ws.onopen = null;
		try {
			ws.close(code);
		} catch {
			// already closed
		}
	}

	private onSocketGone(code: number, delayMs: number | undefined): void {
		this.live = false;
		this.clearTimers();
		if (!this.started) return;
		if (code === CloseCode.authFailed || code === CloseCode.accountDeactivated) {
			this.log(`gateway: authentication refused or revoked (${code})`);
			this.started = false;
			this.sessionId = undefined;
			this.setStatus('logged_out');
			return;
		}
		if (code === CloseCode.workspaceGone) {
			this.log('gateway: removed from the workspace, or it was deleted (4011)');
			this.started = false;
			this.sessionId = undefined;
			this.setStatus('workspace_gone');
			return;
		}
		if (FATAL_CLOSE_CODES.has(code)) {
			this.log(`gateway: protocol error, close ${code}`);
			this.started = false;
			this.setStatus('failed');
			return;
		}
		if (code === CloseCode.invalidSeq) {
			// The session cannot be resumed: identify afresh and catch up.
			this.dropSession('invalid_resume_seq');
		}
		this.attempt++;
		this.stats.reconnects++;
		let delay = delayMs ?? this.nextDelayMs ?? backoffDelay(this.attempt, this.minMs, this.maxMs, this.random);
		this.nextDelayMs = undefined;
		if (delayMs === 0) delay = 0;
		this.setStatus(this.everReady ? 'reconnecting' : 'connecting');
		this.reconnectTimer = setTimeout(() => {
			this.reconnectTimer = undefined;
			this.connect();
		}, delay);
	}

	private dropSession(reason: string): void {
		if (this.sessionId) {
			this.stats.invalidSessions++;
			this.emitter.emit('invalidSession', { reason });
		}
		this.sessionId = undefined;
		this.lastS = 0;
		this.needCatchUp = true;
	}

	private clearTimers(): void {
		clearTimeout(this.reconnectTimer);
		clearTimeout(this.heartbeatTimer);
		clearTimeout(this.watchdog);
		this.reconnectTimer = this.heartbeatTimer = this.watchdog = undefined;
	}

	private send(ws: WebSocketLike, f: ClientFrame): void {
		try {
			ws.send(JSON.stringify(f));
		} catch (e) {
			this.log('gateway: send failed', e);
		}
	}

	private live = false;

	private sendIfLive(f: ClientFrame): void {
		if (this.ws && this.live) this.send(this.ws, f);
	}

	private setStatus(s: ConnectionStatus): void {
		if (s === this._status) return;
		this._status = s;
		this.emitter.emit('status', s);
	}

	/** Any frame proves the socket alive; two silent heartbeat intervals kill it. */
	private armWatchdog(ws: WebSocketLike): void {
		clearTimeout(this.watchdog);
		this.watchdog = setTimeout(() => {
			if (this.ws !== ws) return;
			this.stats.heartbeatTimeouts++;
			this.log('gateway: socket silent for two heartbeat intervals');
			this.ws = undefined;
			this.live = false;
			this.detach(ws, CLIENT_RECONNECT_CODE);
			this.onSocketGone(CLIENT_RECONNECT_CODE, undefined);
		}, this.heartbeatMs * 2);
	}

	private scheduleHeartbeat(ws: WebSocketLike, first: boolean): void {
		clearTimeout(this.heartbeatTimer);
		// The first beat falls at a random point of the second half of the
		// interval so that sockets opened together do not beat together.
		const d = first ? this.heartbeatMs * (0.5 + 0.5 * this.random()) : this.heartbeatMs;
		this.heartbeatTimer = setTimeout(() => {
			if (this.ws !== ws) return;
			this.send(ws, { op: 'heartbeat' });
			if (this.presenceInFlight) this.presenceBeatSent = true;
			this.scheduleHeartbeat(ws, false);
		}, d);
	}

	private onFrame(ws: WebSocketLike, data: unknown): void {
		if (typeof data !== 'string') {
			data = typeof Buffer !== 'undefined' && data instanceof Uint8Array ? Buffer.from(data).toString('utf8') : String(data);
		}
		let f: ServerFrame;
		try {
			f = JSON.parse(data as string);
		} catch {
			this.log('gateway: undecodable frame');
			return;
		}
		this.armWatchdog(ws);
		switch (f.op) {
			case 'hello': {
				this.heartbeatMs = f.heartbeat_ms > 0 ? f.heartbeat_ms : 30000;
				this.armWatchdog(ws);
				this.scheduleHeartbeat(ws, true);
				const token = this.api.getToken() ?? '';
				if (this.sessionId) {
					this.send(ws, { op: 'resume', token, session_id: this.sessionId, seq: this.lastS });
				} else {
					this.send(ws, { op: 'identify', token, workspace_id: this.workspaceId });
				}
				return;
			}
			case 'ready': {
				this.sessionId = f.session_id;
				this._userId = f.user_id;
				this.lastS = 0;
				this.needCatchUp = true;
				this.onLive(ws, false);
				return;
			}
			case 'resumed': {
				this.stats.resumes++;
				this.onLive(ws, true);
				return;
			}
			case 'invalid_session': {
				this.log(`gateway: invalid_session (${f.reason}); identifying afresh`);
				this.dropSession(f.reason);
				this.send(ws, { op: 'identify', token: this.api.getToken() ?? '', workspace_id: this.workspaceId });
				return;
			}
			case 'event': {
				if (typeof f.s === 'number') {
					if (this.lastS !== 0 && f.s !== this.lastS + 1) this.stats.sGaps++;
					this.lastS = f.s;
				}
				const ev: ParleyEvent = { t: f.t, d: f.d ?? {}, s: f.s, source: 'live' };
				if (f.users?.length) ev.users = f.users;
				const gen = this.generation;
				this.enqueue(gen, () => this.handle(ev, gen));
				return;
			}
			case 'heartbeat_ack':
				if (this.presenceBeatSent) this.presenceInFlight = this.presenceBeatSent = false;
				return;
			case 'reconnect': {
				this.log(`gateway: server asks to reconnect (${f.reason})`);
				this.nextDelayMs = retryAfterDelay(f.retry_after_ms ?? 0, this.random);
				return; // the server closes the socket next
			}
			case 'presence_sub_limited':
				// The view is kept to what is on screen, so this is a bug
				// worth seeing: only the first f.limit users are followed.
				this.log(`gateway: users in view cut to ${f.limit} of ${f.requested}`);
				return;
			default:
				return; // unknown ops are ignored
		}
	}

	private onLive(ws: WebSocketLike, resumed: boolean): void {
		this.live = true;
		if (this.focusIds) this.send(ws, { op: 'focus', channel_ids: this.focusIds });
		// A new session watches nobody; a resumed one keeps its set unless a
		// change of it may not have reached the server.
		const presenceOwed = !resumed || this.presenceUnconfirmed || this.presenceInFlight;
		this.presenceUnconfirmed = false;
		this.presenceInFlight = this.presenceBeatSent = false;
		// (An empty set is news only to a resumed session that had another.)
		if (presenceOwed && this.presenceIds && (this.presenceIds.length || resumed)) this.writePresence(ws);
		this.emitter.emit('session', { sessionId: this.sessionId!, userId: this._userId!, resumed });
		const gen = this.generation;
		if (this.needCatchUp) this.enqueue(gen, () => this.catchUp(gen));
		this.enqueue(gen, () => {
			if (this.ws === ws && !this.needCatchUp) {
				// Only a session that caught up resets the backoff: a socket
				// that opens but whose catch-up fails must back off further.
				this.attempt = 0;
				this.everReady = true;
				this.setStatus('ready');
			}
		});
	}

	private enqueue(gen: number, task: () => void | Promise<void>): void {
		this.queue = this.queue.then(async () => {
			if (gen !== this.generation) return;
			try {
				await task();
			} catch (e) {
				this.log('gateway: event handling failed', e);
			}
		});
	}

	/** Resolves once everything queued so far has been handled (for tests and callers that need order). */
	idle(): Promise<void> {
		return this.queue;
	}

	// ---- ordering -------------------------------------------------------

	private deliver(ev: ParleyEvent, gen: number): void {
		if (gen !== this.generation) return;
		this.emitter.emit('event', ev);
	}

	/** Handle one event: per-channel dedupe and gap fill for tracked channels. */
	private async handle(ev: ParleyEvent, gen: number): Promise<void> {
		const d: EventData = ev.d;
		const ch = d.channel_id;
		const seq = d.seq;
		if (ev.t === 'channel.summary') {
			this.summary(ev, gen);
			return;
		}
		if (!ch || typeof seq !== 'number') {
			this.deliver(ev, gen);
			return;
		}
		let last = this.tracked.get(ch);
		if (last === undefined) {
			if (!this.startsStream(ev)) {
				// A directory copy of a channel we are not in: no seq checks.
				this.deliver(ev, gen);
				return;
			}
			this.tracked.set(ch, seq - 1);
			last = seq - 1;
		}
		if (seq <= last) {
			this.stats.duplicatesDropped++;
			return;
		}
		if (seq > last + 1) {
			// A catch-up is owed (a failed one, or a failed gap fill): it
			// delivers this event too, in order; do not skip past the gap.
			if (this.needCatchUp) return;
			if (!(await this.fillGap(ch, last, seq, gen))) {
				if (gen === this.generation) this.retryCatchUp();
				return;
			}
			if (gen !== this.generation) return;
			last = this.tracked.get(ch);
			if (last === undefined) return; // lost the channel while filling
			if (seq <= last) {
				this.stats.duplicatesDropped++;
				return;
			}
		}
		this.tracked.set(ch, seq);
		this.deliver(ev, gen);
		if (ev.t === 'member.left' && d.user_id === this._userId) {
			this.tracked.delete(ch);
			this.emitter.emit('channelLost', { channelId: ch });
		}
	}

	/**
	 * A channel.summary stands for the channel's events up to d.last_seq that
	 * the session was not sent: the channel's position moves there (no gap
	 * fill; the next event is last_seq+1). A summary the channel is already
	 * past (catch-up delivered those events) is dropped. An untracked
	 * channel's summary passes through: its stream starts with its next event.
	 */
	private summary(ev: ParleyEvent, gen: number): void {
		const ch = ev.d.channel_id;
		const upTo = ev.d.last_seq;
		if (!ch || typeof upTo !== 'number') return;
		const last = this.tracked.get(ch);
		if (last !== undefined) {
			if (upTo <= last) {
				this.stats.summariesStale++;
				return;
			}
			this.tracked.set(ch, upTo);
			this.stats.summaries++;
		}
		this.deliver(ev, gen);
	}

	/** Whether an event of an untracked channel starts that channel's stream for this user. */
	private startsStream(ev: ParleyEvent): boolean {
		const d = ev.d;
		if (isMemberOnly(ev.t)) return true;
		if (ev.t === 'member.joined') return !!this._userId && d.user_id === this._userId;
		if (ev.t === 'channel.created') {
			return (d.channel?.kind !== undefined && d.channel.kind !== 'public') || (!!this._userId && d.user_id === this._userId);
		}
		return false;
	}

	/**
	 * Deliver the log entries after `last` and before `until` from /events.
	 * False when /events failed (not a 404): the channel stays at what was
	 * delivered, and a catch-up must finish the job.
	 */
	private async fillGap(ch: string, last: number, until: number, gen: number): Promise<boolean> {
		let after = last;
		try {
			while (after < until - 1) {
				const page = await this.api.listEvents(ch, after, 200);
				if (gen !== this.generation) return true;
				let progressed = false;
				for (const e of page.events) {
					if (e.seq <= after) continue;
					if (e.seq >= until) break;
					this.applyLogEntry(e, gen);
					after = e.seq;
					progressed = true;
				}
				if (!page.next_cursor || !progressed) break;
			}
		} catch (e) {
			if (e instanceof ApiError && e.status === 404) {
				this.tracked.delete(ch);
				this.emitter.emit('channelLost', { channelId: ch });
				return true;
			}
			this.log('gateway: gap fill failed', e);
			return false;
		}
		if (after >= until - 1) this.stats.gapsFilled++;
		else this.stats.gapsUnfillable++;
		return true;
	}

	/** Owe a catch-up and get it by reconnecting (resume, then /sync from each channel's position). */
	private retryCatchUp(): void {
		this.needCatchUp = true;
		const ws = this.ws;
		if (ws) {
			this.ws = undefined;
			this.live = false;
			this.detach(ws, CLIENT_RECONNECT_CODE);
			this.onSocketGone(CLIENT_RECONNECT_CODE, undefined);
		}
	}

	/** Deliver one log entry (from /events or /sync) through the seq check, without gap filling. */
	private applyLogEntry(e: LogEntry, gen: number): void {
		const last = this.tracked.get(e.channel_id);
		if (last !== undefined && e.seq <= last) {
			this.stats.duplicatesDropped++;
			return;
		}
		const d: EventData = { ...(e.d ?? {}) };
		if (d.channel_id === undefined) d.channel_id = e.channel_id;
		if (d.seq === undefined) d.seq = e.seq;
		this.tracked.set(e.channel_id, e.seq);
		this.deliver({ t: e.t, d, source: 'catchup' }, gen);
		if (e.t === 'member.left' && d.user_id === this._userId) {
			this.tracked.delete(e.channel_id);
			this.emitter.emit('channelLost', { channelId: e.channel_id });
		}
	}

	/** After a fresh identify: /sync every tracked channel, paging /events for those too far behind. */
	private async catchUp(gen: number): Promise<void> {
		this.stats.catchUps++;
		const ids = [...this.tracked.keys()];
		let events = 0;
		try {
			for (let i = 0; i < ids.length; i += 500) {
				const chunk: Record<string, number> = {};
				for (const id of ids.slice(i, i + 500)) {
					const s = this.tracked.get(id);
					if (s !== undefined) chunk[id] = s;
				}
				const res = await this.api.sync(chunk);
				if (gen !== this.generation) return;
				for (const [id, entry] of Object.entries(res.channels ?? {})) {
					if ('events' in entry) {
						for (const e of entry.events) {
							this.applyLogEntry({ ...e, channel_id: e.channel_id ?? id }, gen);
							events++;
						}
					} else if ('too_far' in entry) {
						const last = this.tracked.get(id);
						if (last !== undefined) {
							const before = this.stats.gapsFilled;
							if (!(await this.fillGap(id, last, entry.last_seq + 1, gen))) throw new Error(`gap fill of ${id} failed`);
							if (gen !== this.generation) return;
							if (this.stats.gapsFilled > before) events += entry.last_seq - last;
						}
					} else {
						this.tracked.delete(id);
						this.emitter.emit('channelLost', { channelId: id });
					}
				}
			}
		} catch (e) {
			// Leave needCatchUp set: the next ready or resumed runs it again.
			this.log('gateway: catch-up failed; retrying on reconnect', e);
			this.retryCatchUp();
			return;
		}
		this.needCatchUp = false;
		this.emitter.emit('caughtUp', { channels: ids.length, events });
	}
}
