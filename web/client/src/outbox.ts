// Outbox: the user's messages on their way to the server, sent one at a
// time in the order they were written. A message that cannot be sent for
// now (no network, the server restarting: a failure in transit, a 5xx, 408
// or 429) stays queued and is sent again, with the same client_msg_id, when
// the gateway is back, when the page says the network is back, and on a
// backoff timer meanwhile; the server answers a client_msg_id it has seen
// with the message it already posted, so a message whose answer was lost
// is never posted twice. A permanent refusal (another 4xx) takes the
// message out of the queue: it stays failed, with the reason, until the
// user retries or discards it. The queue is kept in storage (localStorage
// in a browser) per user and workspace, so that a reload sends what was
// left unsent.

import { ApiError } from './api';
import type { LocalMessage } from './state';
import type { Message } from './types';

/** The part of the Web Storage API the outbox uses. */
export interface OutboxStorage {
	getItem(key: string): string | null;
	setItem(key: string, value: string): void;
	removeItem(key: string): void;
}

/** What the outbox needs from the session. */
export interface OutboxDeps {
	post(m: LocalMessage): Promise<Message>;
	/** The message is being sent (again): show it as pending. */
	sending(m: LocalMessage): void;
	/** The server has it. */
	sent(m: LocalMessage, posted: Message): void;
	/** It could not be sent for now; it will be sent again. */
	waiting(m: LocalMessage, why: string): void;
	/** The server refused it for good. */
	failed(m: LocalMessage, why: string, e: unknown): void;
	/**
	 * Whether the gateway is connected: while it is not, the backoff timer
	 * leaves the queue alone (the server is likely away too) and the
	 * gateway's return sends it (flush).
	 */
	connected?(): boolean;
	/** Where the queue is kept; undefined keeps it in memory only. */
	storage?: OutboxStorage;
	/** The storage key (per user and workspace), once known. */
	key(): string | undefined;
}

/** At most this many messages are kept in storage (the oldest go first past it). */
export const OUTBOX_MAX = 200;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

/** Whether a failed send must not be repeated as is: a 4xx other than 408 and 429, or not an API error at all. */
export function permanentFailure(e: unknown): boolean {
	if (!(e instanceof ApiError)) return true;
	return e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429;
}

/** How a failure reads beside the message. */
export function failureReason(e: unknown): string {
	if (e instanceof ApiError) return e.status === 0 ? 'No connection' : `${e.message} (${e.status})`;
	return String(e);
}

type Waiter = { resolve: (m: Message) => void; reject: (e: unknown) => void };

export class Outbox {
	/** Unsent messages in the order written; the first may be in flight. */
	private queue: LocalMessage[] = [];
	private readonly waiters = new Map<string, Waiter[]>();
	private draining = false;
	private timer: ReturnType<typeof setTimeout> | undefined;
	private backoff = 0;
	private stopped = false;

	constructor(private readonly deps: OutboxDeps) {}

	/** Queue a message; resolves with the server's copy once posted, rejects if it is refused for good or discarded. */
	add(m: LocalMessage): Promise<Message> {
		const p = this.wait(m.client_msg_id!);
		if (!this.queue.some((x) => x.client_msg_id === m.client_msg_id)) {
			this.queue.push(m);
			this.save();
		}
		this.deps.sending(m);
		this.flush();
		return p;
	}

	/** Whether the message is queued (waiting to be sent, or in flight). */
	has(clientMsgId: string): boolean {
		return this.queue.some((x) => x.client_msg_id === clientMsgId);
	}

	/** The queued messages of a channel (top-level) or of a thread. */
	unsent(channelId: string, threadRootId?: string): LocalMessage[] {
		return this.queue.filter((m) => m.channel_id === channelId && (m.thread_root_id ?? undefined) === threadRootId);
	}

	/** Take a message out of the queue (discarded): its promise rejects. */
	remove(clientMsgId: string): void {
		const before = this.queue.length;
		this.queue = this.queue.filter((m) => m.client_msg_id !== clientMsgId);
		if (this.queue.length !== before) this.save();
		this.settle(clientMsgId, undefined, new Error('parley: message discarded'));
	}

