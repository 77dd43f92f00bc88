// The first-load budget (issue 14): the JavaScript and CSS that index.html
// loads before the app can show anything — its module script, the modules it
// preloads, its stylesheets and classic scripts — must stay within 80 kB
// (80,000 bytes) gzip-compressed, as the server sends them (webui.go uses
// gzip's best compression). It reads the build in webui/dist: `make test`
// builds it first (make web). Without a build it is skipped, except under
// CI=true, where it must run.
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

export const BUDGET = 80_000;
const dist = fileURLToPath(new URL('../../webui/dist/', import.meta.url));
const built = existsSync(join(dist, 'index.html'));

/** The same-origin files that index.html loads up front. */
export function entryFiles(html: string): string[] {
	const files = new Set<string>();
	const tag = /<(script|link)\b[^>]*>/g;
	for (const [t, kind] of html.matchAll(tag)) {
		const attr = (name: string) => t.match(new RegExp(`\\b${name}="([^"]*)"`))?.[1];
		if (kind === 'script' && attr('src')) files.add(attr('src')!);
		if (kind === 'link' && /^(stylesheet|modulepreload)$/.test(attr('rel') ?? '') && attr('href')) files.add(attr('href')!);
	}
	return [...files].filter((f) => f.startsWith('/')).map((f) => f.slice(1));
}

describe('first-load bundle budget', () => {
	it('finds the entry files in an index.html', () => {
		const html = `<script src="/theme.js"></script><script type="module" crossorigin src="/assets/index-a.js"></script>
			<link rel="modulepreload" href="/assets/dep-b.js"><link rel="stylesheet" crossorigin href="/assets/index-c.css"><link rel="icon" href="data:,">`;
		expect(entryFiles(html)).toEqual(['theme.js', 'assets/index-a.js', 'assets/dep-b.js', 'assets/index-c.css']);
	});

	it.skipIf(!built && process.env.CI !== 'true')(`the entry is at most ${BUDGET} bytes gzipped`, () => {
		expect(built, `no web client build in ${dist}: run make web (or npm run build) first`).toBe(true);
		const files = entryFiles(readFileSync(join(dist, 'index.html'), 'utf8'));
		expect(files.some((f) => f.endsWith('.js'))).toBe(true);
		expect(files.some((f) => f.endsWith('.css'))).toBe(true);
		const sizes = files.map((f) => {
			const raw = readFileSync(join(dist, f));
			return { file: f, raw: raw.length, gzip: gzipSync(raw, { level: 9 }).length };
		});
		const total = sizes.reduce((n, s) => n + s.gzip, 0);
		console.log(`first load: ${total} bytes gzipped (budget ${BUDGET}): ${sizes.map((s) => `${s.file} ${s.raw} → ${s.gzip}`).join(', ')}`);
		expect(total, JSON.stringify(sizes)).toBeLessThanOrEqual(BUDGET);
	});
});
