// The full emoji set, a chunk of its own that lib/emoji.ts loads on demand.
// The rows come from the parley-emoji plugin in vite.config.ts, which keeps
// only the fields the client uses from emojibase-data at build time.
import rows, { groups } from 'virtual:parley-emoji';
import type { Emoji, EmojiData } from './emoji';

export function build(): EmojiData {
	const list: Emoji[] = rows.map(([e, n, g, c, k]) => ({ e, n, g, c: c.split(' '), k }));
	const byCode = new Map<string, Emoji>();
	for (const em of list) for (const c of em.c) if (!byCode.has(c)) byCode.set(c, em);
	return { list, byCode, groups };
}
