import { describe, expect, it } from 'vitest';
import { EXPIRY_CHOICES, expiryTime, liveStatus, nextExpiry, untilLabel } from './status';

// Local times: the choices are about the user's own day and week.
const at = (y: number, mo: number, d: number, h = 0, mi = 0) => new Date(y, mo - 1, d, h, mi);

describe('expiryTime', () => {
	const wed = at(2026, 11, 25, 14, 10); // a Wednesday afternoon

	it('offers the five choices in order', () => {
		expect(EXPIRY_CHOICES.map((c) => c.value)).toEqual(['never', '30m', '1h', 'today', 'week']);
	});

	it("does not clear with Don't clear", () => {
		expect(expiryTime('never', wed)).toBeUndefined();
	});

	it('adds 30 minutes and an hour', () => {
		expect(expiryTime('30m', wed)).toEqual(at(2026, 11, 25, 14, 40));
		expect(expiryTime('1h', wed)).toEqual(at(2026, 11, 25, 15, 10));
	});

	it('clears today at the coming midnight, across a month end', () => {
		expect(expiryTime('today', wed)).toEqual(at(2026, 11, 26));
		expect(expiryTime('today', at(2026, 11, 30, 23, 59))).toEqual(at(2026, 12, 1));
	});

	it('clears this week at the start of next Monday', () => {
		expect(expiryTime('week', wed)).toEqual(at(2026, 11, 30));
		// Sunday: the week ends tonight.
		expect(expiryTime('week', at(2026, 11, 29, 9))).toEqual(at(2026, 11, 30));
		// Monday morning: the whole week, to the next Monday.
		expect(expiryTime('week', at(2026, 11, 30, 9))).toEqual(at(2026, 12, 7));
		// Across a year end.
		expect(expiryTime('week', at(2026, 12, 31, 9))).toEqual(at(2027, 1, 4));
	});

	it('is always in the future', () => {
		for (let d = 0; d < 14; d++)
			for (const c of EXPIRY_CHOICES) {
				const now = at(2026, 11, 20 + d, 23, 59);
				const t = expiryTime(c.value, now);
				if (t) expect(t.getTime()).toBeGreaterThan(now.getTime());
			}
	});
});

describe('liveStatus', () => {
	const now = Date.parse('2026-11-25T12:00:00Z');

	it('shows a status without expiry', () => {
		expect(liveStatus({ status: { emoji: 'bus', text: 'Commuting' } }, now)?.text).toBe('Commuting');
	});

	it('hides a status once it ran out, and an empty one', () => {
		expect(liveStatus({ status: { emoji: 'bus', text: 'x', expires_at: '2026-11-25T12:00:00Z' } }, now)).toBeUndefined();
		expect(liveStatus({ status: { emoji: 'bus', text: 'x', expires_at: '2026-11-25T12:00:01Z' } }, now)?.text).toBe('x');
		expect(liveStatus({ status: { emoji: '', text: '' } }, now)).toBeUndefined();
		expect(liveStatus({}, now)).toBeUndefined();
		expect(liveStatus(undefined, now)).toBeUndefined();
	});
});

describe('nextExpiry', () => {
	it('is the earliest expiry still to come', () => {
		const now = Date.parse('2026-11-25T12:00:00Z');
		const users = [
			{ status: { emoji: '', text: 'a', expires_at: '2026-11-25T11:00:00Z' } }, // passed
			{ status: { emoji: '', text: 'b', expires_at: '2026-11-25T13:00:00Z' } },
			{ status: { emoji: '', text: 'c', expires_at: '2026-11-25T12:30:00Z' } },
			{ status: { emoji: '', text: 'd' } },
			{},
		];
		expect(nextExpiry(users, now)).toBe(Date.parse('2026-11-25T12:30:00Z'));
		expect(nextExpiry([{}], now)).toBeUndefined();
	});
});

describe('untilLabel', () => {
	const now = at(2026, 11, 25, 14, 10);
	it('reads as a time today, tomorrow, or a day', () => {
		expect(untilLabel(undefined, now)).toBe('');
		expect(untilLabel(at(2026, 11, 25, 15, 10).toISOString(), now)).toMatch(/^Until \d/);
		expect(untilLabel(at(2026, 11, 26).toISOString(), now)).toBe('Until tomorrow');
		expect(untilLabel(at(2026, 11, 30).toISOString(), now)).toMatch(/^Until \S+/);
	});
});
