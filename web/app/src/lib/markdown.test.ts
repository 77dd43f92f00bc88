import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import Markdown from '../components/Markdown.svelte';
import { MAX_DEPTH, parse, parseInline, safeHref, plainText, type Block, type Inline } from './markdown';

/** html renders Markdown.svelte on the server and returns its markup. */
function html(text: string, selfHandle = ''): string {
	return render(Markdown, { props: { text, selfHandle } }).body.replace(/<!--[^>]*-->/g, '');
}

describe('parseInline', () => {
	it('parses bold, italic, code and line breaks', () => {
		expect(parseInline('a **b** *c* _d_ `e*f*` g\nh')).toEqual<Inline[]>([
			{ t: 'text', v: 'a ' },
			{ t: 'b', c: [{ t: 'text', v: 'b' }] },
			{ t: 'text', v: ' ' },
			{ t: 'i', c: [{ t: 'text', v: 'c' }] },
			{ t: 'text', v: ' ' },
			{ t: 'i', c: [{ t: 'text', v: 'd' }] },
			{ t: 'text', v: ' ' },
			{ t: 'code', v: 'e*f*' },
			{ t: 'text', v: ' g' },
			{ t: 'br' },
			{ t: 'text', v: 'h' },
		]);
	});

	it('nests marks', () => {
		expect(parseInline('**bold _and italic_**')).toEqual<Inline[]>([
			{
				t: 'b',
				c: [
					{ t: 'text', v: 'bold ' },
					{ t: 'i', c: [{ t: 'text', v: 'and italic' }] },
				],
			},
		]);
	});

	it('leaves unclosed and space-padded marks as text', () => {
		for (const s of ['**not bold', '*not italic', '`not code', '_x', 'a * b * c', '** x **', '[label](', '[x]']) {
			expect(parseInline(s)).toEqual([{ t: 'text', v: s }]);
		}
	});

	it('does not italicise snake_case or cross lines', () => {
		expect(parseInline('snake_case_name')).toEqual([{ t: 'text', v: 'snake_case_name' }]);
		expect(parseInline('*a\nb*')).toEqual([{ t: 'text', v: '*a' }, { t: 'br' }, { t: 'text', v: 'b*' }]);
	});

	it('finds mentions, channel mentions and emoji', () => {
		expect(parseInline('hi @ann.lee, @here :tada: :nope: a@b.c')).toEqual<Inline[]>([
			{ t: 'text', v: 'hi ' },
			{ t: 'mention', handle: 'ann.lee' },
			{ t: 'text', v: ', ' },
			{ t: 'mention', handle: 'here' },
			{ t: 'text', v: ' ' },
			{ t: 'emoji', name: 'tada', v: '🎉' },
			{ t: 'text', v: ' :nope: a@b.c' },
		]);
	});

	it('links bare URLs without trailing punctuation', () => {
		expect(parseInline('see https://example.com/a?b=1. ok')).toEqual<Inline[]>([
			{ t: 'text', v: 'see ' },
			{ t: 'link', href: 'https://example.com/a?b=1', c: [{ t: 'text', v: 'https://example.com/a?b=1' }] },
			{ t: 'text', v: '. ok' },
		]);
	});

	it('links [label](url) only for http, https and mailto', () => {
		expect(parseInline('[docs](https://example.com/d)')).toEqual<Inline[]>([{ t: 'link', href: 'https://example.com/d', c: [{ t: 'text', v: 'docs' }] }]);
		expect(parseInline('[mail](mailto:a@example.com)')[0]).toMatchObject({ t: 'link', href: 'mailto:a@example.com' });
		for (const s of [
			'[x](javascript:alert(1))',
			'[x](JavaScript:alert(1))',
			'[x](java\tscript:alert(1))',
			'[x](data:text/html,hi)',
			'[x](/relative)',
			'[x](vbscript:x)',
		]) {
			expect(
				parseInline(s).some((n) => n.t === 'link'),
				s,
			).toBe(false);
		}
	});
});

