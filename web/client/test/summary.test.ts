// View-aware delivery as the client sees it (docs/protocol.md): a channel
// not in focus gets channel.summary frames instead of its events. The
// summary's counts go on the badges, the channel's position moves to its
// last_seq with no /events gap fill, and a message list cached from before a
// summary is refreshed so that it never shows a gap. channel.hot marks the
// channels in focus that are hot.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Session } from '../src/session';
import { FakeParley, fakeUser, type FakeSession, until } from './fakeserver';

let srv: FakeParley;
let sess: Session | undefined;

beforeEach(async () => {
	srv = new FakeParley();
	await srv.start();
});

afterEach(async () => {
	sess?.stop();
	sess = undefined;
	await srv.stop();
});

const chan = (id: string, name: string, last: number) => ({
	id,
	name,
	kind: 'public',
	topic: '',
	member_count: 5000,
	last_seq: last,
	last_read_seq: last,
	unread_count: 0,
	mention_count: 0,
	updated_at: '',
});

/** Append n messages by U2 to a channel's log (not sent to anyone); the last entry's seq. */
function appendMessages(ch: string, n: number, text = (i: number) => `m${i}`): number {
	let seq = 0;
	for (let i = 0; i < n; i++) seq = srv.appendMessage(ch, text(i)).seq;
	return seq;
}

/** Boot with C1 and C2 at their logs' ends, start, and wait for ready. */
async function started(opts: { pageSize?: number } = {}): Promise<{ s: Session; fs: FakeSession }> {
	srv.bootAnswer = () => ({
		self: fakeUser('U1', 'me'),
		workspace: { id: 'W1', name: 'W', slug: 'w' },
		channels: [chan('C1', 'concert', srv.log.get('C1')?.at(-1)?.seq ?? 0), chan('C2', 'quiet', srv.log.get('C2')?.at(-1)?.seq ?? 0)],
		dms: [],
		ws_url: srv.url.replace(/^http/, 'ws') + '/api/v1/gateway',
		prefs: null,
	});
	const s = new Session({
		baseUrl: srv.url,
		token: 'T',
		WebSocket: WebSocket as never,
		pageSize: opts.pageSize,
		gateway: { backoffMinMs: 10, backoffMaxMs: 20 },
	});
	sess = s;
	s.on('error', () => {}); // background failures are asserted through state
	await s.start('W1');
	await until(() => s.state.status === 'ready', 'ready');
	return { s, fs: srv.session() };
}

const seqs = (s: Session, ch: string) => (s.state.messages[ch]?.messages ?? []).map((m) => m.seq);
const counts = (s: Session, ch: string) => [s.state.channelsById[ch].unread_count, s.state.channelsById[ch].mention_count];
/** Whether seqs run from first to last with no hole (every log entry in these tests is a top-level message). */
const continuous = (xs: number[]) => xs.every((x, i) => i === 0 || x === xs[i - 1] + 1);

