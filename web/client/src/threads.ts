// Threads: the thread open in the side panel (its root and replies), the
// followed-threads list, and the Threads badge (threadsSummary), kept by
// deltas from thread events and refreshed by a `since` boot when a delta
// cannot be known.

import { mentions, mergeMessages } from './messages';
import type { Message, Thread, ThreadsSummary } from './types';
import { requireWorkspace, type Core } from './state';
import type { Users } from './users';
import type { Windows } from './windows';

/** A thread's unread counts, and the time of the last reply they count (ms). */
type Unread = { replies: number; mentions: number; replyAt?: number };

export class Threads {
	/** The last known unread state of threads, to keep threadsSummary by deltas. */
	private unread = new Map<string, Unread>();
	private listRefresh: ReturnType<typeof setTimeout> | undefined;
	private summaryRefresh: ReturnType<typeof setTimeout> | undefined;

	constructor(
		private readonly core: Core,
		private readonly users: Users,
		private readonly windows: Windows,
		/** A `since` boot, which brings a fresh summary. */
		private readonly reboot: () => Promise<void>,
	) {}

	stop(): void {
		clearTimeout(this.listRefresh);
		clearTimeout(this.summaryRefresh);
	}

	/** A boot's summary replaces what the deltas kept. */
	resetSummary(summary: ThreadsSummary): void {
		this.unread.clear();
		this.core.store.set({ threadsSummary: { unread_threads: summary.unread_threads, unread_mentions: summary.unread_mentions } });
	}

