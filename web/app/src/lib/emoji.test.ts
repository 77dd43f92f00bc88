import { describe, expect, it } from 'vitest';
import { EMOJI, PICKER, VALID_CODE, emojiChar, emojiFor, loadEmoji, noteRecent, recentEmoji, searchEmoji, shortcodeAtCaret } from './emoji';
import { build } from './emojidata';
import { parse } from './markdown';

const data = build();

// emojibase spells emoji fully qualified (with U+FE0F where it applies).
const bare = (s: string | undefined) => s?.replace(/\uFE0F/g, '');

/** A Storage of a plain Map (localStorage is not there in node). */
function storage(init: Record<string, string> = {}) {
	const m = new Map(Object.entries(init));
	return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, v), m };
}

describe('emoji set', () => {
	it('holds the whole set with valid shortcodes, names and categories', () => {
		expect(data.list.length).toBeGreaterThan(1500);
		for (const em of data.list) {
			expect(em.c.length).toBeGreaterThan(0);
			for (const c of em.c) expect(c).toMatch(VALID_CODE);
			expect(em.n).not.toBe('');
			expect(data.groups[em.g]).toBeTruthy();
		}
		expect(data.groups).toContain('smileys & emotion');
		// No skin-tone swatches (the "component" group) in the grid.
		expect(data.list.some((em) => em.g === 2)).toBe(false);
	});

	it('agrees with the built-in table and sends reactions as the names stored so far', () => {
		for (const [code, ch] of Object.entries(EMOJI)) expect(bare(data.byCode.get(code)?.e), code).toBe(bare(ch));
		for (const code of PICKER) expect(data.byCode.get(code)?.c[0], code).toBe(code);
		expect(data.byCode.get('+1')?.c[0]).toBe('thumbsup');
		expect(bare(data.byCode.get('coffee')?.e)).toBe('☕');
	});
});

describe('searchEmoji', () => {
	it('ranks an exact shortcode, then prefixes, then names and keywords', () => {
		const found = searchEmoji(data.list, 'thumbs');
		expect(found.slice(0, 2).map((em) => em.c[0])).toEqual(['thumbsup', 'thumbsdown']);
		expect(searchEmoji(data.list, 'tada')[0].e).toBe('🎉');
		expect(searchEmoji(data.list, ':smile:')[0].c[0]).toBe('smile');
		// By name ("face with tears of joy") and by keyword ("party").
		expect(searchEmoji(data.list, 'tears of joy').map((em) => em.e)).toContain('😂');
		expect(searchEmoji(data.list, 'party').map((em) => em.e)).toContain('🎉');
	});

	it('finds nothing for nothing, and limits its answer', () => {
		expect(searchEmoji(data.list, '  ')).toEqual([]);
		expect(searchEmoji(data.list, 'zzzzqqq')).toEqual([]);
		expect(searchEmoji(data.list, 'a', 10)).toHaveLength(10);
	});
});

describe('shortcodeAtCaret', () => {
	it('finds ":par" before the caret at a word start', () => {
		expect(shortcodeAtCaret('hi :tad', 7)).toEqual({ start: 3, q: 'tad' });
		expect(shortcodeAtCaret(':Smi', 4)).toEqual({ start: 0, q: 'smi' });
		expect(shortcodeAtCaret('x (:+1', 6)).toEqual({ start: 3, q: '+1' });
		expect(shortcodeAtCaret('hi :tad more', 7)).toEqual({ start: 3, q: 'tad' });
	});

	it('ignores times, URLs, single letters and finished shortcodes', () => {
		for (const [s, at] of [
			['at 10:30', 8],
			['http://x', 8],
			['hi :t', 5],
			['hi :tada:', 9],
			['a:bc', 4],
			['hi :ta da', 9],
		] as const) {
			expect(shortcodeAtCaret(s, at), s).toBeNull();
		}
	});
});

describe('recents', () => {
	it('keeps the most recent first, without repeats, at most 24', () => {
		const s = storage();
		expect(recentEmoji(s)).toEqual([]);
		noteRecent('tada', s);
		noteRecent('eyes', s);
		expect(noteRecent('tada', s)).toEqual(['tada', 'eyes']);
		expect(recentEmoji(s)).toEqual(['tada', 'eyes']);
		for (let i = 0; i < 30; i++) noteRecent(`c${i}`, s);
		expect(recentEmoji(s)).toHaveLength(24);
		expect(recentEmoji(s)[0]).toBe('c29');
	});

	it('survives garbage in storage and storage that throws', () => {
		expect(recentEmoji(storage({ 'parley.emoji.recent': '{not json' }))).toEqual([]);
		expect(recentEmoji(storage({ 'parley.emoji.recent': '[1,"ok","<script>",null,"fine_too"]' }))).toEqual(['ok', 'fine_too']);
		const full = {
			getItem: () => null,
			setItem: () => {
				throw new Error('QuotaExceededError');
			},
		};
		expect(noteRecent('tada', full)).toEqual(['tada']);
		expect(recentEmoji(undefined)).toEqual([]);
	});
});

describe('loadEmoji', () => {
	it('loads the full set once, after which every shortcode resolves', async () => {
		expect(emojiChar('tada')).toBe('🎉');
		const [a, b] = await Promise.all([loadEmoji(), loadEmoji()]);
		expect(a).toBe(b);
		expect(bare(emojiFor('coffee'))).toBe('☕');
		expect(emojiChar('no_such_emoji')).toBe(':no_such_emoji:');
		// Markdown renders :shortcode: from the full set once it is there.
		expect(parse(':coffee:')).toEqual([{ t: 'p', c: [{ t: 'emoji', name: 'coffee', v: emojiFor('coffee') }] }]);
	});
});