describe('safeHref', () => {
	it('accepts web and mail links and rejects everything else', () => {
		expect(safeHref('https://example.com')).toBe('https://example.com/');
		expect(safeHref(' http://example.com/x ')).toBe('http://example.com/x');
		expect(safeHref('mailto:x@example.com')).toBe('mailto:x@example.com');
		expect(safeHref('javascript:alert(1)')).toBeNull();
		expect(safeHref('\njavascript:alert(1)')).toBeNull();
		expect(safeHref('jav\u0000ascript:alert(1)')).toBeNull();
		expect(safeHref('data:text/html;base64,PHNjcmlwdD4=')).toBeNull();
		expect(safeHref('//evil.example')).toBeNull();
		expect(safeHref('not a url')).toBeNull();
	});
});

describe('parse', () => {
	it('splits code blocks from paragraphs and keeps the language apart', () => {
		expect(parse('before\n```js\nlet a = **1**;\n<b>\n```\nafter')).toEqual([
			{ t: 'p', c: [{ t: 'text', v: 'before' }] },
			{ t: 'pre', v: 'let a = **1**;\n<b>', lang: 'js' },
			{ t: 'p', c: [{ t: 'text', v: 'after' }] },
		]);
	});

	it('leaves an unclosed fence as text', () => {
		expect(parse('```\nnever closed')).toEqual([{ t: 'p', c: [{ t: 'text', v: '```' }, { t: 'br' }, { t: 'text', v: 'never closed' }] }]);
	});

	it('keeps 40,000 characters of unclosed marks as one text node', () => {
		const s = '* _ [ ** @ : ]( ~ ~~ '.repeat(2_000);
		// "* " starts a bullet: the rest of the line is its one text node.
		expect(parse(s)).toEqual([{ t: 'list', ordered: false, start: 1, items: [[{ t: 'p', c: [{ t: 'text', v: s.slice(2) }] }]] }]);
		expect(parse('x' + s)).toEqual([{ t: 'p', c: [{ t: 'text', v: 'x' + s }] }]);
	});
});

describe('Markdown.svelte', () => {
	it('escapes raw HTML', () => {
		const out = html('<script>alert(1)</script><img src=x onerror=alert(1)>');
		expect(out).not.toContain('<script');
		expect(out).not.toContain('<img');
		expect(out).toContain('&lt;script>alert(1)&lt;/script>&lt;img src=x onerror=alert(1)>');
	});

	it('escapes HTML in code, links and emphasis', () => {
		const out = html('**<b>x</b>** `<i>` [<svg onload=1>](https://example.com/"><script>)\n```\n</pre><script>\n```');
		expect(out).not.toMatch(/<(script|svg|i>|b>)/);
		expect(out).toContain('<strong>&lt;b>x&lt;/b></strong>');
		expect(out).toContain('<code>&lt;i></code>');
		expect(out).toContain('href="https://example.com/%22%3E%3Cscript%3E"');
	});

	it('gives links rel and target and drops javascript: links', () => {
		const out = html('[a](https://example.com) [b](javascript:alert(1))');
		expect(out).toContain('<a href="https://example.com/" rel="noopener noreferrer" target="_blank">a</a>');
		expect(out).not.toContain('javascript:alert(1)"');
		expect(out).toContain('[b](javascript:alert(1))');
	});

	it('highlights mentions of the reader', () => {
		const out = html('@ann and @bob', 'bob');
		expect(out).toMatch(/<span class="mention[^"]*">@ann<\/span>/);
		expect(out).toMatch(/<span class="mention[^"]* me[^"]*">@bob<\/span>/);
	});
});

describe('plainText', () => {
	it('flattens and truncates', () => {
		expect(plainText('a\n```\ncode\n```\nb')).toBe('a [code] b');
		expect(plainText('x'.repeat(200), 10)).toBe('x'.repeat(9) + '…');
	});
});

