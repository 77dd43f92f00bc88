// The markdown message text is written in (as Slack users write it), parsed
// into a tree of plain data that Markdown.svelte turns into DOM nodes.
// Nothing here produces HTML: a user's text only ever becomes text nodes, so
// `<script>` is just characters.
//
// Blocks: ```lang code blocks```, `>` quotes (and `>>>` for the rest of the
// message), `-` `*` `•` and `1.` lists (nested by indenting), `#` headings
// (shown as bold lines) and paragraphs. Inline: `code`, **bold**, *italic* /
// _italic_, ~strike~ / ~~strike~~, [label](url) and bare http(s)/mailto links,
// line breaks, @mentions and :shortcode: emoji. A mark that is not closed
// stays literal text; quotes and lists nest at most MAX_DEPTH deep.
//
// The parser is linear in the input (a message may be 40,000 characters):
// every "where is the next X" lookup goes through a cache, so a text with
// thousands of unclosed marks does not rescan the rest of the string for
// each of them, and each nesting level re-reads its lines once.

import { emojiFor } from './emoji';

export type Inline =
	| { t: 'text'; v: string }
	| { t: 'br' }
	| { t: 'code'; v: string }
	| { t: 'b'; c: Inline[] }
	| { t: 'i'; c: Inline[] }
	| { t: 's'; c: Inline[] }
	| { t: 'link'; href: string; c: Inline[] }
	| { t: 'mention'; handle: string }
	| { t: 'emoji'; name: string; v: string };

export type Block =
	| { t: 'pre'; v: string; lang?: string }
	| { t: 'p'; c: Inline[] }
	| { t: 'h'; level: number; c: Inline[] }
	| { t: 'quote'; c: Block[] }
	| { t: 'list'; ordered: boolean; start: number; items: Block[][] };

/** Looks a shortcode up: the emoji character, or undefined. */
export type EmojiLookup = (code: string) => string | undefined;

