import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Api } from '../src/api';
import { Gateway, backoffDelay, retryAfterDelay, type WebSocketCtor } from '../src/gateway';
import type { ConnectionStatus, ParleyEvent } from '../src/types';
import { FakeParley } from './fakeserver';

let srv: FakeParley;
let gw: Gateway | undefined;

beforeEach(async () => {
	srv = new FakeParley();
	await srv.start();
});

afterEach(async () => {
	gw?.stop();
	gw = undefined;
	await srv.stop();
});

interface Harness {
	gw: Gateway;
	events: ParleyEvent[];
	statuses: ConnectionStatus[];
	/** The channel seqs the application saw, per channel. */
	seqs(ch: string): number[];
}

function connect(channels: Record<string, number> = {}, opts: { random?: () => number; minMs?: number; maxMs?: number } = {}): Harness {
	const api = new Api({ baseUrl: srv.url, token: 'T1' });
	const g = new Gateway({
		api,
		workspaceId: 'W1',
		WebSocket: WebSocket as unknown as WebSocketCtor,
		channels,
		backoffMinMs: opts.minMs ?? 20,
		backoffMaxMs: opts.maxMs ?? 200,
		random: opts.random,
	});
	gw = g;
	const events: ParleyEvent[] = [];
	const statuses: ConnectionStatus[] = [];
	g.on('event', (e) => {
		events.push(e);
		srv['changed']();
	});
	g.on('status', (s) => {
		statuses.push(s);
		srv['changed']();
	});
	g.start();
	return {
		gw: g,
		events,
		statuses,
		seqs: (ch) => events.filter((e) => e.d.channel_id === ch && typeof e.d.seq === 'number').map((e) => e.d.seq!),
	};
}

const ready = (h: Harness) => srv.waitFor(() => h.gw.status === 'ready', 'ready');

