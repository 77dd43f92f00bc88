// Pure functions on messages and message lists: merging pages and event
// copies into a window in seq order, reactions, and mention detection. They
// never mutate their arguments (the lists are parts of published snapshots).

import { BROADCAST_MENTIONS, type Message, type Reaction } from './types';
import type { LocalMessage } from './state';

/** Whether text mentions the handle (or everyone via @channel / @here / @everyone). */
export function mentions(text: string, handle: string | undefined, here = true): boolean {
	const re = /(^|[^\w@.-])@([a-z0-9._-]{2,32})/gi;
	let m: RegExpExecArray | null;
	while ((m = re.exec(text))) {
		const h = m[2].toLowerCase().replace(/[.]+$/, '');
		if (BROADCAST_MENTIONS.includes(h) && (here || h !== 'here')) return true;
		if (handle && h === handle.toLowerCase()) return true;
	}
	return false;
}

export function bySeq(a: Message, b: Message): number {
	return a.seq - b.seq;
}

/** Where m already is in list (by id, or a pending copy by client_msg_id), searching from the end. */
export function indexOfMessage(list: LocalMessage[], m: LocalMessage): number {
	for (let i = list.length - 1; i >= 0; i--) {
		const x = list[i];
		if (x.id === m.id) return i;
		if (x.pending || x.failed) {
			if (m.client_msg_id && x.client_msg_id === m.client_msg_id && x.user_id === m.user_id) return i;
		} else if (x.seq < m.seq) {
			return -1; // the list is in seq order: m is not further back
		}
	}
	return -1;
}

/**
 * Insert or replace messages (by id, and pending ones by client_msg_id),
 * keeping seq order. The common cases, a new message at the end and an edit,
 * cost one scan and one copy; only out-of-order inserts sort.
 */
export function mergeMessages(list: LocalMessage[], add: LocalMessage[]): LocalMessage[] {
	const out = list.slice();
	let sorted = true;
	for (const m of add) {
		const i = indexOfMessage(out, m);
		if (i >= 0) {
			out[i] = keepMe(out[i], m);
			if ((i > 0 && out[i - 1].seq > m.seq) || (i < out.length - 1 && out[i + 1].seq < m.seq)) sorted = false;
			continue;
		}
		// Pending messages (seq MAX_SAFE_INTEGER) stay last: insert before them.
		let j = out.length;
		while (j > 0 && out[j - 1].seq > m.seq && (out[j - 1].pending || out[j - 1].failed)) j--;
		if (j > 0 && out[j - 1].seq > m.seq) sorted = false;
		out.splice(j, 0, m);
	}
	return sorted ? out : out.sort(bySeq);
}

/** An answer to the caller's own request replaces the copy with the same id as is (its `me` is right). */
export function replaceOwn(list: LocalMessage[], m: Message): LocalMessage[] {
	return mergeMessages(
		list.map((x) => (x.id === m.id ? m : x)),
		list.some((x) => x.id === m.id) ? [] : [m],
	);
}

/** Event payloads carry reactions with me=false; keep what this session knows. */
export function keepMe(old: Message, next: Message): LocalMessage {
	if (!old.reactions?.length || !next.reactions) return next;
	const mine = new Set(old.reactions.filter((r) => r.me).map((r) => r.emoji));
	if (!mine.size) return next;
	return { ...next, reactions: next.reactions.map((r) => (mine.has(r.emoji) && !r.me ? { ...r, me: true } : r)) };
}

/** A reaction event applied to a message; mine when the reacting user is the session's. */
export function applyReaction(m: Message, emoji: string, add: boolean, mine: boolean): Message {
	const rs: Reaction[] = m.reactions ? m.reactions.map((r) => ({ ...r })) : [];
	const r = rs.find((x) => x.emoji === emoji);
	if (add) {
		if (r) {
			if (mine && r.me) return m; // already counted (our own HTTP answer got here first)
			r.count++;
			if (mine) r.me = true;
		} else {
			rs.push({ emoji, count: 1, me: mine });
		}
	} else if (r) {
		if (mine && !r.me) return m;
		r.count--;
		if (mine) r.me = false;
	}
	return { ...m, reactions: rs.filter((x) => x.count > 0) };
}
