import { describe, expect, it } from 'vitest';
import { formatRoute, MAX_QUERY, MAX_SEGMENT, parseHref, parseRoute, type Route } from './route';

describe('parseRoute', () => {
	it('reads every URL form', () => {
		expect(parseRoute('/')).toEqual({ kind: 'home' });
		expect(parseRoute('')).toEqual({ kind: 'home' });
		expect(parseRoute('/invite/abc123')).toEqual({ kind: 'invite', code: 'abc123' });
		expect(parseRoute('/w/acme')).toEqual({ kind: 'workspace', ws: 'acme' });
		expect(parseRoute('/w/acme/')).toEqual({ kind: 'workspace', ws: 'acme' });
		expect(parseRoute('/w/acme/c/general')).toEqual({ kind: 'channel', ws: 'acme', channel: 'general' });
		expect(parseRoute('/w/acme/c/general/t/R1')).toEqual({ kind: 'channel', ws: 'acme', channel: 'general', thread: 'R1' });
		expect(parseRoute('/w/acme/c/general/m/M1')).toEqual({ kind: 'channel', ws: 'acme', channel: 'general', message: 'M1' });
		expect(parseRoute('/w/acme/threads')).toEqual({ kind: 'threads', ws: 'acme' });
		expect(parseRoute('/w/acme/directory')).toEqual({ kind: 'directory', ws: 'acme' });
		expect(parseRoute('/w/acme/browse')).toEqual({ kind: 'browse', ws: 'acme' });
		expect(parseRoute('/w/acme/search', '?q=hello%20world')).toEqual({ kind: 'search', ws: 'acme', q: 'hello world' });
		expect(parseRoute('/w/acme/search', '')).toEqual({ kind: 'search', ws: 'acme', q: '' });
		expect(parseRoute('/w/acme/u/U1')).toEqual({ kind: 'user', ws: 'acme', user: 'U1' });
	});

	it('refuses unknown shapes', () => {
		for (const p of [
			'/x',
			'/w',
			'/w/',
			'/w/acme/c',
			'/w/acme/c/general/x/1',
			'/w/acme/c/general/t',
			'/w/acme/c/general/t/1/2',
			'/w/acme/threads/extra',
			'/w/acme/unknown',
			'/w/acme/u',
			'/invite',
			'/invite/a/b',
			'//w/acme',
		]) {
			expect(parseRoute(p), p).toEqual({ kind: 'invalid' });
		}
	});

	it('decodes percent-encoding once', () => {
		expect(parseRoute('/w/acme/c/caf%C3%A9')).toEqual({ kind: 'channel', ws: 'acme', channel: 'café' });
		// %2525 is "%25" after one decoding, not "%".
		expect(parseRoute('/w/acme/c/a%2525b')).toEqual({ kind: 'channel', ws: 'acme', channel: 'a%25b' });
	});

	it('refuses hostile segments', () => {
		for (const p of [
			'/w/acme/c/%2e%2e',
			'/w/acme/c/%2E',
			'/w/acme/c/..',
			'/w/%2e%2e/c/general',
			'/w/acme/c/a%2Fb', // an encoded slash
			'/w/acme/c/a%5Cb', // an encoded backslash
			'/w/acme/c/a%00b', // NUL
			'/w/acme/c/%0a', // newline
			'/w/acme/c/%C2%85', // a C1 control
			'/w/acme/c/%E0%A4%A', // malformed percent-encoding
			'/w/acme/c/%', // a lone percent
			'/w/acme/c/%FF', // not UTF-8
			'/invite/%00',
			`/w/acme/c/${'a'.repeat(MAX_SEGMENT + 1)}`,
			`/w/acme/c/${'%41'.repeat(MAX_SEGMENT * 3)}`,
			`/w/${'x/'.repeat(2000)}`,
		]) {
			expect(parseRoute(p), p).toEqual({ kind: 'invalid' });
		}
		expect(parseRoute(`/w/acme/c/${'a'.repeat(MAX_SEGMENT)}`).kind).toBe('channel');
	});

	it('cleans the search query', () => {
		const r = parseRoute('/w/acme/search', `?q=${'z'.repeat(MAX_QUERY + 50)}`);
		expect(r).toEqual({ kind: 'search', ws: 'acme', q: 'z'.repeat(MAX_QUERY) });
		expect(parseRoute('/w/acme/search', '?q=a%00b%0Ac')).toEqual({ kind: 'search', ws: 'acme', q: 'a b c' });
		expect(parseRoute('/w/acme/search', '?q=%E0%A4%A')).toMatchObject({ kind: 'search', ws: 'acme' });
	});
});

describe('formatRoute', () => {
	const cases: Route[] = [
		{ kind: 'home' },
		{ kind: 'invite', code: 'abc' },
		{ kind: 'workspace', ws: 'acme' },
		{ kind: 'channel', ws: 'acme', channel: 'general' },
		{ kind: 'channel', ws: 'acme', channel: 'general', thread: 'R1' },
		{ kind: 'channel', ws: 'acme', channel: 'general', message: 'M1' },
		{ kind: 'channel', ws: 'a b', channel: 'café?#/x' },
		{ kind: 'threads', ws: 'acme' },
		{ kind: 'search', ws: 'acme', q: 'a & b = c #d ?e' },
		{ kind: 'search', ws: 'acme', q: '' },
		{ kind: 'directory', ws: 'acme' },
		{ kind: 'browse', ws: 'acme' },
		{ kind: 'user', ws: 'acme', user: 'U1' },
	];

	it('round-trips through parseHref', () => {
		for (const r of cases) {
			const href = formatRoute(r);
			// A slash in a name is refused on the way back in; the others round-trip.
			if (r.kind === 'channel' && r.channel.includes('/')) {
				expect(href).toBe('/w/a%20b/c/caf%C3%A9%3F%23%2Fx');
				expect(parseHref(href)).toEqual({ kind: 'invalid' });
				continue;
			}
			expect(parseHref(href), href).toEqual(r);
		}
	});

	it('formats the paths the docs list', () => {
		expect(formatRoute({ kind: 'channel', ws: 'acme', channel: 'C1', message: 'M1' })).toBe('/w/acme/c/C1/m/M1');
		expect(formatRoute({ kind: 'search', ws: 'acme', q: 'hi there' })).toBe('/w/acme/search?q=hi+there');
		expect(formatRoute({ kind: 'invalid' })).toBe('/');
	});

	it('parseHref survives garbage', () => {
		expect(parseHref('http://[::1')).toEqual({ kind: 'invalid' });
		expect(parseHref('/w/acme/c/../../../invite/x')).toEqual({ kind: 'invite', code: 'x' }); // URL resolves dot segments itself
	});
});
