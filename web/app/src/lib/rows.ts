// The rows of a message list: a day separator before the first message of
// each local day, and messages grouped under one header while the same
// person keeps writing (within five minutes, and not after a thread root; a
// bot message with another name or icon starts a new group).
// With unreadAfter (the read marker when the channel was opened), a "New
// messages" divider goes before the first later message by someone else.
import { sameSender } from './botprofile';
import { dayKey, dayLabel } from './time';
import type { Row, ViewMessage } from './view';

export const GROUP_MS = 5 * 60 * 1000;

/**
 * A message row's key: the sender's client_msg_id when there is one, so the
 * row of a message being sent stays the same DOM node (and keeps its measured
 * height and hover state) when the server's copy replaces the local one.
 */
export function rowKey(m: ViewMessage): string {
	return m.client_msg_id ? `c:${m.user_id}:${m.client_msg_id}` : m.id;
}

export function buildRows(messages: readonly ViewMessage[], now = new Date(), opts: { unreadAfter?: number; selfId?: string } = {}): Row[] {
	const out: Row[] = [];
	let prev: ViewMessage | undefined; // the message a new one may group with
	let lastDay = '';
	let divided = opts.unreadAfter === undefined;
	for (const m of messages) {
		const day = dayKey(m.created_at);
		if (day !== lastDay) {
			out.push({ kind: 'day', key: 'day-' + day, label: dayLabel(m.created_at, now) });
			lastDay = day;
			prev = undefined;
		}
		if (!divided && !m.pending && m.seq > opts.unreadAfter! && m.user_id !== opts.selfId) {
			out.push({ kind: 'new', key: 'new-messages' });
			divided = true;
			prev = undefined;
		}
		const grouped = !!prev && sameSender(prev, m) && !prev.reply_count && new Date(m.created_at).getTime() - new Date(prev.created_at).getTime() < GROUP_MS;
		out.push({ kind: 'msg', key: rowKey(m), m, grouped });
		prev = m;
	}
	return out;
}
