// Emoji by shortcode. Reactions travel as shortcodes (PROTOCOL.md: "Reaction
// emoji in URLs are shortcodes"), Slack's names (thumbsup, tada, +1). A few
// common ones live here, in the entry bundle, so that reactions and the
// picker's first row show at once; the full set (emojibase's English data
// with Slack's shortcodes, see the parley-emoji plugin in vite.config.ts) is a
// separate chunk that loadEmoji() fetches the first time it is needed.

import { createSubscriber } from 'svelte/reactivity';

export const EMOJI: Readonly<Record<string, string>> = {
	thumbsup: '👍',
	thumbsdown: '👎',
	heart: '❤️',
	joy: '😂',
	smile: '😄',
	tada: '🎉',
	eyes: '👀',
	rocket: '🚀',
	fire: '🔥',
	pray: '🙏',
	clap: '👏',
	thinking_face: '🤔',
	white_check_mark: '✅',
	x: '❌',
	'100': '💯',
	wave: '👋',
	ok_hand: '👌',
	sweat_smile: '😅',
	slightly_smiling_face: '🙂',
	cry: '😢',
	'+1': '👍',
	'-1': '👎',
};

/** The shortcodes offered first in the picker while nothing is recent. */
export const PICKER: readonly string[] = [
	'thumbsup',
	'heart',
	'joy',
	'tada',
	'eyes',
	'rocket',
	'fire',
	'pray',
	'clap',
	'thinking_face',
	'white_check_mark',
	'100',
];

/** One emoji of the full set. */
export type Emoji = {
	/** The character(s). */
	e: string;
	/** Its name ("thumbs up"), for search and for screen readers. */
	n: string;
	/** Its shortcodes, the first the preferred one. */
	c: string[];
	/** Its category, an index into EmojiData.groups. */
	g: number;
	/** Search keywords, space-separated. */
	k: string;
};

export type EmojiData = {
	list: Emoji[];
	byCode: Map<string, Emoji>;
	/** Category names by index ("smileys & emotion"). */
	groups: string[];
};

/** What the server accepts as a reaction (validate.go's emojiRe). */
export const VALID_CODE = /^[a-z0-9_+-]{1,64}$/;

let data: EmojiData | null = null;
let loading: Promise<EmojiData> | null = null;
let changed = () => {};
const subscribe = createSubscriber((update) => {
	changed = update;
	return () => (changed = () => {});
});

/** The full emoji set if it has loaded, else null. Reactive. */
export function emojiData(): EmojiData | null {
	subscribe();
	return data;
}

/** loadEmoji fetches the full set once; later calls share the first. */
export function loadEmoji(): Promise<EmojiData> {
	loading ??= import('./emojidata').then(
		(m) => {
			data = m.build();
			changed();
			return data;
		},
		(err: unknown) => {
			loading = null; // let a later call try again
			throw err;
		},
	);
	return loading;
}

/** The character for a shortcode if known now (no loading), else undefined. */
export function emojiFor(code: string): string | undefined {
	return Object.hasOwn(EMOJI, code) ? EMOJI[code] : data?.byCode.get(code)?.e;
}

/**
 * emojiLive is emojiFor for components: it is reactive, and a shortcode it
 * does not know starts loading the full set (in a browser), after which the
 * component shows the emoji. Digits alone (a time's ":30:") load nothing.
 */
export function emojiLive(code: string): string | undefined {
	subscribe();
	const v = emojiFor(code);
	if (v === undefined && !data && typeof document !== 'undefined' && VALID_CODE.test(code) && /[a-z]/.test(code)) loadEmoji().catch(() => {});
	return v;
}

/** The character for a shortcode, or the shortcode between colons. */
export function emojiChar(code: string): string {
	return emojiLive(code) ?? `:${code}:`;
}

/**
 * searchEmoji ranks the set for a query: a shortcode equal to it first, then
 * shortcodes starting with it, then names and keywords with a word starting
 * with it, then anything containing it. Stable within a rank.
 */
export function searchEmoji(list: readonly Emoji[], query: string, limit = 60): Emoji[] {
	const q = query.trim().toLowerCase().replace(/^:|:$/g, '');
	if (!q) return [];
	const ranks: Emoji[][] = [[], [], [], []];
	for (const em of list) {
		let r = 4;
		for (const c of em.c) {
			if (c === q) r = 0;
			else if (c.startsWith(q)) r = Math.min(r, 1);
			else if (c.includes(q)) r = Math.min(r, 3);
		}
		const words = em.k ? `${em.n} ${em.k}` : em.n;
		if (words.startsWith(q) || words.includes(' ' + q)) r = Math.min(r, 2);
		else if (words.includes(q)) r = Math.min(r, 3);
		if (r < 4) ranks[r].push(em);
	}
	return ranks.flat().slice(0, limit);
}

/** The "`:par`" right before the caret, if any: where it starts and the query. */
export function shortcodeAtCaret(text: string, caret: number): { start: number; q: string } | null {
	const upto = text.slice(Math.max(0, caret - 42), caret);
	const m = /(^|[\s(]):([a-z0-9_+-]{2,40})$/i.exec(upto);
	if (!m) return null;
	return { start: caret - m[2].length - 1, q: m[2].toLowerCase() };
}

const RECENT_KEY = 'parley.emoji.recent';
const RECENT_MAX = 24;

/** The shortcodes used last, most recent first (from localStorage). */
export function recentEmoji(store: Pick<Storage, 'getItem'> | undefined = globalThis.localStorage): string[] {
	try {
		const v: unknown = JSON.parse(store?.getItem(RECENT_KEY) ?? '[]');
		return Array.isArray(v) ? v.filter((c): c is string => typeof c === 'string' && VALID_CODE.test(c)).slice(0, RECENT_MAX) : [];
	} catch {
		return [];
	}
}

/** noteRecent moves a shortcode to the front of the recents. */
export function noteRecent(code: string, store: Pick<Storage, 'getItem' | 'setItem'> | undefined = globalThis.localStorage): string[] {
	const next = [code, ...recentEmoji(store).filter((c) => c !== code)].slice(0, RECENT_MAX);
	try {
		store?.setItem(RECENT_KEY, JSON.stringify(next));
	} catch {
		// Storage full or denied: recents are a convenience.
	}
	return next;
}