const p = (v: string): Block => ({ t: 'p', c: [{ t: 'text', v }] });

describe('blocks', () => {
	it('parses bulleted lists with -, * and •', () => {
		for (const mark of ['-', '*', '•']) {
			expect(parse(`intro\n${mark} one\n${mark} **two**\nafter`), mark).toEqual<Block[]>([
				p('intro'),
				{ t: 'list', ordered: false, start: 1, items: [[p('one')], [{ t: 'p', c: [{ t: 'b', c: [{ t: 'text', v: 'two' }] }] }]] },
				p('after'),
			]);
		}
	});

	it('parses numbered lists and keeps their start', () => {
		expect(parse('3. three\n4. four')).toEqual<Block[]>([{ t: 'list', ordered: true, start: 3, items: [[p('three')], [p('four')]] }]);
		expect(parse('1) a')).toEqual<Block[]>([{ t: 'list', ordered: true, start: 1, items: [[p('a')]] }]);
		// A bulleted line ends a numbered list and starts its own.
		expect(parse('1. a\n- b').map((b) => b.t === 'list' && b.ordered)).toEqual([true, false]);
	});

	it('nests lists by indentation', () => {
		expect(parse('- a\n  - b\n    - c\n- d')).toEqual<Block[]>([
			{
				t: 'list',
				ordered: false,
				start: 1,
				items: [[p('a'), { t: 'list', ordered: false, start: 1, items: [[p('b'), { t: 'list', ordered: false, start: 1, items: [[p('c')]] }]] }], [p('d')]],
			},
		]);
	});

	it('does not take emphasis or a bare dash for a list', () => {
		expect(parse('*not a list*')[0].t).toBe('p');
		expect(parse('-1 degrees')[0].t).toBe('p');
		expect(parse('-')[0].t).toBe('p');
		expect(parse('2024 was a year')[0].t).toBe('p');
	});

	it('parses multi-line quotes, with blocks inside', () => {
		expect(parse('> one\n> - two\n>three\nafter')).toEqual<Block[]>([
			{ t: 'quote', c: [p('one'), { t: 'list', ordered: false, start: 1, items: [[p('two')]] }, p('three')] },
			p('after'),
		]);
		expect(parse('a\n>>> rest\nof it')).toEqual<Block[]>([
			p('a'),
			{ t: 'quote', c: [{ t: 'p', c: [{ t: 'text', v: 'rest' }, { t: 'br' }, { t: 'text', v: 'of it' }] }] },
		]);
		expect(parse('a > b')).toEqual([p('a > b')]);
	});

	it('parses headings as bold lines', () => {
		expect(parse('# Title\n### Sub *x*\n####### seven\n#nospace')).toEqual<Block[]>([
			{ t: 'h', level: 1, c: [{ t: 'text', v: 'Title' }] },
			{
				t: 'h',
				level: 3,
				c: [
					{ t: 'text', v: 'Sub ' },
					{ t: 'i', c: [{ t: 'text', v: 'x' }] },
				],
			},
			{ t: 'p', c: [{ t: 'text', v: '####### seven' }, { t: 'br' }, { t: 'text', v: '#nospace' }] },
		]);
	});

	it('parses code blocks with and without a language, and code around fences', () => {
		expect(parse('```go\nfunc main() {}\n```')).toEqual<Block[]>([{ t: 'pre', v: 'func main() {}', lang: 'go' }]);
		expect(parse('```\n- not a list\n> nor a quote\n```')).toEqual<Block[]>([{ t: 'pre', v: '- not a list\n> nor a quote' }]);
		// Code on the fence lines themselves, as Slack users type it.
		expect(parse('```x = 1\ny = 2```')).toEqual<Block[]>([{ t: 'pre', v: 'x = 1\ny = 2' }]);
		expect(parse('```one line```')).toEqual<Block[]>([{ t: 'p', c: [{ t: 'code', v: 'one line' }] }]);
		expect(parse('```\na\n``` then')).toEqual<Block[]>([{ t: 'pre', v: 'a' }, p(' then')]);
	});

	it('leaves unterminated fences, quotes of nothing and NUL as text', () => {
		expect(parse('```go\nfunc')).toEqual<Block[]>([{ t: 'p', c: [{ t: 'text', v: '```go' }, { t: 'br' }, { t: 'text', v: 'func' }] }]);
		expect(parse('a\u0000b\n- \u0000')).toEqual<Block[]>([p('a\u0000b'), { t: 'list', ordered: false, start: 1, items: [[p('\u0000')]] }]);
		expect(parse('>')).toEqual<Block[]>([{ t: 'quote', c: [] }]);
	});

	it('stops nesting quotes and lists at MAX_DEPTH', () => {
		const depth = (bs: Block[]): number =>
			Math.max(0, ...bs.map((b) => (b.t === 'quote' ? 1 + depth(b.c) : b.t === 'list' ? 1 + Math.max(0, ...b.items.map(depth)) : 0)));
		expect(depth(parse('> '.repeat(50) + 'deep'))).toBe(MAX_DEPTH);
		const list = Array.from({ length: 50 }, (_, i) => ' '.repeat(i * 2) + '- x').join('\n');
		expect(depth(parse(list))).toBe(MAX_DEPTH);
		expect(depth(parse('>>> '.repeat(50)))).toBe(MAX_DEPTH);
	});

	it('parses huge inputs', () => {
		const lines = Array.from({ length: 10_000 }, (_, i) => `- item ${i}`).join('\n');
		const [list] = parse(lines);
		expect(list.t === 'list' && list.items.length).toBe(10_000);
		expect(parse('> a\n'.repeat(10_000))[0].t).toBe('quote');
	});
});