	/** Open a thread in the side panel: its root and all its replies. */
	async open(rootId: string): Promise<void> {
		const store = this.core.store;
		const api = this.core.api;
		store.set({ activeThreadId: rootId });
		const cur = store.s.replies[rootId];
		if (cur?.loaded) return;
		this.windows.setList('replies', rootId, { loading: true, error: undefined });
		try {
			const [root, first] = await Promise.all([api.getMessage(rootId), api.listReplies(rootId, { limit: 200 })]);
			let msgs = first.messages;
			let page = first;
			while (page.next_cursor && msgs.length < 2000) {
				page = await api.listReplies(rootId, { after_seq: msgs.at(-1)!.seq, limit: 200 });
				msgs = msgs.concat(page.messages);
			}
			const now = store.s.replies[rootId];
			this.windows.setList('replies', rootId, {
				root,
				messages: mergeMessages(now?.messages ?? [], msgs),
				loading: false,
				loaded: true,
				hasOlder: false,
				hasNewer: false,
			});
			this.users.authorsOf([root, ...msgs]);
		} catch (e) {
			this.windows.setList('replies', rootId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	close(): void {
		this.core.store.set({ activeThreadId: undefined });
	}

	/** Load the followed threads (all, or only those with unread replies). */
	async load(unreadOnly = false): Promise<void> {
		const store = this.core.store;
		store.set({ threads: { ...store.s.threads, loading: true, unreadOnly, error: undefined } });
		try {
			const r = await this.core.api.listThreads(requireWorkspace(this.core), { unread: unreadOnly, limit: 50 });
			store.set({ threads: { items: r.threads, loading: false, loaded: true, unreadOnly } });
			for (const t of r.threads) this.unread.set(t.root_id, { replies: t.unread_replies, mentions: t.unread_mentions, replyAt: Date.parse(t.last_reply_at) });
			if (!unreadOnly && !r.next_cursor) {
				store.set({
					threadsSummary: {
						unread_threads: r.threads.filter((t) => t.unread_replies > 0).length,
						unread_mentions: r.threads.reduce((n, t) => n + t.unread_mentions, 0),
					},
				});
			}
			this.users.authorsOf(r.threads.flatMap((t) => (t.root ? [t.root] : [])));
		} catch (e) {
			store.set({ threads: { ...store.s.threads, loading: false, error: (e as Error).message } });
			throw e;
		}
	}

	async markRead(rootId: string): Promise<void> {
		// Nothing to do when the thread is known to be read: calling again and
		// again (say, from a UI effect) costs no requests.
		const known = this.unread.get(rootId);
		if (known && !known.replies && !known.mentions) return;
		try {
			const t = await this.core.api.markThreadRead(rootId);
			this.apply(t, 'read');
		} catch (e) {
			this.core.fail(e);
		}
	}

	async follow(rootId: string, follow: boolean): Promise<void> {
		if (follow) await this.core.api.followThread(rootId);
		else await this.core.api.unfollowThread(rootId);
		this.refreshListSoon();
	}

	/** Apply a thread's new state (from an event or an answer): list entry, root message, summary. */
	apply(t: Thread, why: 'updated' | 'read' | 'followed' | 'unfollowed', reply?: Message): void {
		const store = this.core.store;
		const prev = this.unread.get(t.root_id) ?? store.s.threads.items.find((x) => x.root_id === t.root_id);
		const cur: Unread = { replies: t.unread_replies ?? 0, mentions: t.unread_mentions ?? 0, replyAt: Date.parse(t.last_reply_at) };
		let before: Unread | undefined;
		if (prev) before = 'replies' in prev ? prev : { replies: prev.unread_replies, mentions: prev.unread_mentions, replyAt: Date.parse(prev.last_reply_at) };
		else if (why === 'updated' && reply) {
			// Unknown before: this reply is the only change.
			const self = store.s.self;
			const mine = self && reply.user_id === self.id;
			before = {
				replies: mine ? cur.replies : Math.max(0, cur.replies - 1),
				mentions: !mine && mentions(reply.text, self?.handle) ? Math.max(0, cur.mentions - 1) : cur.mentions,
			};
		}
		// A read made before a reply already counted is stale: the read
		// happened first, but its event (on the user's topic) arrived after
		// the reply's (on the channel's). Applying it would clear an unread
		// the server still holds, and markRead would then skip the server.
		if (why === 'read' && before && (before.replies > 0 || before.mentions > 0) && (before.replyAt ?? 0) > Date.parse(t.last_viewed_at ?? '')) return;
		this.unread.set(t.root_id, cur);
		if (before) {
			const sum = store.s.threadsSummary;
			store.set({
				threadsSummary: {
					unread_threads: Math.max(0, sum.unread_threads + (cur.replies > 0 ? 1 : 0) - (before.replies > 0 ? 1 : 0)),
					unread_mentions: Math.max(0, sum.unread_mentions + cur.mentions - before.mentions),
				},
			});
		} else {
			this.refreshSummarySoon();
		}
		// The list: replace the entry (keeping its root), add a newly followed one, drop an unfollowed one.
		const threads = store.s.threads;
		const items = threads.items;
		const i = items.findIndex((x) => x.root_id === t.root_id);
		let next = items;
		if (why === 'unfollowed' || t.following === false) {
			if (i >= 0) next = items.filter((x) => x.root_id !== t.root_id);
		} else if (i >= 0) {
			next = items.slice();
			next[i] = { ...items[i], ...t, root: t.root ?? items[i].root };
			if (why === 'updated') next.sort((a, b) => Date.parse(b.last_reply_at) - Date.parse(a.last_reply_at));
		} else if (threads.loaded && (why === 'updated' || why === 'followed') && (!threads.unreadOnly || cur.replies > 0)) {
			next = [t, ...items];
			this.refreshListSoon(); // to get its root message
		}
		if (next !== items) store.set({ threads: { ...store.s.threads, items: next } });
		// The root's reply count and last reply, from a thread that carries
		// them: an older server's thread.read for a channel marked read came
		// with a zero count and no last reply, which wiped the count off a
		// cached root whose replies came while its channel was off screen.
		if (typeof t.reply_count === 'number' && knownTime(t.last_reply_at)) {
			if (reply) this.windows.countReply(reply, { reply_count: t.reply_count, last_reply_at: t.last_reply_at });
			else this.windows.map(t.root_id, (r) => (r.reply_count === t.reply_count ? r : { ...r, reply_count: t.reply_count, last_reply_at: t.last_reply_at }));
		}
	}

	/** When the summary cannot be kept by deltas: a `since` boot brings it (and only what changed). */
	private refreshSummarySoon(): void {
		if (this.summaryRefresh || !this.core.workspaceId()) return;
		this.summaryRefresh = setTimeout(() => {
			this.summaryRefresh = undefined;
			void this.reboot();
		}, 300);
	}

	private refreshListSoon(): void {
		const threads = this.core.store.s.threads;
		if (!threads.loaded || this.listRefresh) return;
		this.listRefresh = setTimeout(() => {
			this.listRefresh = undefined;
			const now = this.core.store.s.threads;
			this.load(now.unreadOnly).catch(() => {});
		}, 200);
	}
}

/** Whether a thread's time is a real one (Go's zero time, or none, is not). */
function knownTime(at: string | undefined): boolean {
	return !!at && Date.parse(at) > 0;
}
