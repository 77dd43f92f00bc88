// The full emoji set, a chunk of its own that lib/emoji.ts loads on demand.
// The rows come from the parley-emoji plugin in vite.config.ts, which keeps
// only the fields the client uses from emojibase-data at build time.
import rows, { groups } from 'virtual:parley-emoji';
import { EMOJI, type Emoji, type EmojiData } from './emoji';

// An emoji's first shortcode is the one a reaction is sent as. Where Slack
// has several (+1, thumbsup) prefer the one the built-in table, and so the
// reactions already stored, use: 👍 is always "thumbsup".
function preferred(codes: string[]): string[] {
	const i = codes.findIndex((c) => Object.hasOwn(EMOJI, c) && !/^[+-]/.test(c));
	return i > 0 ? [codes[i], ...codes.slice(0, i), ...codes.slice(i + 1)] : codes;
}

export function build(): EmojiData {
	const list: Emoji[] = rows.map(([e, n, g, c, k]) => ({ e, n, g, c: preferred(c.split(' ')), k }));
	const byCode = new Map<string, Emoji>();
	for (const em of list) for (const c of em.c) if (!byCode.has(c)) byCode.set(c, em);
	return { list, byCode, groups };
}
