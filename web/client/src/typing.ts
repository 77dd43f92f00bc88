// Typing: who is typing where (indicators that expire after a TTL without
// news, swept by one timer), and throttled typing ops for the user's own
// keystrokes.

import type { Core, TypingUser } from './state';
import type { Users } from './users';

/** The key of `typing` for a channel, or a thread in it. */
export function typingKey(channelId: string, threadRootId?: string): string {
	return threadRootId ? `${channelId}/${threadRootId}` : channelId;
}

export class Typing {
	/** When the user's own typing op last went out, per key. */
	private sent = new Map<string, number>();
	private sweepTimer: ReturnType<typeof setTimeout> | undefined;

	constructor(
		private readonly core: Core,
		private readonly users: Users,
	) {}

	/** Say the user is typing (throttled to one op per 3 s per channel or thread). */
	send(channelId: string, threadRootId?: string): void {
		const key = typingKey(channelId, threadRootId);
		const now = Date.now();
		if ((this.sent.get(key) ?? 0) + 3000 > now) return;
		this.sent.set(key, now);
		this.core.gw()?.typing(channelId, threadRootId);
	}

	/** Someone else started typing: show them until the TTL passes without news. */
	add(key: string, userId: string): void {
		const store = this.core.store;
		const ttl = this.core.opts.typingTtlMs ?? 6000;
		const now = Date.now();
		const list = (store.s.typing[key] ?? []).filter((t) => t.userId !== userId && t.until > now);
		list.push({ userId, until: now + ttl });
		store.set({ typing: { ...store.s.typing, [key]: list } });
		void this.users.ensure([userId]);
		this.scheduleSweep();
	}

	/** The user's message arrived: they stopped typing there. */
	clear(key: string, userId: string): void {
		const store = this.core.store;
		const list = store.s.typing[key];
		if (!list?.some((t) => t.userId === userId)) return;
		store.set({ typing: { ...store.s.typing, [key]: list.filter((t) => t.userId !== userId) } });
	}

	stop(): void {
		clearTimeout(this.sweepTimer);
	}

	private scheduleSweep(): void {
		if (this.sweepTimer) return;
		const store = this.core.store;
		let next = Infinity;
		for (const l of Object.values(store.s.typing)) for (const t of l) next = Math.min(next, t.until);
		if (next === Infinity) return;
		this.sweepTimer = setTimeout(
			() => {
				this.sweepTimer = undefined;
				const now = Date.now();
				const typing: Record<string, TypingUser[]> = {};
				for (const [k, l] of Object.entries(store.s.typing)) {
					const keep = l.filter((t) => t.until > now);
					if (keep.length) typing[k] = keep;
				}
				store.set({ typing });
				this.scheduleSweep();
			},
			Math.max(0, next - Date.now()) + 10,
		);
	}
}
