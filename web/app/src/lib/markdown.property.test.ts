// Property tests of the message renderer (lib/markdown.ts through
// components/Markdown.svelte): whatever a user types, rendering finishes,
// and the markup holds only the elements and attributes the renderer means
// to make. Users' text never becomes an element, an attribute or a link to
// anything but http, https or mailto.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { render } from 'svelte/server';
import Markdown from '../components/Markdown.svelte';
import { MAX_DEPTH, parse, plainText, type Block, type Inline } from './markdown';

const html = (text: string) => render(Markdown, { props: { text, selfHandle: 'me' } }).body;

// What Markdown.svelte may emit: tag name to the attributes it may carry.
const ALLOWED: Record<string, string[]> = {
	div: ['class'],
	p: ['class'],
	pre: ['class', 'data-lang'],
	code: [],
	strong: [],
	em: [],
	s: [],
	ul: [],
	ol: ['start'],
	li: [],
	blockquote: [],
	br: [],
	a: ['href', 'rel', 'target'],
	span: ['class', 'title'],
};

type Tag = { name: string; attrs: Map<string, string> };

/**
 * tags lists the start tags of server-rendered markup. In Svelte's output
 * every '<' of text is escaped, so each '<' opens a tag, a closing tag or a
 * comment; attribute values are double-quoted with '"' escaped.
 */