describe('Gateway', () => {
	it('identifies after hello, heartbeats, and sends focus and presence_sub', async () => {
		srv.heartbeatMs = 60;
		const h = connect();
		h.gw.focus(['C1']);
		h.gw.presenceSub(['U2', 'U3']);
		await ready(h);
		h.gw.focus(['C1']); // the same view again: no new frame
		const id = srv.framesOf('identify');
		expect(id).toEqual([{ op: 'identify', token: 'T1', workspace_id: 'W1' }]);
		await srv.waitFor(() => srv.framesOf('heartbeat').length >= 2, 'two heartbeats');
		await srv.waitFor(() => srv.framesOf('presence_sub').length === 1 && srv.framesOf('focus').length === 1, 'view ops');
		expect(srv.framesOf('focus')[0]).toEqual({ op: 'focus', channel_ids: ['C1'] });
		expect(srv.framesOf('presence_sub')[0]).toEqual({ op: 'presence_sub', user_ids: ['U2', 'U3'] });
		h.gw.typing('C1', 'M1');
		await srv.waitFor(() => srv.framesOf('typing').length === 1, 'typing');
		expect(srv.framesOf('typing')[0]).toEqual({ op: 'typing', channel_id: 'C1', thread_root_id: 'M1' });
	});

	it('drops duplicates and passes new events in order', async () => {
		for (let i = 0; i < 5; i++) srv.appendMessage('C1', `m${i}`);
		const h = connect({ C1: 5 });
		await ready(h);
		const sess = srv.session();
		const log = srv.log.get('C1')!;
		srv.sendEntry(sess, log[3]); // seq 4: already handled
		srv.sendEntry(sess, log[4]); // seq 5: already handled
		const e6 = srv.appendMessage('C1', 'six');
		srv.sendEntry(sess, e6);
		srv.sendEntry(sess, e6); // the same event twice
		await srv.waitFor(() => h.seqs('C1').length === 1, 'seq 6');
		await h.gw.idle();
		expect(h.seqs('C1')).toEqual([6]);
		expect(h.gw.stats.duplicatesDropped).toBe(3);
		expect(h.gw.lastSeq('C1')).toBe(6);
	});

	it('fills a seq gap from /events before the event that revealed it', async () => {
		srv.appendMessage('C1', 'one');
		const h = connect({ C1: 1 });
		await ready(h);
		const sess = srv.session();
		srv.appendMessage('C1', 'two');
		srv.append('C1', 'reaction.added', { message_id: 'MC1-1', emoji: 'thumbsup', user_id: 'U2' });
		const e4 = srv.appendMessage('C1', 'four');
		srv.sendEntry(sess, e4); // 2 and 3 never came live
		await srv.waitFor(() => h.seqs('C1').length === 3, 'three events');
		expect(h.seqs('C1')).toEqual([2, 3, 4]);
		expect(h.events.map((e) => e.t)).toEqual(['message.created', 'reaction.added', 'message.created']);
		expect(h.events.map((e) => e.source)).toEqual(['catchup', 'catchup', 'live']);
		const fills = srv.requestsTo('/api/v1/channels/C1/events');
		expect(fills.map((r) => r.query.get('after_seq'))).toEqual(['1']);
		expect(h.gw.stats.gapsFilled).toBe(1);
		// A later duplicate of a gap-filled event is dropped.
		srv.sendEntry(sess, srv.log.get('C1')![1]);
		const e5 = srv.appendMessage('C1', 'five');
		srv.sendEntry(sess, e5);
		await srv.waitFor(() => h.seqs('C1').length === 4, 'seq 5');
		expect(h.seqs('C1')).toEqual([2, 3, 4, 5]);
	});

	it("moves a channel to a summary's last_seq: later gaps are filled from there, older events are duplicates", async () => {
		srv.appendMessage('C1', 'one');
		const h = connect({ C1: 1 });
		await ready(h);
		const sess = srv.session();
		for (let i = 0; i < 4; i++) srv.appendMessage('C1', `summarized ${i}`); // 2..5, never sent
		srv.sendSummary(sess, 'C1', 4, 0);
		srv.sendEntry(sess, srv.log.get('C1')![2]); // seq 3, covered by the summary
		srv.appendMessage('C1', 'six');
		const e7 = srv.appendMessage('C1', 'seven');
		srv.sendEntry(sess, e7); // 6 never came live
		await srv.waitFor(() => h.seqs('C1').length === 2, 'seqs 6 and 7');
		expect(h.seqs('C1')).toEqual([6, 7]);
		expect(h.events.map((e) => e.t)).toEqual(['channel.summary', 'message.created', 'message.created']);
		expect(h.events[0].d).toEqual({ channel_id: 'C1', last_seq: 5, unread: 4, mentions: 0 });
		// Only the hole after the summary was filled.
		expect(srv.requestsTo('/api/v1/channels/C1/events').map((r) => r.query.get('after_seq'))).toEqual(['5']);
		expect(h.gw.stats).toMatchObject({ summaries: 1, summariesStale: 0, duplicatesDropped: 1, gapsFilled: 1 });
		// A summary of an untracked channel passes through without starting its stream.
		srv.sendEvent(sess, 'channel.summary', { channel_id: 'C9', last_seq: 40, unread: 1, mentions: 0 });
		await srv.waitFor(() => h.events.length === 4, 'untracked summary');
		expect(h.gw.lastSeq('C9')).toBeUndefined();
	});

	it('does not skip past a gap it failed to fill: catches up after reconnecting', async () => {
		srv.appendMessage('C1', 'one');
		const h = connect({ C1: 1 });
		await ready(h);
		const sess = srv.session();
		srv.appendMessage('C1', 'two');
		srv.appendMessage('C1', 'three');
		const e4 = srv.appendMessage('C1', 'four');
		srv.failNext.set('/api/v1/channels/C1/events', [500]); // not retried by the Api
		srv.sendEntry(sess, e4);
		await srv.waitFor(() => h.seqs('C1').length === 3 && h.gw.status === 'ready', 'seqs 2-4');
		expect(h.seqs('C1')).toEqual([2, 3, 4]);
		expect(h.gw.stats.gapsUnfillable).toBe(0);
	});

	it('backs off further while catch-up keeps failing', async () => {
		srv.failNext.set('/api/v1/sync', [500, 500, 500]);
		const t0 = Date.now();
		// random 0: the n-th consecutive failure waits minMs·2^(n−1)/2: 50, 100, 200 ms.
		const h = connect({ C1: 0 }, { minMs: 100, maxMs: 10_000, random: () => 0 });
		await ready(h);
		expect(srv.requestsTo('/api/v1/sync')).toHaveLength(4);
		// A client that counted each new socket as a fresh start would wait 50 ms each time.
		expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
	});

	it('pages /events when the gap is longer than a page', async () => {
		srv.eventsPage = 3;
		const h = connect({ C1: 0 });
		await ready(h);
		for (let i = 0; i < 10; i++) srv.appendMessage('C1', `m${i}`);
		srv.sendEntry(srv.session(), srv.log.get('C1')![9]);
		await srv.waitFor(() => h.seqs('C1').length === 10, 'ten events');
		expect(h.seqs('C1')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
		expect(srv.requestsTo('/api/v1/channels/C1/events').map((r) => r.query.get('after_seq'))).toEqual(['0', '3', '6']);
	});

	it('resumes with the last s after a dropped socket and gets the missed events once', async () => {
		const h = connect({ C1: 0 });
		await ready(h);
		const sess = srv.session();
		srv.sendEntry(sess, srv.appendMessage('C1', 'a'));
		srv.sendEntry(sess, srv.appendMessage('C1', 'b'));
		await srv.waitFor(() => h.seqs('C1').length === 2, 'two live');
		srv.dropSocket(sess);
		// Events while detached go to the replay buffer.
		srv.sendEntry(sess, srv.appendMessage('C1', 'c'));
		srv.sendEntry(sess, srv.appendMessage('C1', 'd'));
		await srv.waitFor(() => h.seqs('C1').length === 4 && h.gw.status === 'ready', 'replay');
		const resume = srv.framesOf('resume');
		expect(resume).toEqual([{ op: 'resume', token: 'T1', session_id: sess.id, seq: 2 }]);
		expect(h.seqs('C1')).toEqual([1, 2, 3, 4]);
		expect(h.statuses).toContain('reconnecting');
		expect(h.gw.stats.resumes).toBe(1);
		expect(h.gw.stats.sGaps).toBe(0);
		// Resume is not identify: no new session, no catch-up call beyond the first.
		expect(srv.framesOf('identify')).toHaveLength(1);
		expect(srv.requestsTo('/api/v1/sync')).toHaveLength(1);
	});

	it('on invalid_session identifies afresh and catches up with /sync before live events', async () => {
		const h = connect({ C1: 0, C2: 0 });
		const invalid: string[] = [];
		h.gw.on('invalidSession', (e) => invalid.push(e.reason));
		await ready(h);
		const sess = srv.session();
		srv.sendEntry(sess, srv.appendMessage('C1', 'a'));
		await srv.waitFor(() => h.seqs('C1').length === 1, 'first');
		srv.resumeMode = 'invalid';
		srv.holdSync = true;
		srv.dropSocket(sess);
		// Missed while away: the new session has none of it.
		srv.appendMessage('C1', 'b');
		srv.appendMessage('C1', 'c');
		srv.appendMessage('C2', 'x');
		await srv.waitFor(() => srv.sessions.size === 1 && srv.session().id !== sess.id && srv.requestsTo('/api/v1/sync').length === 2, 'new session and sync');
		// A live event of the new session arrives while /sync is still out.
		const sess2 = srv.session();
		srv.sendEntry(sess2, srv.appendMessage('C1', 'd'));
		// A negative check: a client that let live events overtake the
		// catch-up would deliver seq 4 within these 50 ms.
		await new Promise((r) => setTimeout(r, 50));
		expect(h.seqs('C1')).toEqual([1]); // nothing overtakes the catch-up
		expect(h.gw.status).not.toBe('ready');
		srv.releaseSync();
		await srv.waitFor(() => h.seqs('C1').length === 4 && h.gw.status === 'ready', 'caught up');
		expect(h.seqs('C1')).toEqual([1, 2, 3, 4]);
		expect(h.seqs('C2')).toEqual([1]);
		expect(invalid).toEqual(['replay_unavailable']);
		// The identify went out on the same socket that got invalid_session.
		const resumed = srv.conns.find((c) => c.frames.some((f) => f.op === 'resume'))!;
		expect(resumed.frames.map((f) => f.op).filter((op) => op !== 'heartbeat')).toEqual(['resume', 'identify']);
		expect((srv.requestsTo('/api/v1/sync')[1].body as { channels: Record<string, number> }).channels).toEqual({ C1: 1, C2: 0 });
	});

	it('does not let a later trackChannel skip events the catch-up must deliver', async () => {
		for (let i = 0; i < 5; i++) srv.appendMessage('C1', `m${i}`);
		srv.holdSync = true;
		const h = connect({ C1: 5 });
		await srv.waitFor(() => srv.requestsTo('/api/v1/sync').length === 1, 'sync requested');
		for (let i = 5; i < 8; i++) srv.appendMessage('C1', `m${i}`);
		// A boot answering meanwhile says the channel is at 8.
		h.gw.trackChannel('C1', 8);
		srv.releaseSync();
		await ready(h);
		expect(h.seqs('C1')).toEqual([6, 7, 8]);
	});

	it('pages /events for a channel /sync calls too_far, and forgets channels it calls not_found', async () => {
		srv.syncMax = 2;
		srv.eventsPage = 4;
		for (let i = 0; i < 9; i++) srv.appendMessage('C1', `m${i}`);
		const lost: string[] = [];
		srv.gone.add('GONE');
		const h = connect({ C1: 0, GONE: 7 });
		h.gw.on('channelLost', (e) => lost.push(e.channelId));
		await ready(h);
		expect(h.seqs('C1')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
		expect(lost).toEqual(['GONE']);
		expect(h.gw.lastSeq('GONE')).toBeUndefined();
	});

	it('starts tracking a channel from a member-only event and passes directory copies through', async () => {
		const h = connect({});
		await ready(h);
		const sess = srv.session();
		// Directory copy of a public channel the user is not in: no gap check.
		srv.sendEvent(sess, 'member.joined', { channel_id: 'PUB', seq: 7, user_id: 'U9', member_count: 3 });
		srv.sendEvent(sess, 'member.joined', { channel_id: 'PUB', seq: 9, user_id: 'U8', member_count: 4 });
		// Our own join starts a stream.
		srv.sendEvent(sess, 'member.joined', { channel_id: 'NEW', seq: 4, user_id: 'U1', member_count: 2 });
		srv.sendEvent(sess, 'message.created', { channel_id: 'NEW', seq: 5, message: { id: 'M5' } as never });
		await srv.waitFor(() => h.events.length === 4, 'four events');
		expect(h.gw.stats.gapsFilled + h.gw.stats.gapsUnfillable).toBe(0);
		expect(h.gw.lastSeq('PUB')).toBeUndefined();
		expect(h.gw.lastSeq('NEW')).toBe(5);
		// Our own member.left ends the stream.
		srv.sendEvent(sess, 'member.left', { channel_id: 'NEW', seq: 6, user_id: 'U1', member_count: 1 });
		await srv.waitFor(() => h.events.length === 5, 'left');
		expect(h.gw.lastSeq('NEW')).toBeUndefined();
	});

	it('counts an s that skipped and goes on', async () => {
		const h = connect({});
		await ready(h);
		const sess = srv.session();
		srv.sendEvent(sess, 'user.updated', { user: { id: 'U2' } as never });
		sess.s += 2; // the server skips two
		srv.sendEvent(sess, 'user.updated', { user: { id: 'U3' } as never });
		await srv.waitFor(() => h.events.length === 2, 'two events');
		expect(h.gw.stats.sGaps).toBe(1);
	});

	it('stops for good on 4004 (logged out)', async () => {
		srv.identifyClose = 4004;
		const h = connect({});
		await srv.waitFor(() => h.gw.status === 'logged_out', 'logged_out');
		await new Promise((r) => setTimeout(r, 100)); // several backoff periods
		expect(srv.conns).toHaveLength(1);
	});

	it.each([
		[4010, 'logged_out'],
		[4011, 'workspace_gone'],
	] as const)('gives up on close %i (lifecycle): status %s, no reconnect', async (code, status) => {
		const h = connect({});
		await ready(h);
		srv.closeSocket(srv.session(), code, 'lifecycle');
		await srv.waitFor(() => h.gw.status === status, status);
		expect(h.statuses).not.toContain('reconnecting');
	});

	it('reconnects after a close that is resumable (4009) and honours reconnect retry_after_ms', async () => {
		const h = connect({}, { random: () => 0 });
		await ready(h);
		const sess = srv.session();
		srv.closeSocket(sess, 4009, 'too slow');
		await srv.waitFor(() => srv.conns.length === 2 && h.gw.status === 'ready', 'second socket');
		expect(srv.framesOf('resume')).toHaveLength(1);
		// reconnect op: the client must not come back before retry_after_ms.
		const t0 = Date.now();
		srv.sendRaw(sess, { op: 'reconnect', reason: 'shutdown', retry_after_ms: 150 });
		srv.closeSocket(sess, 1001, 'going away');
		await srv.waitFor(() => srv.conns.length === 3 && h.gw.status === 'ready', 'third socket');
		expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
	});

	it('reconnectNow drops the socket and resumes at once', async () => {
		const h = connect({}, { minMs: 60_000, maxMs: 60_000 }); // a backoff far longer than the test
		await ready(h);
		h.gw.reconnectNow();
		await srv.waitFor(() => srv.framesOf('resume').length === 1 && h.gw.status === 'ready', 'resumed');
		expect(srv.conns).toHaveLength(2);
	});

	it('re-sends presence_sub after a fresh identify, and after a resume only when the server may lack it', async () => {
		srv.heartbeatMs = 40;
		const h = connect({}, { minMs: 60_000, maxMs: 60_000 });
		h.gw.presenceSub(['U2']);
		await ready(h);
		const subs = () => srv.conns.map((c) => c.frames.filter((f) => f.op === 'presence_sub').map((f) => f.user_ids));
		await srv.waitFor(() => subs()[0].length === 1, 'the presence_sub');
		expect(subs()).toEqual([[['U2']]]);
		// Confirmed by the ack of a later heartbeat: the resumed session keeps it.
		const confirmed = () => !(h.gw as unknown as { presenceInFlight: boolean }).presenceInFlight;
		await srv.waitFor(confirmed, 'a heartbeat acked after the presence_sub');
		h.gw.reconnectNow();
		await srv.waitFor(() => srv.framesOf('resume').length === 1 && h.gw.status === 'ready', 'resumed');
		expect(subs()).toEqual([[['U2']], []]);
		// Changed while no socket was live: sent on resume.
		h.gw.reconnectNow();
		h.gw.presenceSub(['U2', 'U3']);
		await srv.waitFor(() => srv.framesOf('resume').length === 2 && h.gw.status === 'ready' && subs()[2]?.length === 1, 'resumed again');
		expect(subs()).toEqual([[['U2']], [], [['U2', 'U3']]]);
		// Written, but the socket died before a heartbeat confirmed it: sent again.
		await srv.waitFor(confirmed, 'confirmed');
		h.gw.presenceSub(['U4']);
		h.gw.reconnectNow();
		await srv.waitFor(() => srv.framesOf('resume').length === 3 && h.gw.status === 'ready' && subs()[3]?.length === 1, 'resumed a third time');
		expect(subs()[2]).toEqual([['U2', 'U3'], ['U4']]);
		expect(subs()[3]).toEqual([['U4']]);
		// A new session watches nobody: always sent after identify.
		await srv.waitFor(confirmed, 'confirmed');
		srv.resumeMode = 'invalid';
		h.gw.reconnectNow();
		await srv.waitFor(() => srv.framesOf('identify').length === 2 && h.gw.status === 'ready' && subs()[4]?.length === 1, 'identified afresh');
		expect(subs()).toHaveLength(5);
		expect(subs()[4]).toEqual([['U4']]);
	});

	it('treats a socket silent for two heartbeat intervals as dead', async () => {
		srv.heartbeatMs = 40;
		const h = connect({});
		await ready(h);
		// Make the server deaf: it stops acking (and sending anything).
		const sess = srv.session();
		sess.conn!.ws.removeAllListeners('message');
		await srv.waitFor(() => h.gw.stats.heartbeatTimeouts === 1 && srv.framesOf('resume').length === 1, 'resume after silence');
	});

	it('gives up on a socket that opens but never says hello', async () => {
		srv.heartbeatMs = 40;
		const h = connect({}, { minMs: 5, maxMs: 20 });
		await ready(h);
		srv.mute = 1; // the next socket hangs after the upgrade
		srv.dropSocket(srv.session());
		await srv.waitFor(() => srv.framesOf('resume').length === 1 && h.gw.status === 'ready', 'resume on a third socket');
		expect(srv.conns).toHaveLength(3);
	});
});

describe('backoff', () => {
	it('stays within [cap/2, cap] with an exponential cap bounded by max', () => {
		let prevCap = 0;
		for (let n = 1; n <= 40; n++) {
			const cap = Math.min(30000, 250 * 2 ** (n - 1));
			const lo = backoffDelay(n, 250, 30000, () => 0);
			const hi = backoffDelay(n, 250, 30000, () => 0.999999);
			expect(lo).toBe(cap / 2);
			expect(hi).toBeLessThanOrEqual(cap);
			expect(hi).toBeGreaterThan(cap * 0.99);
			expect(cap).toBeGreaterThanOrEqual(prevCap);
			prevCap = cap;
		}
		expect(backoffDelay(1000, 250, 30000, () => 0.5)).toBeLessThanOrEqual(30000);
	});

	it('spreads delays: different random draws give different delays', () => {
		const seen = new Set([0.1, 0.3, 0.5, 0.7, 0.9].map((r) => backoffDelay(5, 250, 30000, () => r)));
		expect(seen.size).toBe(5);
	});

	it('adds jitter after retry_after_ms, never less than asked', () => {
		expect(retryAfterDelay(2750, () => 0)).toBe(2750);
		const hi = retryAfterDelay(2750, () => 0.999999);
		expect(hi).toBeGreaterThan(2750);
		expect(hi).toBeLessThanOrEqual(2750 + 1375 + 1);
		expect(retryAfterDelay(0, () => 0.5)).toBe(500);
	});
});
