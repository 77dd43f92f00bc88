// The outbox (issue 14): messages written while the server cannot be
// reached are sent again by themselves when the connection is back, in
// order and once each (same client_msg_id, which the server dedupes); a
// message refused for good stays failed with its reason; a reload sends
// what the previous page left unsent.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Api } from '../src/api';
import type { OutboxStorage } from '../src/outbox';
import { Session } from '../src/session';
import { FakeParley, fakeUser, until } from './fakeserver';

let srv: FakeParley;
const sessions: Session[] = [];

beforeEach(async () => {
	srv = new FakeParley();
	await srv.start();
});

afterEach(async () => {
	for (const s of sessions.splice(0)) s.stop();
	await srv.stop();
});

/** A Storage in memory (what localStorage is to the outbox). */
class MemoryStorage implements OutboxStorage {
	readonly data = new Map<string, string>();
	getItem(k: string) {
		return this.data.get(k) ?? null;
	}
	setItem(k: string, v: string) {
		this.data.set(k, v);
	}
	removeItem(k: string) {
		this.data.delete(k);
	}
}

const chan = (id: string) => ({
	id,
	name: id.toLowerCase(),
	kind: 'public',
	topic: '',
	member_count: 2,
	last_seq: srv.log.get(id)?.at(-1)?.seq ?? 0,
	last_read_seq: srv.log.get(id)?.at(-1)?.seq ?? 0,
	unread_count: 0,
	mention_count: 0,
	updated_at: '',
});

/** A started session of U1 with C1 open; its Api does not retry on its own (the outbox does). */
async function started(storage: OutboxStorage | null = null): Promise<Session> {
	srv.bootAnswer = () => ({
		self: fakeUser('U1', 'me'),
		workspace: { id: 'W1', name: 'W', slug: 'w' },
		channels: [chan('C1')],
		dms: [],
		ws_url: srv.url.replace(/^http/, 'ws') + '/api/v1/gateway',
		prefs: null,
	});
	const s = new Session({
		api: new Api({ baseUrl: srv.url, token: 'T', retries: 0 }),
		WebSocket: WebSocket as never,
		storage,
		gateway: { backoffMinMs: 10, backoffMaxMs: 50 },
	});
	sessions.push(s);
	s.on('error', () => {});
	await s.start('W1');
	await until(() => s.state.status === 'ready', 'ready', 8000);
	await s.openChannel('C1');
	return s;
}

/** The texts the server has in C1, in seq order. */
const posted = () => (srv.log.get('C1') ?? []).flatMap((e) => (e.t === 'message.created' ? [e.d.message!.text] : []));
const postsOf = () => srv.requestsTo('/api/v1/channels/C1/messages').filter((r) => r.method === 'POST');
const shown = (s: Session) =>
	s.state.messages.C1.messages.map((m) => `${m.text}${m.pending ? ' (pending)' : ''}${m.failed ? (m.queued ? ' (queued)' : ' (failed)') : ''}`);

describe('the outbox', () => {
	it('sends what was written offline when the connection is back: in order, once each', async () => {
		const s = await started();
		srv.offline = true;
		const sent = [s.send('C1', 'one'), s.send('C1', 'two'), s.send('C1', 'three')];
		await until(() => shown(s).every((x) => x.endsWith('(queued)')) && shown(s).length === 3, 'all three queued', 8000);
		expect(shown(s)).toEqual(['one (queued)', 'two (queued)', 'three (queued)']);
		expect(s.state.messages.C1.messages[0].error).toBe('No connection');
		expect(posted()).toEqual([]);

		srv.offline = false;
		s.online(); // the page's online event
		const msgs = await Promise.all(sent);
		expect(posted()).toEqual(['one', 'two', 'three']);
		expect(msgs.map((m) => m.seq)).toEqual([1, 2, 3]);
		expect(shown(s)).toEqual(['one', 'two', 'three']);
		// Tries again used the same client_msg_id: three ids in all.
		expect(new Set(postsOf().map((r) => (r.body as { client_msg_id: string }).client_msg_id)).size).toBe(3);
	});

	it('sends again with the same client_msg_id when an answer is lost: the server has it once', async () => {
		const s = await started();
		srv.loseAnswers = 1;
		const m = await s.send('C1', 'only once');
		expect(posted()).toEqual(['only once']);
		const posts = postsOf();
		expect(posts.length).toBe(2);
		expect((posts[0].body as { client_msg_id: string }).client_msg_id).toBe((posts[1].body as { client_msg_id: string }).client_msg_id);
		expect(m.seq).toBe(1);
		expect(shown(s)).toEqual(['only once']);
	});

	it('keeps a message refused for good failed with its reason; the ones after it still go; Retry sends it', async () => {
		const s = await started();
		srv.failNext.set('/api/v1/channels/C1/messages', [403]);
		const refused = s.send('C1', 'not allowed');
		const after = s.send('C1', 'fine');
		await expect(refused).rejects.toMatchObject({ status: 403 });
		await after;
		expect(posted()).toEqual(['fine']);
		await until(() => shown(s).join() === 'fine,not allowed (failed)', 'refused one failed', 8000);
		const failed = s.state.messages.C1.messages.find((m) => m.failed)!;
		expect(failed.error).toMatch(/403/);
		// No timer sends it again by itself.
		await new Promise((r) => setTimeout(r, 1200));
		expect(posted()).toEqual(['fine']);

		await s.resend(failed);
		expect(posted()).toEqual(['fine', 'not allowed']);
		expect(shown(s)).toEqual(['fine', 'not allowed']);
	});

	it('retries a 503 and a 429 by itself, in order', async () => {
		const s = await started();
		srv.failNext.set('/api/v1/channels/C1/messages', [503, 429]);
		await Promise.all([s.send('C1', 'a'), s.send('C1', 'b')]);
		expect(posted()).toEqual(['a', 'b']);
	});

	it('survives a reload: the next page shows and sends what was left unsent', async () => {
		const storage = new MemoryStorage();
		const first = await started(storage);
		srv.offline = true;
		void first.send('C1', 'written before the reload').catch(() => {});
		void first.send('C1', 'and this one').catch(() => {});
		await until(() => shown(first).length === 2 && shown(first).every((x) => x.endsWith('(queued)')), 'queued', 8000);
		expect([...storage.data.keys()]).toEqual(['parley.outbox.U1.W1']);
		first.stop();

		srv.offline = false;
		const second = await started(storage);
		await until(() => posted().length === 2, 'both sent', 8000);
		expect(posted()).toEqual(['written before the reload', 'and this one']);
		await until(() => shown(second).join() === 'written before the reload,and this one', 'shown once, confirmed', 8000);
		expect(second.state.messages.C1.messages.map((m) => m.seq)).toEqual([1, 2]);
		expect(storage.data.size).toBe(0);
	});

	it('starts with unreadable storage, and keeps working when storage refuses writes', async () => {
		const storage = new MemoryStorage();
		storage.setItem('parley.outbox.U1.W1', '{not json');
		const s = await started(storage);
		storage.setItem = () => {
			throw new DOMException('full', 'QuotaExceededError');
		};
		await s.send('C1', 'still sent');
		expect(posted()).toEqual(['still sent']);
	});
});
