// Windows: the loaded messages of each channel (top-level messages, with
// older and newer pages on demand and a window around a jumped-to message)
// and of each open thread (replies), kept current by events and by the
// answers to the user's own sends, edits and reactions.

import { newClientMsgId } from './api';
import { bySeq, indexOfMessage, keepMe, mergeMessages, replaceOwn } from './messages';
import { Outbox, type OutboxStorage } from './outbox';
import type { FileInfo, Message } from './types';
import type { Core, LocalMessage, MessageList, SessionState } from './state';
import type { Users } from './users';

const EMPTY_LIST: MessageList = { messages: [], hasOlder: false, hasNewer: false, loading: false, loaded: false };

type Kind = 'messages' | 'replies';

export class Windows {
	/**
	 * Per channel, while loadLatest is out: the top-level messages created or
	 * updated and the ids deleted meanwhile. The page may predate them, and
	 * the list ignores them until it is loaded; they are applied to the page.
	 */
	private duringLoad = new Map<string, { msgs: Message[]; deleted: Set<string> }>();
	/** Replies already counted in their root's reply_count. */
	private countedReplies = new Set<string>();
	/** Replies whose deletion already lowered their root's reply_count. */
	private deletedReplies = new Set<string>();
	/**
	 * Per channel, the highest last_seq of a channel.summary: the messages up
	 * to it were never delivered, so a page read before that summary arrived
	 * may end short of it.
	 */
	private summarizedTo = new Map<string, number>();

	/** The user's messages not yet confirmed, sent in order (outbox.ts). */
	readonly outbox: Outbox;

	constructor(
		private readonly core: Core,
		private readonly users: Users,
	) {
		this.outbox = new Outbox({
			post: (m) =>
				this.core.api.postMessage(m.channel_id, {
					text: m.text,
					client_msg_id: m.client_msg_id!,
					thread_root_id: m.thread_root_id,
					file_ids: m.files?.length ? m.files.map((f) => f.id) : undefined,
				}),
			sending: (m) => this.putLocal(m, { ...this.shownCopy(m), pending: true, failed: false, queued: false, error: undefined }),
			sent: (_m, posted) => this.upsert(posted),
			waiting: (m, why) => this.putLocal(m, { ...this.shownCopy(m), pending: false, failed: true, queued: true, error: why }),
			failed: (m, why, e) => {
				this.putLocal(m, { ...this.shownCopy(m), pending: false, failed: true, queued: false, error: why });
				this.core.fail(e);
			},
			connected: () => this.core.gw()?.isLive ?? true,
			storage: core.opts.storage === undefined ? defaultStorage() : (core.opts.storage ?? undefined),
			key: () => {
				const self = this.core.store.s.self?.id;
				const ws = this.core.workspaceId();
				return self && ws ? `parley.outbox.${self}.${ws}` : undefined;
			},
		});
	}

	private get pageSize(): number {
		return this.core.opts.pageSize ?? 50;
	}

	setList(kind: Kind, id: string, patch: Partial<MessageList>): void {
		const store = this.core.store;
		const cur = store.s[kind][id] ?? EMPTY_LIST;
		store.set({ [kind]: { ...store.s[kind], [id]: { ...cur, ...patch } } } as Partial<SessionState>);
	}

	/** A loaded thread takes a reply (created, or delivered with thread.updated). */
	mergeReply(m: Message): void {
		const cur = this.core.store.s.replies[m.thread_root_id!];
		if (cur?.loaded) this.setList('replies', m.thread_root_id!, { messages: mergeMessages(cur.messages, [m]) });
	}

	/**
	 * A channel.summary: the channel's events up to lastSeq were not
	 * delivered, so a loaded list of the channel misses its newest messages.
	 * It becomes a window into history (hasNewer): it stays continuous, new
	 * messages stay out of it until the newest page is loaded (on open, by
	 * loadLatest), and older and newer pages still load on demand. Reports
	 * whether the channel has a list to refresh.
	 */
	summarized(channelId: string, lastSeq: number): boolean {
		this.summarizedTo.set(channelId, Math.max(lastSeq, this.summarizedTo.get(channelId) ?? 0));
		const cur = this.core.store.s.messages[channelId];
		if (!cur?.loaded) return false;
		if (!cur.hasNewer) this.setList('messages', channelId, { hasNewer: true });
		return true;
	}

