import { describe, expect, it } from 'vitest';
import { buildRows } from './rows';
import type { ViewMessage } from './view';

function msg(id: string, user: string, at: Date, extra: Partial<ViewMessage> = {}): ViewMessage {
	return {
		id,
		workspace_id: 'W',
		channel_id: 'C',
		seq: 0,
		user_id: user,
		text: id,
		created_at: at.toISOString(),
		reply_count: 0,
		pinned: false,
		reactions: [],
		...extra,
	};
}

describe('buildRows', () => {
	// Local times, so that the day boundaries are the reader's.
	const now = new Date(2026, 10, 22, 15, 0);
	const t = (day: number, h: number, m: number) => new Date(2026, 10, day, h, m);

	it('puts a separator before each day and groups runs by one author', () => {
		const rows = buildRows(
			[
				msg('a', 'ann', t(20, 9, 0)),
				msg('b', 'ann', t(21, 9, 0)), // new day: a header again
				msg('c', 'ann', t(21, 9, 3)), // same author within 5 min: grouped
				msg('d', 'bob', t(21, 9, 4)), // other author
				msg('e', 'bob', t(21, 9, 20)), // 16 min later: a header again
				msg('f', 'bob', t(22, 10, 0)),
			],
			now,
		);
		expect(rows.map((r) => (r.kind === 'day' ? `[${r.label}]` : r.kind === 'msg' ? `${r.key}${r.grouped ? '+' : ''}` : r.kind))).toEqual([
			expect.stringMatching(/^\[(?!Today|Yesterday).+\]$/),
			'a',
			'[Yesterday]',
			'b',
			'c+',
			'd',
			'e',
			'[Today]',
			'f',
		]);
	});

	it('does not group under a thread root', () => {
		const rows = buildRows([msg('root', 'ann', t(22, 9, 0), { reply_count: 2 }), msg('next', 'ann', t(22, 9, 1))], now);
		expect(rows.filter((r) => r.kind === 'msg').map((r) => r.kind === 'msg' && r.grouped)).toEqual([false, false]);
	});

	it('starts a new group when a bot message shows another name or icon', () => {
		const rows = buildRows(
			[
				msg('j1', 'bot', t(22, 9, 0), { bot_profile: { name: 'Jenkins' } }),
				msg('j2', 'bot', t(22, 9, 1), { bot_profile: { name: 'Jenkins' } }),
				msg('g1', 'bot', t(22, 9, 2), { bot_profile: { name: 'Grafana' } }),
				msg('p1', 'bot', t(22, 9, 3)),
			],
			now,
		);
		expect(rows.filter((r) => r.kind === 'msg').map((r) => r.kind === 'msg' && r.grouped)).toEqual([false, true, false, false]);
	});

	it('keys are stable and unique', () => {
		const rows = buildRows([msg('x', 'ann', t(22, 9, 0)), msg('y', 'ann', t(22, 9, 1))], now);
		expect(new Set(rows.map((r) => r.key)).size).toBe(rows.length);
	});
});

describe('buildRows: the new-messages divider', () => {
	const now = new Date(2026, 10, 22, 15, 0);
	const at = (m: number) => new Date(2026, 10, 22, 9, m);

	it('goes before the first unread message by someone else, which gets its header', () => {
		const rows = buildRows(
			[
				msg('a', 'bob', at(0), { seq: 3 }),
				msg('mine', 'me', at(1), { seq: 5 }), // after the marker, but mine
				msg('b', 'bob', at(2), { seq: 7 }),
				msg('c', 'bob', at(3), { seq: 8 }),
			],
			now,
			{ unreadAfter: 4, selfId: 'me' },
		);
		expect(rows.map((r) => (r.kind === 'msg' ? `${r.key}${r.grouped ? '+' : ''}` : r.kind))).toEqual(['day', 'a', 'mine', 'new', 'b', 'c+']);
	});

	it('is absent when nothing is unread', () => {
		const rows = buildRows([msg('a', 'bob', at(0), { seq: 3 })], now, { unreadAfter: 3, selfId: 'me' });
		expect(rows.some((r) => r.kind === 'new')).toBe(false);
	});
});

describe('rowKey', () => {
	it('keeps a sent message on the same key from local echo to server copy', () => {
		const at = new Date(2026, 10, 22, 9, 0);
		const local = msg('local:abc', 'me', at, { client_msg_id: 'abc', pending: true, seq: Number.MAX_SAFE_INTEGER });
		const server = msg('M1', 'me', at, { client_msg_id: 'abc', seq: 9 });
		const [l] = buildRows([local], at).filter((r) => r.kind === 'msg');
		const [s] = buildRows([server], at).filter((r) => r.kind === 'msg');
		expect(l.key).toBe(s.key);
		// Without a client_msg_id (imported, or another client's), the id.
		expect(buildRows([msg('M2', 'ann', at)], at).find((r) => r.kind === 'msg')!.key).toBe('M2');
	});
});
