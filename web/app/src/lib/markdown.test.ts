import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import Markdown from '../components/Markdown.svelte';
import { parse, parseInline, safeHref, plainText, type Inline } from './markdown';

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
	it('splits code blocks from paragraphs and drops the language tag', () => {
		expect(parse('before\n```js\nlet a = **1**;\n<b>\n```\nafter')).toEqual([
			{ t: 'p', c: [{ t: 'text', v: 'before' }] },
			{ t: 'pre', v: 'let a = **1**;\n<b>' },
			{ t: 'p', c: [{ t: 'text', v: 'after' }] },
		]);
	});

	it('leaves an unclosed fence as text', () => {
		expect(parse('```\nnever closed')).toEqual([{ t: 'p', c: [{ t: 'text', v: '```' }, { t: 'br' }, { t: 'text', v: 'never closed' }] }]);
	});

	it('keeps 40,000 characters of unclosed marks as one text node', () => {
		const s = '* _ [ ** @ : ]( '.repeat(2_500);
		expect(parse(s)).toEqual([{ t: 'p', c: [{ t: 'text', v: s }] }]);
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
