import { describe, expect, it } from 'vitest';
import { highlight, supported } from './highlight';

describe('highlight', () => {
	it('returns tokens that spell the code, with highlight.js classes', () => {
		const code = 'package main\n\nfunc main() {\n\tfmt.Println("<script>alert(1)</script>") // hi\n}';
		const tokens = highlight('go', code)!;
		expect(tokens.map((t) => t.v).join('')).toBe(code);
		expect(tokens).toContainEqual({ v: 'package', c: 'hljs-keyword' });
		expect(tokens).toContainEqual({ v: 'func', c: 'hljs-function hljs-keyword' });
		expect(tokens.find((t) => t.v.includes('<script>'))?.c).toBe('hljs-string');
		expect(tokens.find((t) => t.v.includes('// hi'))?.c).toBe('hljs-comment');
		for (const t of tokens) expect(t.c).toMatch(/^(hljs-[a-z0-9_-]+( |$))*$/);
	});

	it('knows common languages by name and alias, and nothing else', () => {
		for (const l of [
			'go',
			'golang',
			'js',
			'javascript',
			'ts',
			'py',
			'python',
			'sh',
			'bash',
			'json',
			'sql',
			'yaml',
			'yml',
			'rust',
			'html',
			'css',
			'diff',
			'c',
			'cpp',
			'java',
		])
			expect(supported(l), l).toBe(true);
		expect(supported('brainfuck')).toBe(false);
		expect(highlight('nope', 'x')).toBeNull();
	});

	it('copes with hostile and huge code', () => {
		for (const code of ['', '\u0000', '"unterminated', '/* open', '\ud800', '`'.repeat(10_000)]) {
			const t = highlight('javascript', code);
			expect(t?.map((x) => x.v).join('') ?? code).toBe(code);
		}
		const big = 'x := "a" + b // c\n'.repeat(2_000);
		expect(
			highlight('go', big)!
				.map((x) => x.v)
				.join(''),
		).toBe(big);
	});
});