describe('channel.summary', () => {
	it('adds its counts to the badges and moves the position without a gap fill; the next event is last_seq+1', async () => {
		appendMessages('C1', 2);
		const { s, fs } = await started();
		expect(s.gateway!.lastSeq('C1')).toBe(2);

		// Seqs 3..7 are summarized, not sent: four unread, one mention.
		const last = appendMessages('C1', 5);
		srv.sendSummary(fs, 'C1', 4, 1);
		await until(() => s.state.channelsById.C1.unread_count === 4, 'summary counted');
		expect(counts(s, 'C1')).toEqual([4, 1]);
		expect(s.state.channelsById.C1.last_seq).toBe(last);
		expect(s.gateway!.lastSeq('C1')).toBe(last);

		// The next event is last_seq+1: delivered and counted, nothing fetched.
		const next = srv.appendMessage('C1', 'after the summary, @me');
		expect(next.seq).toBe(last + 1);
		srv.sendEntry(fs, next);
		await until(() => s.state.channelsById.C1.unread_count === 5, 'next event counted');
		expect(counts(s, 'C1')).toEqual([5, 2]);
		expect(s.gateway!.lastSeq('C1')).toBe(next.seq);

		// A summary the channel is already past adds nothing (its events were counted).
		srv.sendEvent(fs, 'channel.summary', { channel_id: 'C1', last_seq: last, unread: 4, mentions: 1 });
		// Then another real summary: the two are handled in order.
		appendMessages('C1', 3);
		srv.sendSummary(fs, 'C1', 3, 0);
		await until(() => s.state.channelsById.C1.unread_count === 8, 'second summary');
		expect(counts(s, 'C1')).toEqual([8, 2]);
		expect(s.gateway!.stats).toMatchObject({ summaries: 2, summariesStale: 1, gapsFilled: 0, gapsUnfillable: 0, duplicatesDropped: 0 });
		// Not one /events call, and no /sync but the one after identify: the summarized ranges are no gaps.
		expect(srv.requests.filter((r) => r.path.endsWith('/events'))).toEqual([]);
		expect(srv.requestsTo('/api/v1/sync')).toHaveLength(1);
		// The other channel is untouched.
		expect(counts(s, 'C2')).toEqual([0, 0]);
	});

	it('on the channel on screen schedules a read instead of badging, and reloads the list with no gap', async () => {
		appendMessages('C1', 3);
		const { s, fs } = await started();
		await s.openChannel('C1');
		expect(seqs(s, 'C1')).toEqual([1, 2, 3]);

		// The focus came late: the server summarized 4..8 (e.g. more than it replays).
		appendMessages('C1', 5);
		srv.sendSummary(fs, 'C1', 5, 1);
		await until(() => seqs(s, 'C1').at(-1) === 8 && !s.state.messages.C1.hasNewer, 'list reloaded');
		expect(seqs(s, 'C1')).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
		await srv.waitFor(() => srv.requestsTo('/api/v1/channels/C1/read').length === 1, 'read marker');
		expect((srv.requestsTo('/api/v1/channels/C1/read')[0].body as { seq: number }).seq).toBe(8);
		expect(counts(s, 'C1')).toEqual([0, 0]);

		// Live events follow on from there.
		srv.sendEntry(fs, srv.appendMessage('C1', 'live'));
		await until(() => seqs(s, 'C1').at(-1) === 9, 'live message');
		expect(seqs(s, 'C1')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
		expect(srv.requestsTo('/api/v1/channels/C1/events')).toEqual([]);
	});

	it('counts while the page is hidden, even for the channel on screen', async () => {
		appendMessages('C1', 1);
		const { s, fs } = await started();
		await s.openChannel('C1');
		s.setVisible(false);
		appendMessages('C1', 3);
		srv.sendSummary(fs, 'C1', 3, 0);
		await until(() => s.state.channelsById.C1.unread_count === 3, 'counted while hidden');
		// The list on screen is still refreshed.
		await until(() => seqs(s, 'C1').length === 4 && !s.state.messages.C1.hasNewer, 'list reloaded');
		expect(srv.requestsTo('/api/v1/channels/C1/read')).toEqual([]);
	});

	it('leaves a cached list of a channel off screen out of date until it is opened, then loads the newest page with no gap', async () => {
		appendMessages('C1', 3);
		const { s, fs } = await started({ pageSize: 20 });
		await s.openChannel('C1');
		await s.openChannel('C2');
		expect(seqs(s, 'C1')).toEqual([1, 2, 3]);

		srv.sendEntry(fs, srv.appendMessage('C1', 'still delivered'));
		await until(() => seqs(s, 'C1').at(-1) === 4, 'message 4 in the cached list');
		// 5..60 summarized.
		const last = appendMessages('C1', 56);
		srv.sendSummary(fs, 'C1', 56, 2);
		await until(() => s.state.messages.C1.hasNewer, 'cached list marked');
		expect(counts(s, 'C1')).toEqual([57, 2]);
		// Nothing is fetched for a channel off screen.
		const pages = () => srv.requestsTo('/api/v1/channels/C1/messages').length;
		expect(pages()).toBe(1);
		// A live message after the summary does not land after the hole.
		srv.sendEntry(fs, srv.appendMessage('C1', 'after'));
		await until(() => s.state.channelsById.C1.unread_count === 58, 'live message counted');
		expect(seqs(s, 'C1')).toEqual([1, 2, 3, 4]);

		await s.openChannel('C1');
		expect(pages()).toBe(2);
		const shown = seqs(s, 'C1');
		expect(shown.at(-1)).toBe(last + 1);
		expect(shown).toHaveLength(20);
		expect(continuous(shown)).toBe(true);
		expect(s.state.messages.C1.hasOlder).toBe(true);
		expect(s.state.messages.C1.hasNewer).toBe(false);
		// Older pages continue it.
		await s.loadOlder('C1');
		expect(continuous(seqs(s, 'C1'))).toBe(true);
		expect(seqs(s, 'C1')).toHaveLength(40);
	});

	it('reads the newest page again when a summary arrives while it is on its way', async () => {
		appendMessages('C1', 3);
		const { s, fs } = await started();
		await s.openChannel('C1');
		await s.openChannel('C2');
		appendMessages('C1', 2);
		srv.sendSummary(fs, 'C1', 2, 0);
		await until(() => s.state.messages.C1.hasNewer, 'cached list marked');

		// Opening it loads the newest page (to 5); the focus summary of what
		// came meanwhile (6..9) arrives while that page is on its way.
		srv.holdMessages = true;
		const opening = s.openChannel('C1');
		await srv.waitFor(() => srv.requestsTo('/api/v1/channels/C1/messages').length === 2, 'page taken');
		appendMessages('C1', 4);
		srv.sendSummary(fs, 'C1', 4, 0);
		await until(() => s.state.channelsById.C1.last_seq === 9, 'summary applied');
		srv.releaseMessages();
		await opening;
		await until(() => !s.state.messages.C1.loading && seqs(s, 'C1').at(-1) === 9, 'newest page');
		expect(srv.requestsTo('/api/v1/channels/C1/messages')).toHaveLength(3);
		expect(seqs(s, 'C1')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
		srv.sendEntry(fs, srv.appendMessage('C1', 'live'));
		await until(() => seqs(s, 'C1').at(-1) === 10, 'live message');
		expect(continuous(seqs(s, 'C1'))).toBe(true);
	});

	it('is ignored for a channel the session does not know', async () => {
		const { s, fs } = await started();
		srv.sendEvent(fs, 'channel.summary', { channel_id: 'C9', last_seq: 40, unread: 3, mentions: 1 });
		srv.sendEntry(fs, srv.appendMessage('C1', 'marker'));
		await until(() => s.state.channelsById.C1.unread_count === 1, 'marker');
		expect(s.state.channelsById.C9).toBeUndefined();
		expect(s.gateway!.lastSeq('C9')).toBeUndefined();
	});
});

describe('channel.hot', () => {
	it('marks a channel in focus while hot, and forgets it when it cools, leaves focus, or the session is new', async () => {
		const { s, fs } = await started();
		await s.openChannel('C1');
		srv.sendEvent(fs, 'channel.hot', { channel_id: 'C1', on: true });
		await until(() => !!s.state.hotChannels.C1, 'hot');
		srv.sendEvent(fs, 'channel.hot', { channel_id: 'C1', on: false });
		await until(() => !s.state.hotChannels.C1, 'cooled');

		srv.sendEvent(fs, 'channel.hot', { channel_id: 'C1', on: true });
		await until(() => !!s.state.hotChannels.C1, 'hot again');
		// Switching channels: no word of C1 cooling would come.
		await s.openChannel('C2');
		expect(s.state.hotChannels.C1).toBeUndefined();
		// A late word for C1, no longer in focus, is ignored; C2's counts.
		srv.sendEvent(fs, 'channel.hot', { channel_id: 'C1', on: true });
		srv.sendEvent(fs, 'channel.hot', { channel_id: 'C2', on: true });
		await until(() => !!s.state.hotChannels.C2, 'C2 hot');
		expect(s.state.hotChannels).toEqual({ C2: true });

		// A resumed session keeps it (missed frames are replayed).
		srv.dropSocket(fs);
		await until(() => srv.framesOf('resume').length === 1 && s.state.status === 'ready', 'resumed');
		expect(s.state.hotChannels).toEqual({ C2: true });
		// A new session is told again about what is still hot.
		srv.resumeMode = 'invalid';
		srv.dropSocket(fs);
		await until(() => srv.framesOf('identify').length === 2 && s.state.status === 'ready', 'new session');
		expect(s.state.hotChannels).toEqual({});
	});
});
