// Users: the session's user cache. Ids resolve lazily, from boot's
// references, the just-in-time `users` of gateway events, and batched,
// deduplicated POST /users/batch calls; the workspace's user list is never
// downloaded.

import type { Message, User } from './types';
import type { Core } from './state';

export class Users {
	/** Ids wanted by the next batch call. */
	private want = new Set<string>();
	/** Per id, the batch call that is resolving it. */
	private inflight = new Map<string, Promise<void>>();
	/** Ids the server did not know: never asked for again. */
	private missing = new Set<string>();
	private nextFlush: Promise<void> | undefined;
	/** Per cached id, when its copy came (the clock's ms): the view set asks whether it may be stale. */
	private received = new Map<string, number>();

	constructor(
		private readonly core: Core,
		private readonly now: () => number = Date.now,
	) {}

	/**
	 * Put users into the cache (a user's own copy keeps its email when a
	 * public copy comes). A copy older than the cached one (by updated_at,
	 * e.g. a page that was in flight while a user.updated came) is dropped.
	 */
	add(users: User[]): void {
		if (!users.length) return;
		const store = this.core.store;
		const next = { ...store.s.users };
		const now = this.now();
		for (const u of users) {
			if (!u) continue;
			const old = next[u.id];
			this.missing.delete(u.id);
			if (old && Date.parse(u.updated_at) < Date.parse(old.updated_at)) continue;
			// The user's own object carries email; public copies do not.
			next[u.id] = old?.email && !u.email ? { ...u, email: old.email } : u;
			this.received.set(u.id, now);
		}
		store.set({ users: next });
	}

	/** When the cached copy of a user came, or undefined when none is cached. */
	receivedAt(id: string): number | undefined {
		return this.core.store.s.users[id] ? this.received.get(id) : undefined;
	}

	/**
	 * Fetch users again although they are cached (their copies may be stale):
	 * one batched POST /users/batch with the ensure calls of the same tick.
	 */
	refresh(ids: string[]): Promise<void> {
		let any = false;
		for (const id of ids) {
			if (!id || this.missing.has(id)) continue;
			this.want.add(id);
			any = true;
		}
		return any ? this.scheduleFlush() : Promise.resolve();
	}

	/** A cached user, or undefined (and a lookup is scheduled). */
	user(id: string): User | undefined {
		const u = this.core.store.s.users[id];
		if (!u) void this.ensure([id]);
		return u;
	}

	/**
	 * Resolve users by id: ids not cached yet are fetched with POST
	 * /users/batch, batched across callers of the same tick and deduplicated
	 * against lookups in flight. Resolves when those lookups finished.
	 */
	ensure(ids: string[]): Promise<void> {
		const waits = new Set<Promise<void>>();
		for (const id of ids) {
			if (!id || this.core.store.s.users[id] || this.missing.has(id)) continue;
			const inflight = this.inflight.get(id);
			if (inflight) {
				waits.add(inflight);
				continue;
			}
			this.want.add(id);
			waits.add(this.scheduleFlush());
		}
		return waits.size ? Promise.all(waits).then(() => undefined) : Promise.resolve();
	}

	/** Resolve the authors of messages. */
	authorsOf(ms: Message[]): void {
		const ids = new Set<string>();
		for (const m of ms) ids.add(m.user_id);
		if (ids.size) void this.ensure([...ids]);
	}

	/** The promise of the next batch lookup, scheduling it if needed. */
	private scheduleFlush(): Promise<void> {
		if (!this.nextFlush) {
			this.nextFlush = new Promise<void>((resolve) => {
				setTimeout(() => {
					this.nextFlush = undefined;
					this.flush().then(resolve, resolve);
				}, 0);
			});
		}
		return this.nextFlush;
	}

	private async flush(): Promise<void> {
		const ids = [...this.want];
		this.want.clear();
		const max = this.core.store.s.limits?.max_batch_users || 200;
		const calls: Promise<void>[] = [];
		for (let i = 0; i < ids.length; i += max) {
			const chunk = ids.slice(i, i + max);
			const call = this.core.api.usersBatch(chunk).then(
				(r) => {
					this.add(r.users);
					const got = new Set(r.users.map((u) => u.id));
					for (const id of chunk) if (!got.has(id)) this.missing.add(id);
				},
				(e) => this.core.fail(e),
			);
			const done = call.finally(() => {
				for (const id of chunk) if (this.inflight.get(id) === done) this.inflight.delete(id);
			});
			for (const id of chunk) this.inflight.set(id, done);
			calls.push(done);
		}
		await Promise.all(calls);
	}
}
