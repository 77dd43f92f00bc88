// A small markdown subset for message text, parsed into a tree of plain data
// that Markdown.svelte turns into DOM nodes. Nothing here produces HTML: a
// user's text only ever becomes text nodes, so `<script>` is just characters.
//
// Supported: ```code blocks```, `inline code`, **bold**, *italic* / _italic_,
// [label](url) and bare http(s)/mailto links, line breaks, @mentions and
// :shortcode: emoji. A mark that is not closed stays literal text.
//
// The parser is linear in the input (a message may be 40,000 characters):
// every "where is the next X" lookup goes through a cache, so a text with
// thousands of unclosed marks does not rescan the rest of the string for
// each of them.

import { EMOJI } from './emoji';

export type Inline =
	| { t: 'text'; v: string }
	| { t: 'br' }
	| { t: 'code'; v: string }
	| { t: 'b'; c: Inline[] }
	| { t: 'i'; c: Inline[] }
	| { t: 'link'; href: string; c: Inline[] }
	| { t: 'mention'; handle: string }
	| { t: 'emoji'; name: string; v: string };

export type Block = { t: 'pre'; v: string } | { t: 'p'; c: Inline[] };

const MAX_DEPTH = 4;
const HANDLE = /^@([a-z0-9._-]{2,32})/;
const SHORTCODE = /^:([a-z0-9_+-]{1,40}):/;
const URL_START = /^(?:https?:\/\/|mailto:)/i;
const URL_BODY = /^[^\s<>"`]+/;

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

/** parse splits text into code blocks and paragraphs of inline nodes. */
export function parse(text: string): Block[] {
	const out: Block[] = [];
	let i = 0;
	while (i < text.length) {
		const open = text.indexOf('```', i);
		const close = open < 0 ? -1 : text.indexOf('```', open + 3);
		if (open < 0 || close < 0) {
			out.push({ t: 'p', c: parseInline(text.slice(i)) });
			break;
		}
		if (open > i) {
			// Drop the line break that separates the paragraph from the fence.
			out.push({ t: 'p', c: parseInline(text.slice(i, open).replace(/\n$/, '')) });
		}
		let body = text.slice(open + 3, close);
		// An opening fence on its own line: drop that line break (and a
		// language tag such as ```go) so the block starts with the code.
		const nl = body.indexOf('\n');
		if (nl >= 0 && /^[A-Za-z0-9_+-]*$/.test(body.slice(0, nl))) body = body.slice(nl + 1);
		body = body.replace(/\n$/, '');
		out.push({ t: 'pre', v: body });
		i = close + 3;
		if (text[i] === '\n') i++;
	}
	return out.filter((b) => b.t === 'pre' || b.c.length > 0);
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
export function parseInline(s: string, depth = 0): Inline[] {
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
				out.push({ t: 'b', c: parseInline(s.slice(i + 2, j), depth + 1) });
				i = j + 2;
				continue;
			}
		}

		if (depth < MAX_DEPTH && (ch === '*' || ch === '_') && s[i + 1] !== ch && !(ch === '_' && isWord(prev))) {
			const j = closing(ch, i + 1);
			// `_` inside words (snake_case) is not emphasis.
			if (j > 0 && !(ch === '_' && isWord(s[j + 1])) && s[j + 1] !== ch) {
				flush();
				out.push({ t: 'i', c: parseInline(s.slice(i + 1, j), depth + 1) });
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
					const label = parseInline(s.slice(i + 1, close), MAX_DEPTH);
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
			if (m && EMOJI[m[1]]) {
				flush();
				out.push({ t: 'emoji', name: m[1], v: EMOJI[m[1]] });
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