export const MAX_DEPTH = 4;
const HANDLE = /^@([a-z0-9._-]{2,32})/;
const SHORTCODE = /^:([a-z0-9_+-]{1,40}):/;
const URL_START = /^(?:https?:\/\/|mailto:)/i;
const URL_BODY = /^[^\s<>"`]+/;
const FENCE_LANG = /^[A-Za-z0-9_+#.-]{1,24}$/;
const LIST_ITEM = /^([ \t]*)([-*•]|\d{1,9}[.)])[ \t]+(\S.*)$/;
const QUOTE = /^ {0,3}> ?/;
const HEADING = /^(#{1,6})[ \t]+(\S.*)$/;

/**
 * safeHref returns the normalised URL if it is http, https or mailto, and
 * null otherwise (javascript:, data:, relative paths, garbage).
 */
export function safeHref(raw: string): string | null {
	let u: URL;
	try {
		u = new URL(raw.trim());
	} catch {
		return null;
	}
	if (u.protocol !== 'http:' && u.protocol !== 'https:' && u.protocol !== 'mailto:') return null;
	return u.href;
}

/** parse splits text into blocks (code, quotes, lists, headings, paragraphs). */
export function parse(text: string, emoji: EmojiLookup = emojiFor): Block[] {
	return parseLines(text.split('\n'), 0, emoji);
}

const indentOf = (line: string) => {
	let n = 0;
	for (const ch of line) {
		if (ch === ' ') n++;
		else if (ch === '\t') n += 4;
		else break;
	}
	return n;
};

/** Removes up to n columns of leading indentation. */
const dedent = (line: string, n: number) => {
	let i = 0;
	let col = 0;
	while (i < line.length && col < n && (line[i] === ' ' || line[i] === '\t')) {
		col += line[i] === '\t' ? 4 : 1;
		i++;
	}
	return line.slice(i);
};

function parseLines(lines: string[], depth: number, emoji: EmojiLookup): Block[] {
	const out: Block[] = [];
	let para: string[] = [];
	const flush = () => {
		if (para.length) {
			const c = parseInline(para.join('\n'), 0, emoji);
			if (c.length) out.push({ t: 'p', c });
		}
		para = [];
	};
	// The index of the next line at or after i that holds a ``` (-1: none),
	// computed once from the end so that fence lookups stay linear.
	const nextFence = new Int32Array(lines.length + 1);
	nextFence[lines.length] = -1;
	for (let k = lines.length - 1; k >= 0; k--) nextFence[k] = lines[k].includes('```') ? k : nextFence[k + 1];

	let i = 0;
	while (i < lines.length) {
		const line = lines[i];
		const trimmed = line.trimStart();

		// A fence opens a code block when it starts a line and a later line
		// closes it; ```code``` within one line is inline code.
		if (trimmed.startsWith('```') && !trimmed.includes('```', 3)) {
			const rest = trimmed.slice(3);
			const close = nextFence[i + 1];
			if (close >= 0) {
				flush();
				const lang = FENCE_LANG.test(rest) ? rest : undefined;
				const body = lines.slice(i + 1, close);
				if (!lang && rest) body.unshift(rest);
				const closing = lines[close];
				const at = closing.indexOf('```');
				if (closing.slice(0, at).trim()) body.push(closing.slice(0, at));
				out.push(lang ? { t: 'pre', v: body.join('\n'), lang: lang.toLowerCase() } : { t: 'pre', v: body.join('\n') });
				const after = closing.slice(at + 3);
				if (after.trim()) {
					lines[close] = after;
					i = close;
				} else i = close + 1;
				continue;
			}
		}

		if (depth < MAX_DEPTH && trimmed.startsWith('>>>')) {
			// Slack's ">>>": the rest of the message is quoted.
			flush();
			const inner = [trimmed.slice(3).replace(/^ /, ''), ...lines.slice(i + 1)];
			if (inner[0] === '') inner.shift();
			out.push({ t: 'quote', c: parseLines(inner, depth + 1, emoji) });
			break;
		}

		if (depth < MAX_DEPTH && QUOTE.test(line)) {
			flush();
			const inner: string[] = [];
			while (i < lines.length && QUOTE.test(lines[i])) inner.push(lines[i++].replace(QUOTE, ''));
			out.push({ t: 'quote', c: parseLines(inner, depth + 1, emoji) });
			continue;
		}

		const h = HEADING.exec(line);
		if (h) {
			flush();
			out.push({ t: 'h', level: Math.min(h[1].length, 3), c: parseInline(h[2].trimEnd(), 0, emoji) });
			i++;
			continue;
		}

		const li = depth < MAX_DEPTH ? LIST_ITEM.exec(line) : null;
		if (li) {
			flush();
			i = parseList(lines, i, depth, emoji, out);
			continue;
		}

		para.push(line);
		i++;
	}
	flush();
	return out;
}

/**
 * parseList reads the list that starts at lines[i] into out and returns the
 * index of the first line after it. Items are the lines at the first item's
 * indentation; more-indented lines below an item (a nested list or a
 * continuation) are parsed as that item's own blocks.
 */
function parseList(lines: string[], i: number, depth: number, emoji: EmojiLookup, out: Block[]): number {
	const first = LIST_ITEM.exec(lines[i])!;
	const base = indentOf(first[1]);
	const ordered = /\d/.test(first[2]);
	const start = ordered ? Math.min(parseInt(first[2], 10), 1e9) : 1;
	const items: Block[][] = [];
	while (i < lines.length) {
		const m = LIST_ITEM.exec(lines[i]);
		if (!m || indentOf(m[1]) > base || /\d/.test(m[2]) !== ordered) break;
		if (indentOf(m[1]) < base) break;
		i++;
		const sub: string[] = [];
		while (i < lines.length && lines[i].trim() !== '' && indentOf(lines[i]) > base) sub.push(dedent(lines[i++], base + 1));
		const own: Block[] = [];
		const c = parseInline(m[3], 0, emoji);
		if (c.length) own.push({ t: 'p', c });
		if (sub.length) {
			let minIndent = Infinity;
			for (const l of sub) minIndent = Math.min(minIndent, indentOf(l));
			own.push(
				...parseLines(
					sub.map((l) => dedent(l, minIndent)),
					depth + 1,
					emoji,
				),
			);
		}
		items.push(own);
	}
	out.push({ t: 'list', ordered, start, items });
	return i;
}

/** Cached forward search: amortised O(n) over one parse of one string. */
class Finder {
	private cache = new Map<string, { from: number; at: number }>();
	constructor(private s: string) {}
	next(needle: string, from: number): number {
		const c = this.cache.get(needle);
		if (c && from >= c.from && (c.at < 0 || c.at >= from)) return c.at;
		const at = this.s.indexOf(needle, from);
		this.cache.set(needle, { from, at });
		return at;
	}
}

const isWord = (ch: string | undefined) => ch !== undefined && /[\p{L}\p{N}_]/u.test(ch);
const isSpace = (ch: string | undefined) => ch !== undefined && /\s/.test(ch);

/** parseInline parses one paragraph (no code fences) into inline nodes. */
export function parseInline(s: string, depth = 0, emoji: EmojiLookup = emojiFor): Inline[] {
	const out: Inline[] = [];
	const find = new Finder(s);
	let buf = '';
	const flush = () => {
		if (buf) out.push({ t: 'text', v: buf });
		buf = '';
	};
	// A span closed by `mark` before the end of the line, with content that
	// neither starts nor ends with a space; the index of the closing mark.
	const closing = (mark: string, from: number): number => {
		const j = find.next(mark, from);
		if (j <= from) return -1;
		const nl = find.next('\n', from);
		if (nl >= 0 && nl < j) return -1;
		if (isSpace(s[from]) || isSpace(s[j - 1])) return -1;
		return j;
	};

	let i = 0;
	while (i < s.length) {
		const ch = s[i];
		const prev = i > 0 ? s[i - 1] : undefined;

		if (ch === '\n') {
			flush();
			out.push({ t: 'br' });
			i++;
			continue;
		}

		if (ch === '`' && s.startsWith('```', i)) {
			// A fence inside a line: ```code``` is inline code.
			const j = find.next('```', i + 3);
			if (j > i + 3) {
				flush();
				out.push({ t: 'code', v: s.slice(i + 3, j) });
				i = j + 3;
				continue;
			}
		}

		if (ch === '`') {
			const j = find.next('`', i + 1);
			if (j > i + 1) {
				flush();
				out.push({ t: 'code', v: s.slice(i + 1, j) });
				i = j + 1;
				continue;
			}
		}

		if (depth < MAX_DEPTH && ch === '*' && s[i + 1] === '*') {
			const j = closing('**', i + 2);
			if (j > 0) {
				flush();
				out.push({ t: 'b', c: parseInline(s.slice(i + 2, j), depth + 1, emoji) });
				i = j + 2;
				continue;
			}
		}

		if (depth < MAX_DEPTH && ch === '~' && s[i + 1] === '~') {
			const j = closing('~~', i + 2);
			if (j > 0) {
				flush();
				out.push({ t: 's', c: parseInline(s.slice(i + 2, j), depth + 1, emoji) });
				i = j + 2;
				continue;
			}
		}

		// Slack's ~strike~: not inside a word, nor "~5 to ~10".
		if (depth < MAX_DEPTH && ch === '~' && s[i + 1] !== '~' && !isWord(prev)) {
			const j = closing('~', i + 1);
			if (j > 0 && !isWord(s[j + 1]) && s[j + 1] !== '~') {
				flush();
				out.push({ t: 's', c: parseInline(s.slice(i + 1, j), depth + 1, emoji) });
				i = j + 1;
				continue;
			}
		}

		if (depth < MAX_DEPTH && (ch === '*' || ch === '_') && s[i + 1] !== ch && !(ch === '_' && isWord(prev))) {
			const j = closing(ch, i + 1);
			// `_` inside words (snake_case) is not emphasis.
			if (j > 0 && !(ch === '_' && isWord(s[j + 1])) && s[j + 1] !== ch) {
				flush();
				out.push({ t: 'i', c: parseInline(s.slice(i + 1, j), depth + 1, emoji) });
				i = j + 1;
				continue;
			}
		}

		if (ch === '[' && depth < MAX_DEPTH) {
			const close = find.next('](', i + 1);
			const nl = find.next('\n', i);
			if (close > i + 1 && (nl < 0 || nl > close)) {
				const end = find.next(')', close + 2);
				const href = end > close + 2 ? safeHref(s.slice(close + 2, end)) : null;
				if (href && !/\s/.test(s.slice(close + 2, end))) {
					flush();
					// No links inside a link's label.
					const label = parseInline(s.slice(i + 1, close), MAX_DEPTH, emoji);
					out.push({ t: 'link', href, c: label });
					i = end + 1;
					continue;
				}
			}
		}

		if ((ch === 'h' || ch === 'H' || ch === 'm' || ch === 'M') && !isWord(prev)) {
			const rest = s.slice(i, i + 8);
			if (URL_START.test(rest)) {
				const m = URL_BODY.exec(s.slice(i, i + 2048));
				// Trailing punctuation belongs to the sentence, not the URL.
				const raw = m ? m[0].replace(/[.,!?;:'")\]]+$/, '') : '';
				const href = safeHref(raw);
				if (href && raw.length > rest.indexOf(':') + 3) {
					flush();
					out.push({ t: 'link', href, c: [{ t: 'text', v: raw }] });
					i += raw.length;
					continue;
				}
			}
		}

		if (ch === '@' && !isWord(prev)) {
			const m = HANDLE.exec(s.slice(i, i + 34));
			if (m) {
				const handle = m[1].replace(/[.]+$/, '');
				if (handle.length >= 2) {
					flush();
					out.push({ t: 'mention', handle });
					i += handle.length + 1;
					continue;
				}
			}
		}

		if (ch === ':') {
			const m = SHORTCODE.exec(s.slice(i, i + 43));
			const v = m ? emoji(m[1]) : undefined;
			if (m && v) {
				flush();
				out.push({ t: 'emoji', name: m[1], v });
				i += m[0].length;
				continue;
			}
		}

		buf += ch;
		i++;
	}
	flush();
	return out;
}

/** plainText is the text a notification or a preview shows. */
export function plainText(text: string, max = 140): string {
	const flat = text
		.replace(/```[\s\S]*?```/g, '[code]')
		.replace(/\s+/g, ' ')
		.trim();
	return flat.length > max ? flat.slice(0, max - 1) + '…' : flat;
}