describe('strike', () => {
	it('parses ~strike~ and ~~strike~~', () => {
		expect(parseInline('~a~ and ~~b c~~')).toEqual<Inline[]>([
			{ t: 's', c: [{ t: 'text', v: 'a' }] },
			{ t: 'text', v: ' and ' },
			{ t: 's', c: [{ t: 'text', v: 'b c' }] },
		]);
	});

	it('leaves tildes in words, numbers and paths alone', () => {
		for (const s of ['~5 to ~10', 'a~b~c', '~/bin and ~/lib', '~ x ~', '~~ x ~~', '~a\nb~']) {
			expect(
				parseInline(s).some((n) => n.t === 's'),
				s,
			).toBe(false);
		}
	});
});

describe('emoji lookup', () => {
	it('uses the lookup it is given for :shortcodes:', () => {
		const look = (c: string) => (c === 'unicorn_face' ? '🦄' : undefined);
		expect(parse(':unicorn_face: :tada:', look)).toEqual<Block[]>([
			{
				t: 'p',
				c: [
					{ t: 'emoji', name: 'unicorn_face', v: '🦄' },
					{ t: 'text', v: ' :tada:' },
				],
			},
		]);
	});
});

describe('Markdown.svelte blocks', () => {
	it('renders lists, quotes, strike, headings and code as elements with text', () => {
		const out = html('# Plan\n- **one**\n- ~two~\n1. <script>\n> quoted <b>\n```go\nfmt.Println("<x>")\n```');
		expect(out).toContain('<p class="md-h md-h1">Plan</p>');
		expect(out).toMatch(/<ul><li><p><strong>one<\/strong><\/p><\/li><li><p><s>two<\/s><\/p><\/li><\/ul>/);
		expect(out).toContain('<ol start="1"><li><p>&lt;script></p></li></ol>');
		expect(out).toContain('<blockquote><p>quoted &lt;b></p></blockquote>');
		expect(out).toMatch(/<pre[^>]*data-lang="go"[^>]*><code>fmt.Println\("&lt;x>"\)<\/code><\/pre>/);
		expect(out).not.toContain('<script');
	});
});