	/** Whether loadLatest is out for the channel (its page is not in yet). */
	loadingLatest(channelId: string): boolean {
		return this.duringLoad.has(channelId);
	}

	// ---- loading --------------------------------------------------------

	/** Load the latest page of a channel (replacing a window that jumped into history). */
	async loadLatest(channelId: string): Promise<void> {
		const size = this.pageSize;
		this.setList('messages', channelId, { loading: true, error: undefined });
		let live = this.duringLoad.get(channelId);
		if (!live) this.duringLoad.set(channelId, (live = { msgs: [], deleted: new Set() }));
		try {
			const page = await this.latestPage(channelId, size);
			if (this.duringLoad.get(channelId) === live) this.duringLoad.delete(channelId);
			const cur = this.core.store.s.messages[channelId];
			const pending = (cur?.messages ?? []).filter((m) => m.pending || m.failed);
			for (const m of this.outbox.unsent(channelId)) if (!pending.some((x) => x.client_msg_id === m.client_msg_id)) pending.push(this.shownCopy(m));
			const pageLast = page.messages.at(-1)?.seq ?? 0;
			const keepLive = cur?.loaded && !cur.hasNewer ? cur.messages.filter((m) => !m.pending && !m.failed && m.seq > pageLast) : [];
			const inPage = new Set(page.messages.map((m) => m.id));
			const arrived = live.msgs.filter((m) => m.seq > pageLast || inPage.has(m.id));
			const msgs = mergeMessages(
				page.messages.filter((m) => !m.thread_root_id),
				[...keepLive, ...arrived, ...pending],
			).filter((m) => !live.deleted.has(m.id));
			this.setList('messages', channelId, { messages: msgs, hasOlder: page.messages.length >= size, hasNewer: false, loading: false, loaded: true });
			this.users.authorsOf(page.messages);
		} catch (e) {
			if (this.duringLoad.get(channelId) === live) this.duringLoad.delete(channelId);
			this.setList('messages', channelId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	/**
	 * The newest page of a channel. When a channel.summary arrived while the
	 * page was on its way and the page ends before the summary's last seq,
	 * the page may predate the summarized messages (which are never
	 * delivered, so nothing would fill in between): it is read again, now
	 * after the summary.
	 */
	private async latestPage(channelId: string, size: number) {
		for (;;) {
			const before = this.summarizedTo.get(channelId) ?? 0;
			const page = await this.core.api.listMessages(channelId, { limit: size });
			const after = this.summarizedTo.get(channelId) ?? 0;
			if (after === before || (page.messages.at(-1)?.seq ?? 0) >= after) return page;
		}
	}

	/** Load the page before the first loaded message; resolves false when there is no more. */
	async loadOlder(channelId: string): Promise<boolean> {
		const store = this.core.store;
		const cur = store.s.messages[channelId];
		if (!cur?.loaded) {
			await this.loadLatest(channelId);
			return store.s.messages[channelId]?.hasOlder ?? false;
		}
		if (cur.loading || !cur.hasOlder) return cur.hasOlder;
		const first = cur.messages.find((m) => !m.pending && !m.failed);
		if (!first) return false;
		const size = this.pageSize;
		this.setList('messages', channelId, { loading: true });
		try {
			const page = await this.core.api.listMessages(channelId, { before_seq: first.seq, limit: size });
			const now = store.s.messages[channelId] ?? EMPTY_LIST;
			const hasOlder = page.messages.length >= size;
			this.setList('messages', channelId, {
				messages: mergeMessages(
					now.messages,
					page.messages.filter((m) => !m.thread_root_id),
				),
				hasOlder,
				loading: false,
			});
			this.users.authorsOf(page.messages);
			return hasOlder;
		} catch (e) {
			this.setList('messages', channelId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	/** Load the page after the last loaded message (after a jump); resolves false at the newest. */
	async loadNewer(channelId: string): Promise<boolean> {
		const store = this.core.store;
		const cur = store.s.messages[channelId];
		if (!cur?.loaded || !cur.hasNewer || cur.loading) return cur?.hasNewer ?? false;
		const last = [...cur.messages].reverse().find((m) => !m.pending && !m.failed);
		if (!last) {
			await this.loadLatest(channelId);
			return false;
		}
		const size = this.pageSize;
		this.setList('messages', channelId, { loading: true });
		try {
			const page = await this.core.api.listMessages(channelId, { after_seq: last.seq, limit: size });
			const now = store.s.messages[channelId] ?? EMPTY_LIST;
			const hasNewer = page.messages.length >= size;
			this.setList('messages', channelId, {
				messages: mergeMessages(
					now.messages,
					page.messages.filter((m) => !m.thread_root_id),
				),
				hasNewer,
				loading: false,
			});
			this.users.authorsOf(page.messages);
			return hasNewer;
		} catch (e) {
			this.setList('messages', channelId, { loading: false, error: (e as Error).message });
			throw e;
		}
	}

	/** Show the messages around seq (a jump into history), unless the window already holds it. */
	async loadAround(channelId: string, seq: number): Promise<void> {
		const cur = this.core.store.s.messages[channelId];
		if (cur?.loaded && cur.messages.some((m) => m.seq === seq)) return;
		const half = Math.max(10, Math.floor(this.pageSize / 2));
		this.setList('messages', channelId, { loading: true });
		const [before, after] = await Promise.all([
			this.core.api.listMessages(channelId, { before_seq: seq + 1, limit: half }),
			this.core.api.listMessages(channelId, { after_seq: seq, limit: half }),
		]);
		const msgs = [...before.messages, ...after.messages].filter((m) => !m.thread_root_id);
		this.setList('messages', channelId, {
			messages: mergeMessages([], msgs),
			hasOlder: before.messages.length >= half,
			hasNewer: after.messages.length >= half,
			loading: false,
			loaded: true,
		});
		this.users.authorsOf(msgs);
	}

	// ---- the user's own messages ------------------------------------------

	/**
	 * Send a message. It shows at once as pending and is replaced by the
	 * server's copy. Messages go out one at a time, in order (the outbox):
	 * one that cannot be sent for now shows as not sent and is sent again
	 * when the connection is back; one refused for good stays failed.
	 * Resolves with the server's copy once posted; rejects when refused for
	 * good or discarded.
	 */
	send(channelId: string, text: string, threadRootId?: string, files?: FileInfo[]): Promise<Message> {
		const cmid = newClientMsgId();
		const local: LocalMessage = {
			id: `local:${cmid}`,
			workspace_id: this.core.workspaceId() ?? '',
			channel_id: channelId,
			seq: Number.MAX_SAFE_INTEGER,
			user_id: this.core.store.s.self?.id ?? '',
			text,
			client_msg_id: cmid,
			created_at: new Date().toISOString(),
			thread_root_id: threadRootId,
			reply_count: 0,
			pinned: false,
			reactions: [],
			files: files?.length ? files : undefined,
			pending: true,
		};
		return this.outbox.add(local);
	}

	/** Try a failed message again now (same client_msg_id: never posted twice). */
	resend(local: LocalMessage): Promise<Message> {
		return this.outbox.add({ ...local, failed: false, pending: true, queued: false, error: undefined });
	}

	/** Drop a failed message from the list (and from the outbox). */
	discard(local: LocalMessage): void {
		if (local.client_msg_id) this.outbox.remove(local.client_msg_id);
		const kind = local.thread_root_id ? 'replies' : 'messages';
		const key = local.thread_root_id ?? local.channel_id;
		const cur = this.core.store.s[kind][key];
		if (cur) this.setList(kind, key, { messages: cur.messages.filter((m) => m.id !== local.id) });
	}

	/** Show the messages an earlier page left unsent, and send them (after boot: the user is known). */
	restoreOutbox(): void {
		for (const m of this.outbox.restore()) this.putLocal(m, this.shownCopy(m));
		this.outbox.flush();
	}

	/** A queued message as a list shows it: pending, until a failure says otherwise. */
	private shownCopy(m: LocalMessage): LocalMessage {
		// A copy from storage keeps only what sending needs.
		return { ...m, reply_count: m.reply_count ?? 0, pinned: m.pinned ?? false, reactions: m.reactions ?? [], seq: Number.MAX_SAFE_INTEGER, pending: !m.failed };
	}

	async edit(messageId: string, text: string): Promise<Message> {
		const m = await this.core.api.editMessage(messageId, text);
		this.upsert(m);
		return m;
	}

	async delete(messageId: string): Promise<void> {
		await this.core.api.deleteMessage(messageId);
		this.drop(messageId);
	}

	/** Toggle the user's reaction on a message. */
	async toggleReaction(message: Message, emoji: string): Promise<void> {
		const mine = message.reactions?.some((r) => r.emoji === emoji && r.me);
		const m = mine ? await this.core.api.removeReaction(message.id, emoji) : await this.core.api.addReaction(message.id, emoji);
		if (m) this.upsert(m, true);
	}

	async react(messageId: string, emoji: string): Promise<void> {
		const m = await this.core.api.addReaction(messageId, emoji);
		if (m) this.upsert(m, true);
	}

	async unreact(messageId: string, emoji: string): Promise<void> {
		const m = await this.core.api.removeReaction(messageId, emoji);
		if (m) this.upsert(m, true);
	}

	/** Show a local copy of an unsent message in its list (a channel's only when it shows the live end; a thread's only when open or opening). */
	private putLocal(at: LocalMessage, m: LocalMessage): void {
		const kind: Kind = at.thread_root_id ? 'replies' : 'messages';
		const key = at.thread_root_id ?? at.channel_id;
		const cur = this.core.store.s[kind][key];
		if (kind === 'messages' ? !cur?.loaded || cur.hasNewer : !cur) return;
		// Confirmed meanwhile (its event came first): nothing to show.
		if (cur.messages.some((x) => x.client_msg_id === m.client_msg_id && x.user_id === m.user_id && !x.pending && !x.failed)) return;
		const list = cur.messages.filter((x) => x.id !== m.id);
		this.setList(kind, key, { messages: [...list, m].sort(bySeq) });
	}

	// ---- keeping windows current ------------------------------------------

	/** Every loaded copy of a message, replaced; `own` answers carry the caller's `me`. */
	upsert(m: Message, own = false): void {
		const s = this.core.store.s;
		if (m.thread_root_id) {
			this.countReply(m);
			const cur = this.core.store.s.replies[m.thread_root_id];
			if (cur) this.setList('replies', m.thread_root_id, { messages: own ? replaceOwn(cur.messages, m) : mergeMessages(cur.messages, [m]) });
			return;
		}
		this.duringLoad.get(m.channel_id)?.msgs.push(m);
		const cur = s.messages[m.channel_id];
		if (cur?.loaded) {
			const present = indexOfMessage(cur.messages, m) >= 0;
			if (present || !cur.hasNewer) {
				let msgs = own ? replaceOwn(cur.messages, m) : mergeMessages(cur.messages, [m]);
				let hasOlder = cur.hasOlder;
				// A channel that is not on screen keeps only its latest messages
				// (older ones load again on demand): busy background channels
				// must not grow without bound.
				const cap = 4 * this.pageSize;
				if (!present && m.channel_id !== s.activeChannelId && msgs.length > cap) {
					msgs = msgs.slice(msgs.length - cap);
					hasOlder = true;
				}
				this.setList('messages', m.channel_id, { messages: msgs, hasOlder });
			}
		}
		for (const [rootId, list] of Object.entries(this.core.store.s.replies)) {
			if (rootId === m.id && list.root) this.setList('replies', rootId, { root: own ? m : keepMe(list.root, m) });
		}
	}

	/**
	 * Bump the root's reply_count for a confirmed reply, once per reply id,
	 * whichever copy comes first (the HTTP answer, message.created, or
	 * thread.updated, which sets the count outright).
	 */
	countReply(m: Message, absolute?: { reply_count: number; last_reply_at: string }): void {
		if (!m.thread_root_id || m.id.startsWith('local:')) return;
		if (this.countedReplies.has(m.id) && !absolute) return;
		this.countedReplies.add(m.id);
		if (this.countedReplies.size > 5000) this.countedReplies.delete(this.countedReplies.values().next().value!);
		this.map(m.thread_root_id, (r) =>
			absolute
				? { ...r, reply_count: absolute.reply_count, last_reply_at: absolute.last_reply_at }
				: { ...r, reply_count: r.reply_count + 1, last_reply_at: m.created_at },
		);
	}

	/** A message was deleted: it leaves every window, and a reply lowers its root's count once. */
	deleted(id: string, threadRootId: string | undefined): void {
		this.drop(id);
		if (threadRootId && !this.deletedReplies.has(id)) {
			this.deletedReplies.add(id);
			this.map(threadRootId, (r) => ({ ...r, reply_count: Math.max(0, r.reply_count - 1) }));
		}
	}

	/** Replace every loaded copy of a message (in channel windows, thread windows and as a root) with fn's. */
	map(id: string, fn: (m: Message) => Message): void {
		const store = this.core.store;
		let patchMessages: Record<string, MessageList> | undefined;
		for (const [ch, list] of Object.entries(store.s.messages)) {
			const i = list.messages.findIndex((x) => x.id === id);
			if (i < 0) continue;
			const msgs = list.messages.slice();
			msgs[i] = fn(msgs[i]);
			patchMessages = { ...(patchMessages ?? store.s.messages), [ch]: { ...list, messages: msgs } };
		}
		let patchReplies: Record<string, MessageList> | undefined;
		for (const [root, list] of Object.entries(store.s.replies)) {
			const i = list.messages.findIndex((x) => x.id === id);
			const isRoot = list.root?.id === id;
			if (i < 0 && !isRoot) continue;
			const msgs = i >= 0 ? list.messages.slice() : list.messages;
			if (i >= 0) msgs[i] = fn(msgs[i]);
			patchReplies = { ...(patchReplies ?? store.s.replies), [root]: { ...list, messages: msgs, root: isRoot && list.root ? fn(list.root) : list.root } };
		}
		const patch: Partial<SessionState> = {};
		if (patchMessages) patch.messages = patchMessages;
		if (patchReplies) patch.replies = patchReplies;
		if (patchMessages || patchReplies) store.set(patch);
	}

	private drop(id: string): void {
		const store = this.core.store;
		for (const l of this.duringLoad.values()) l.deleted.add(id);
		const messages = { ...store.s.messages };
		let changed = false;
		for (const [ch, list] of Object.entries(messages)) {
			if (list.messages.some((m) => m.id === id)) {
				messages[ch] = { ...list, messages: list.messages.filter((m) => m.id !== id) };
				changed = true;
			}
		}
		const replies = { ...store.s.replies };
		for (const [root, list] of Object.entries(replies)) {
			if (list.messages.some((m) => m.id === id)) {
				replies[root] = { ...list, messages: list.messages.filter((m) => m.id !== id) };
				changed = true;
			}
		}
		if (changed) store.set({ messages, replies });
	}
}

/** The page's localStorage, when there is one (none in Node, or when the browser forbids it). */
function defaultStorage(): OutboxStorage | undefined {
	try {
		return globalThis.localStorage ?? undefined;
	} catch {
		return undefined;
	}
}