	/** Send what is queued now (the gateway or the network is back), from the first in order. */
	flush(): void {
		if (this.stopped) return;
		clearTimeout(this.timer);
		this.timer = undefined;
		if (!this.draining && this.queue.length) void this.drain();
	}

	/** The messages left in storage by an earlier page, queued behind any already here; they are not sent until flush. */
	restore(): LocalMessage[] {
		const stored = this.load();
		const fresh = stored.filter((m) => !this.has(m.client_msg_id!));
		if (fresh.length) {
			this.queue = [...fresh, ...this.queue];
			this.save();
		}
		return fresh;
	}

	stop(): void {
		this.stopped = true;
		clearTimeout(this.timer);
	}

	/** Start again after stop (a new start of the session). */
	resume(): void {
		this.stopped = false;
	}

	private async drain(): Promise<void> {
		this.draining = true;
		try {
			while (this.queue.length && !this.stopped) {
				const m = this.queue[0];
				this.deps.sending(m);
				try {
					const posted = await this.deps.post(m);
					this.shift(m);
					this.backoff = 0;
					this.deps.sent(m, posted);
					this.settle(m.client_msg_id!, posted);
				} catch (e) {
					if (!this.has(m.client_msg_id!)) continue; // discarded meanwhile
					const why = failureReason(e);
					if (permanentFailure(e)) {
						this.shift(m);
						this.deps.failed(m, why, e);
						this.settle(m.client_msg_id!, undefined, e);
						continue;
					}
					// Not now: this one and every later one wait, in order.
					for (const x of this.queue) this.deps.waiting(x, why);
					this.backoff = Math.min(BACKOFF_MAX_MS, this.backoff ? this.backoff * 2 : BACKOFF_MIN_MS);
					if (!this.stopped) this.timer = setTimeout(() => this.retry(), this.backoff * (0.75 + Math.random() * 0.5));
					return;
				}
			}
		} finally {
			this.draining = false;
		}
	}

	/** The backoff timer: try again, unless the gateway is away (its return flushes). */
	private retry(): void {
		this.timer = undefined;
		if (this.deps.connected?.() === false) return;
		this.flush();
	}

	private shift(m: LocalMessage): void {
		this.queue = this.queue.filter((x) => x.client_msg_id !== m.client_msg_id);
		this.save();
	}

	private wait(cmid: string): Promise<Message> {
		return new Promise<Message>((resolve, reject) => {
			const list = this.waiters.get(cmid) ?? [];
			list.push({ resolve, reject });
			this.waiters.set(cmid, list);
		});
	}

	private settle(cmid: string, m: Message | undefined, e?: unknown): void {
		const list = this.waiters.get(cmid);
		if (!list) return;
		this.waiters.delete(cmid);
		for (const w of list) {
			if (m) w.resolve(m);
			else w.reject(e);
		}
	}

	// ---- storage ----------------------------------------------------------

	private load(): LocalMessage[] {
		const key = this.deps.key();
		if (!key || !this.deps.storage) return [];
		try {
			const v: unknown = JSON.parse(this.deps.storage.getItem(key) ?? '[]');
			if (!Array.isArray(v)) return [];
			return v.filter(
				(m): m is LocalMessage =>
					!!m && typeof m === 'object' && typeof m.client_msg_id === 'string' && typeof m.channel_id === 'string' && typeof m.text === 'string',
			);
		} catch {
			return []; // unreadable: start afresh
		}
	}

	private save(): void {
		const key = this.deps.key();
		const storage = this.deps.storage;
		if (!key || !storage) return;
		try {
			if (!this.queue.length) {
				storage.removeItem(key);
				return;
			}
			const keep = this.queue.slice(-OUTBOX_MAX).map((m) => ({
				id: m.id,
				workspace_id: m.workspace_id,
				channel_id: m.channel_id,
				user_id: m.user_id,
				text: m.text,
				client_msg_id: m.client_msg_id,
				created_at: m.created_at,
				thread_root_id: m.thread_root_id,
				files: m.files, // uploaded already: a reload posts them with the text
			}));
			storage.setItem(key, JSON.stringify(keep));
		} catch {
			// Storage full or unavailable: the queue still works for this page.
		}
	}
}
