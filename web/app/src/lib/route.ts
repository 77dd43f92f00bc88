// The app's URLs: a pure parse/format pair, no DOM, no state.
//
//   /                                   the last workspace and channel
//   /invite/{code}                      an invite (sign up or log in, then join)
//   /w/{ws}                             a workspace, its last channel
//   /w/{ws}/c/{channel}                 a channel or DM (id, or a channel's name)
//   /w/{ws}/c/{channel}/t/{root}        …with a thread open beside it
//   /w/{ws}/c/{channel}/m/{message}     …scrolled to a message, which flashes
//   /w/{ws}/threads                     the Threads view
//   /w/{ws}/search?q=…                  search results
//   /w/{ws}/directory                   the people directory
//   /w/{ws}/browse                      browse channels
//   /w/{ws}/u/{user}                    a profile in the side panel
//
// {ws} is the workspace's slug. Every segment is percent-decoded once and
// checked: a segment that decodes to nothing, to "." or "..", to a slash, a
// control character or something longer than MAX_SEGMENT makes the whole
// path parse as { kind: 'invalid' }, which the app shows as "not found".

export type Route =
	| { kind: 'home' }
	| { kind: 'invite'; code: string }
	| { kind: 'workspace'; ws: string }
	| { kind: 'channel'; ws: string; channel: string; thread?: string; message?: string }
	| { kind: 'threads'; ws: string }
	| { kind: 'search'; ws: string; q: string }
	| { kind: 'directory'; ws: string }
	| { kind: 'browse'; ws: string }
	| { kind: 'user'; ws: string; user: string }
	| { kind: 'invalid' };

/** The longest segment accepted (ids are 26 characters, names 80, slugs 48). */
export const MAX_SEGMENT = 128;
/** The longest search query carried in a URL. */
export const MAX_QUERY = 500;

// Control characters (C0, DEL, C1) and the path separators a decoded
// segment must not smuggle in.
// eslint-disable-next-line no-control-regex
const BAD = /[\u0000-\u001f\u007f-\u009f/\\]/;

/** One percent-decoded, checked segment; null when it is not acceptable. */
function segment(raw: string | undefined): string | null {
	if (raw === undefined || raw === '' || raw.length > MAX_SEGMENT * 3) return null;
	let s: string;
	try {
		s = decodeURIComponent(raw);
	} catch {
		return null; // malformed percent-encoding
	}
	if (s === '' || s === '.' || s === '..' || s.length > MAX_SEGMENT || BAD.test(s)) return null;
	return s;
}

/** Parse a path and query string (location.pathname, location.search). */
export function parseRoute(pathname: string, search = ''): Route {
	if (pathname.length > 2048) return { kind: 'invalid' };
	const parts = pathname.split('/').slice(1);
	if (parts.length > 0 && parts[parts.length - 1] === '') parts.pop(); // a trailing slash
	if (parts.length === 0) return { kind: 'home' };
	if (parts[0] === 'invite') {
		const code = segment(parts[1]);
		return parts.length === 2 && code ? { kind: 'invite', code } : { kind: 'invalid' };
	}
	if (parts[0] !== 'w') return { kind: 'invalid' };
	const ws = segment(parts[1]);
	if (!ws) return { kind: 'invalid' };
	const rest = parts.slice(2);
	const one = (kind: 'threads' | 'directory' | 'browse'): Route => (rest.length === 1 ? { kind, ws } : { kind: 'invalid' });
	switch (rest[0]) {
		case undefined:
			return { kind: 'workspace', ws };
		case 'threads':
		case 'directory':
		case 'browse':
			return one(rest[0]);
		case 'search': {
			if (rest.length !== 1) return { kind: 'invalid' };
			let q = '';
			try {
				q = new URLSearchParams(search).get('q') ?? '';
			} catch {
				q = '';
			}
			// eslint-disable-next-line no-control-regex
			q = q.replace(/[\u0000-\u001f\u007f]/g, ' ').slice(0, MAX_QUERY);
			return { kind: 'search', ws, q };
		}
		case 'u': {
			const user = segment(rest[1]);
			return rest.length === 2 && user ? { kind: 'user', ws, user } : { kind: 'invalid' };
		}
		case 'c': {
			const channel = segment(rest[1]);
			if (!channel) return { kind: 'invalid' };
			if (rest.length === 2) return { kind: 'channel', ws, channel };
			const id = segment(rest[3]);
			if (rest.length !== 4 || !id) return { kind: 'invalid' };
			if (rest[2] === 't') return { kind: 'channel', ws, channel, thread: id };
			if (rest[2] === 'm') return { kind: 'channel', ws, channel, message: id };
			return { kind: 'invalid' };
		}
		default:
			return { kind: 'invalid' };
	}
}

const enc = encodeURIComponent;

/** The path (and query) of a route; parseRoute(formatRoute(r)) gives r back. */
export function formatRoute(r: Route): string {
	switch (r.kind) {
		case 'home':
		case 'invalid':
			return '/';
		case 'invite':
			return `/invite/${enc(r.code)}`;
		case 'workspace':
			return `/w/${enc(r.ws)}`;
		case 'channel': {
			const base = `/w/${enc(r.ws)}/c/${enc(r.channel)}`;
			if (r.thread) return `${base}/t/${enc(r.thread)}`;
			if (r.message) return `${base}/m/${enc(r.message)}`;
			return base;
		}
		case 'threads':
		case 'directory':
		case 'browse':
			return `/w/${enc(r.ws)}/${r.kind}`;
		case 'search':
			return `/w/${enc(r.ws)}/search${r.q ? '?' + new URLSearchParams({ q: r.q }).toString() : ''}`;
		case 'user':
			return `/w/${enc(r.ws)}/u/${enc(r.user)}`;
	}
}

/** parseRoute for a whole URL string (relative to origin). */
export function parseHref(href: string, origin = 'http://x'): Route {
	try {
		const u = new URL(href, origin);
		return parseRoute(u.pathname, u.search);
	} catch {
		return { kind: 'invalid' };
	}
}