function tags(markup: string): Tag[] {
	const out: Tag[] = [];
	let i = 0;
	while ((i = markup.indexOf('<', i)) >= 0) {
		if (markup.startsWith('<!--', i)) {
			const end = markup.indexOf('-->', i + 4);
			if (end < 0) throw new Error(`unterminated comment at ${i}`);
			i = end + 3;
			continue;
		}
		if (markup[i + 1] === '/') {
			const end = markup.indexOf('>', i);
			if (end < 0) throw new Error(`unterminated end tag at ${i}`);
			i = end + 1;
			continue;
		}
		const name = /^<([a-zA-Z][a-zA-Z0-9-]*)/.exec(markup.slice(i, i + 40));
		if (!name) throw new Error(`'<' that opens no tag at ${i}: ${markup.slice(i, i + 40)}`);
		let j = i + name[0].length;
		const attrs = new Map<string, string>();
		for (;;) {
			while (markup[j] === ' ') j++;
			if (markup.startsWith('/>', j)) {
				j += 2;
				break;
			}
			if (markup[j] === '>') {
				j++;
				break;
			}
			const a = /^([^\s"'>/=]+)(?:="([^"]*)")?/.exec(markup.slice(j));
			if (!a) throw new Error(`bad attribute at ${j}: ${markup.slice(j, j + 40)}`);
			attrs.set(a[1].toLowerCase(), decode(a[2] ?? ''));
			j += a[0].length;
		}
		out.push({ name: name[1].toLowerCase(), attrs });
		i = j;
	}
	return out;
}

const decode = (s: string) =>
	s
		.replace(/&quot;/g, '"')
		.replace(/&lt;/g, '<')
		.replace(/&gt;/g, '>')
		.replace(/&#39;/g, "'")
		.replace(/&amp;/g, '&');

function checkMarkup(markup: string): void {
	for (const t of tags(markup)) {
		const allowed = ALLOWED[t.name];
		if (!allowed) throw new Error(`element <${t.name}> in ${markup}`);
		for (const [k, v] of t.attrs) {
			if (!allowed.includes(k)) throw new Error(`attribute ${k} on <${t.name}> in ${markup}`);
			if (k === 'href' && !/^(https?:\/\/|mailto:)/i.test(v)) throw new Error(`href ${v}`);
		}
		if (t.name === 'a') {
			if (t.attrs.get('rel') !== 'noopener noreferrer') throw new Error(`link without rel noopener noreferrer: ${markup}`);
			const u = new URL(t.attrs.get('href') ?? '');
			if (!['http:', 'https:', 'mailto:'].includes(u.protocol)) throw new Error(`link to ${u.protocol}`);
		}
	}
}

function walk(nodes: Inline[], f: (n: Inline) => void): void {
	for (const n of nodes) {
		f(n);
		if (n.t === 'b' || n.t === 'i' || n.t === 's' || n.t === 'link') walk(n.c, f);
	}
}

function checkTree(blocks: Block[], depth = 0): void {
	if (depth > MAX_DEPTH + 1) throw new Error(`blocks nested ${depth} deep`);
	for (const b of blocks) {
		if (b.t === 'quote') checkTree(b.c, depth + 1);
		if (b.t === 'list') for (const item of b.items) checkTree(item, depth + 1);
		if (b.t !== 'p' && b.t !== 'h') continue;
		walk(b.c, (n) => {
			if (n.t === 'link') {
				const u = new URL(n.href);
				if (!['http:', 'https:', 'mailto:'].includes(u.protocol)) throw new Error(`link to ${n.href}`);
			}
		});
	}
}

// Pieces of markup syntax and of attacks, mixed with arbitrary text so that
// the generator reaches the parser's branches often.
const pieces = fc.constantFrom(
	'**',
	'*',
	'_',
	'`',
	'```',
	'```go\n',
	'[',
	']',
	'](',
	')',
	'(',
	'\n',
	' ',
	'@',
	'@me',
	'@here',
	':',
	':tada:',
	':+1:',
	'http://',
	'https://',
	'mailto:',
	'javascript:',
	'JaVaScRiPt:',
	'data:text/html,',
	'vbscript:',
	'<script>',
	'</script>',
	'<img src=x onerror=alert(1)>',
	'" onmouseover="alert(1)',
	"' onclick='x'",
	'<a href="javascript:alert(1)">',
	'&lt;',
	'&amp;',
	'&#x3C;',
	'<!--',
	'-->',
	'<svg/onload=alert(1)>',
	'\u0000',
	'\ud800',
	'\udfff',
	'\u202e',
	'\u2028',
	'example.com',
	'/path?q=1&r=<2>',
	'"',
	"'",
	'>',
	'<',
	'=',
	'- ',
	'\n* ',
	'\n• ',
	'\n1. ',
	'\n  - ',
	'\t',
	'\n> ',
	'\n>>>',
	'~',
	'~~',
	'\n# ',
	'\n```',
	'```js\n',
);
const text = fc.oneof(
	fc.string({ unit: 'binary', maxLength: 200 }),
	fc.array(fc.oneof(pieces, fc.string({ maxLength: 6 })), { maxLength: 40 }).map((a) => a.join('')),
);

describe('markdown properties', () => {
	it('parses and renders any text, unpaired surrogates and NUL included', () => {
		fc.assert(
			fc.property(text, (s) => {
				const blocks = parse(s);
				checkTree(blocks);
				plainText(s);
				checkMarkup(html(s));
			}),
			{ numRuns: 3000 },
		);
	});

	it('never turns user text into an element, an attribute or a script link', () => {
		const attack = fc
			.tuple(
				fc.constantFrom(
					'<script>alert(1)</script>',
					'<img src=x onerror=alert(1)>',
					'[x](javascript:alert(1))',
					'[x](JAVASCRIPT:alert(1))',
					'[x]( javascript:alert(1))',
					'[x](data:text/html,<script>)',
					'javascript:alert(1)',
					'[x](http://a" onclick="alert(1))',
					'[<b onclick=1>](https://ok.example)',
					'**<i onload=1>**',
					'`<script>`',
					'```\n<script>\n```',
					'https://a.example/"><script>alert(1)</script>',
				),
				text,
			)
			.map(([a, s]) => s + a + s);
		fc.assert(
			fc.property(attack, (s) => {
				// Text may say "<script>" or onclick=: what matters is that no
				// tag or attribute carries it.
				const markup = html(s);
				checkMarkup(markup);
				for (const t of tags(markup)) {
					expect(t.name).not.toBe('script');
					expect([...t.attrs.keys()].filter((k) => k.startsWith('on'))).toEqual([]);
				}
			}),
			{ numRuns: 1000 },
		);
	});

	it('keeps every character of the text', () => {
		// Nothing the user typed is dropped or invented, markup aside: the
		// text of a plain word survives rendering.
		fc.assert(
			fc.property(fc.stringMatching(/^[a-zA-Z0-9]{1,20}$/), text, (word, s) => {
				const markup = html(`${s} ${word} `);
				const stripped = decode(markup.replace(/<[^>]*>/g, ''));
				expect(stripped).toContain(word);
			}),
			{ numRuns: 500 },
		);
	});

	it('renders 40,000 characters of unclosed marks and deep nesting in linear time', () => {
		// 40,000 characters of unclosed marks: the documented worst case.
		for (const unit of [
			'**a',
			'*a',
			'_a',
			'~a',
			'~~a',
			'`',
			'[a](',
			'@ab',
			':tada',
			'http://a ',
			'```',
			'```\n',
			'> ',
			'>',
			'>>>',
			'- ',
			'- a\n  ',
			'# a\n',
			'1. a\n',
			' ',
		]) {
			const s = unit.repeat(Math.ceil(40000 / unit.length)).slice(0, 40000);
			// A quadratic path here (one found: repeated ``` on a line)
			// takes minutes and fails on the test's timeout; no wall-clock
			// assertion, which a loaded machine would make flaky.
			checkMarkup(html(s));
		}
	});
});
