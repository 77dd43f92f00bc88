// Custom statuses: the expiry choices of the status dialog, and whether a
// status still shows. The server reads an expired status as none but sends
// no event when it runs out, so the client hides it at its expiry itself.

import type { User, UserStatus } from '@parley/client';
import { emojiChar } from './emoji';

export type Expiry = 'never' | '30m' | '1h' | 'today' | 'week';

export const EXPIRY_CHOICES: readonly { value: Expiry; label: string }[] = [
	{ value: 'never', label: "Don't clear" },
	{ value: '30m', label: '30 minutes' },
	{ value: '1h', label: '1 hour' },
	{ value: 'today', label: 'Today' },
	{ value: 'week', label: 'This week' },
];

/**
 * When a status set at `now` with this choice runs out (undefined: never).
 * "Today" ends at the coming local midnight; "this week" at the local
 * midnight that starts next Monday (weeks start on Monday).
 */
export function expiryTime(choice: Expiry, now: Date): Date | undefined {
	switch (choice) {
		case 'never':
			return undefined;
		case '30m':
			return new Date(now.getTime() + 30 * 60_000);
		case '1h':
			return new Date(now.getTime() + 60 * 60_000);
		case 'today':
			return new Date(now.getFullYear(), now.getMonth(), now.getDate() + 1);
		case 'week': {
			const toMonday = (8 - now.getDay()) % 7 || 7; // Sunday (0) → 1, Monday (1) → 7
			return new Date(now.getFullYear(), now.getMonth(), now.getDate() + toMonday);
		}
	}
}

/** The user's status if it has an emoji or text and has not run out at `now` (ms). */
export function liveStatus(u: Pick<User, 'status'> | undefined, now: number): UserStatus | undefined {
	const st = u?.status;
	if (!st || (!st.emoji && !st.text)) return undefined;
	if (st.expires_at && Date.parse(st.expires_at) <= now) return undefined;
	return st;
}

/** The earliest expiry after `now` among these users' statuses (ms), for a timer that hides them. */
export function nextExpiry(users: Iterable<Pick<User, 'status'>>, now: number): number | undefined {
	let next: number | undefined;
	for (const u of users) {
		const at = u.status?.expires_at ? Date.parse(u.status.expires_at) : NaN;
		if (at > now && (next === undefined || at < next)) next = at;
	}
	return next;
}

/** How a status's expiry reads: "Until 3:45 PM", "Until tomorrow", "Until Mon 14 Dec". */
export function untilLabel(expiresAt: string | undefined, now: Date): string {
	if (!expiresAt) return '';
	const at = new Date(expiresAt);
	const sameDay = at.toDateString() === now.toDateString();
	if (sameDay) return `Until ${at.toLocaleTimeString(undefined, { hour: 'numeric', minute: '2-digit' })}`;
	const midnight = new Date(now.getFullYear(), now.getMonth(), now.getDate() + 1);
	if (at.getTime() === midnight.getTime()) return 'Until tomorrow';
	return `Until ${at.toLocaleDateString(undefined, { weekday: 'short', day: 'numeric', month: 'short' })}`;
}

/** Common statuses offered in the dialog, as in other chat apps. */
export const STATUS_PRESETS: readonly { emoji: string; text: string; expiry: Expiry }[] = [
	{ emoji: 'spiral_calendar_pad', text: 'In a meeting', expiry: '1h' },
	{ emoji: 'bus', text: 'Commuting', expiry: '30m' },
	{ emoji: 'face_with_thermometer', text: 'Out sick', expiry: 'today' },
	{ emoji: 'palm_tree', text: 'Vacationing', expiry: 'never' },
	{ emoji: 'house_with_garden', text: 'Working remotely', expiry: 'today' },
];

/** Status emoji beyond the reaction table. */
const STATUS_EMOJI: Readonly<Record<string, string>> = {
	spiral_calendar_pad: '🗓️',
	bus: '🚌',
	face_with_thermometer: '🤒',
	palm_tree: '🌴',
	house_with_garden: '🏡',
	speech_balloon: '💬',
	coffee: '☕',
	headphones: '🎧',
};

/** The shortcodes the status dialog's emoji choice offers. */
export const STATUS_EMOJI_CHOICES: readonly string[] = [
	'speech_balloon',
	...Object.keys(STATUS_EMOJI).filter((c) => c !== 'speech_balloon'),
	'rocket',
	'fire',
	'eyes',
	'tada',
];

/** The character for a status shortcode. */
export function statusEmoji(code: string): string {
	return STATUS_EMOJI[code] ?? emojiChar(code);
}
