// The library against a real parley binary (SQLite, embedded NATS): two
// users in one workspace, live delivery into Session state, unread and
// mention counts, lazy user resolution, and a server restart in the middle
// of a conversation with nothing lost.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Api } from '../src/api';
import { Session, type SessionState } from '../src/session';
import type { WebSocketCtor } from '../src/gateway';
import { ParleyServer, newUser } from '../../e2e/harness';

let server: ParleyServer;

beforeAll(async () => {
	server = new ParleyServer();
	await server.start();
}, 60_000);

afterAll(async () => {
	await server?.dispose();
});

/** Resolves when the session's state satisfies cond (checked on every change). */
function until(s: Session, cond: (st: SessionState) => boolean, what: string, timeoutMs = 15_000): Promise<SessionState> {
	return new Promise((resolve, reject) => {
		let unsub: (() => void) | undefined;
		const timer = setTimeout(() => {
			unsub?.();
			const msgs = Object.values(s.state.messages).map((l) => l.messages.map((m) => `${m.seq}:${m.text}${m.pending ? '(pending)' : ''}`).join(', '));
			reject(
				new Error(
					`timed out waiting for ${what}; status ${s.state.status}; messages ${msgs.join(' | ')}; stats ${JSON.stringify(s.gateway?.stats)}\n${server.logTail().split('\n').slice(-15).join('\n')}`,
				),
			);
		}, timeoutMs);
		let done = false;
		unsub = s.subscribe((st) => {
			if (done || !cond(st)) return;
			done = true;
			clearTimeout(timer);
			queueMicrotask(() => unsub?.());
			resolve(st);
		});
	});
}

/** An Api whose requests are counted by path (the real fetch does the work). */
function countingApi(counts: Map<string, number>): Api {
	return new Api({
		baseUrl: server.url,
		fetch: (input, init) => {
			const path = new URL(String(input)).pathname;
			counts.set(path, (counts.get(path) ?? 0) + 1);
			return fetch(input, init);
		},
	});
}

async function twoUsers() {
	const a = newUser('alice');
	const b = newUser('bob');
	const alice = new Api({ baseUrl: server.url });
	const bobApi = new Api({ baseUrl: server.url });
	await alice.signup(a);
	const bobAuth = await bobApi.signup(b);
	const ws = await alice.createWorkspace('Integration', `int-${a.handle.slice(5)}`);
	const inv = await alice.createInvite(ws.id);
	await bobApi.acceptInvite(inv.code);
	const boot = await alice.boot({ workspace_id: ws.id });
	const general = boot.channels.find((c) => c.name === 'general')!;
	return { a, b, alice, bobApi, bobAuth, ws, general };
}

function newSession(api: Api): Session {
	return new Session({
		api,
		WebSocket: WebSocket as unknown as WebSocketCtor,
		gateway: { backoffMinMs: 50, backoffMaxMs: 500, log: process.env.GWLOG ? (...a: unknown[]) => console.log(...a) : undefined },
	});
}

describe('Session against a real server', () => {
	it('reads and sets the email notification preference', async () => {
		const api = new Api({ baseUrl: server.url });
		await api.signup(newUser('mailer'));
		const got = await api.notifyPrefs();
		expect([got.mode, got.interval_seconds, got.intervals, got.email_enabled]).toEqual(['on', 900, [900, 3600, 86400], false]);
		const set = await api.setNotifyPrefs({ interval_seconds: 3600 });
		expect([set.mode, set.interval_seconds]).toEqual(['on', 3600]);
		await api.setNotifyPrefs({ mode: 'off' });
		expect((await api.notifyPrefs()).mode).toBe('off');
		await expect(api.setNotifyPrefs({ interval_seconds: 5 })).rejects.toMatchObject({ status: 400, code: 'bad_request' });
	});

	it('delivers messages live, counts unread and mentions, notifies, resolves users lazily', async () => {
		const { a, b, alice, bobAuth, ws, general } = await twoUsers();
		const counts = new Map<string, number>();
		const api = countingApi(counts);
		api.setToken(bobAuth.token);
		const bob = newSession(api);
		const notes: string[] = [];
		bob.on('event', (e) => process.env.GWLOG && console.log('EV', e.t, e.source, e.d.seq));
		bob.on('notify', (n) => notes.push(`${n.kind}:${n.message.text}`));
		const aliceId = (await alice.me()).id;
		const aliceSession = newSession(alice);
		try {
			// Presence asked for before the gateway exists is subscribed once it does.
			bob.setPresenceView([aliceId]);
			await bob.start(ws.id);
			await until(bob, (s) => s.status === 'ready', 'ready');
			await until(bob, (s) => s.presence[aliceId] === 'offline', 'alice offline');
			await aliceSession.start(ws.id);
			await until(bob, (s) => s.presence[aliceId] === 'online', 'alice online');
			expect(bob.state.channels.map((c) => c.name)).toContain('general');
			// The whole user list is never fetched.
			expect(counts.get(`/api/v1/workspaces/${ws.id}/users`) ?? 0).toBe(0);

			await alice.postMessage(general.id, { text: 'hello everyone', client_msg_id: 'c1' });
			await alice.postMessage(general.id, { text: `hey @${b.handle}, look`, client_msg_id: 'c2' });
			const st = await until(bob, (s) => s.channelsById[general.id]?.unread_count === 2, 'two unread');
			expect(st.channelsById[general.id].mention_count).toBe(1);
			expect(notes).toEqual([`mention:hey @${b.handle}, look`]);
			// Alice came with the event (just-in-time users): no lookup needed.
			expect(st.users[aliceId]?.handle).toBe(a.handle);

			// Opening the channel loads history and clears the counts on the server too.
			await bob.openChannel(general.id);
			const opened = await until(bob, (s) => s.channelsById[general.id].unread_count === 0 && (s.messages[general.id]?.messages.length ?? 0) >= 2, 'read');
			expect(opened.messages[general.id].messages.map((m) => m.text).slice(-2)).toEqual(['hello everyone', `hey @${b.handle}, look`]);
			await expect.poll(async () => (await api.boot({ workspace_id: ws.id })).channels.find((c) => c.id === general.id)?.unread_count).toBe(0);

			// Lookups of many ids in one tick become one deduplicated batch call;
			// ids the server does not know are not asked for again.
			const fresh = newSession(api);
			const before = counts.get('/api/v1/users/batch') ?? 0;
			const selfId = bob.state.self!.id;
			const unknown = 'U0000000000000000000000000';
			await Promise.all([fresh.ensureUsers([aliceId, unknown]), fresh.ensureUsers([aliceId]), fresh.ensureUsers([selfId, aliceId])]);
			expect((counts.get('/api/v1/users/batch') ?? 0) - before).toBe(1);
			expect(fresh.state.users[aliceId]?.handle).toBe(a.handle);
			expect(fresh.state.users[selfId]?.handle).toBe(b.handle);
			await fresh.ensureUsers([aliceId, unknown]);
			expect(fresh.user(aliceId)?.id).toBe(aliceId);
			expect((counts.get('/api/v1/users/batch') ?? 0) - before).toBe(1);
		} finally {
			bob.stop();
			aliceSession.stop();
		}
	});

	it('follows threads: replies, unread summary, thread list, read', async () => {
		const { a, b, alice: aliceApi, bobApi, ws, general } = await twoUsers();
		const counts = new Map<string, number>();
		const alice = countingApi(counts);
		alice.setToken(aliceApi.getToken());
		const session = newSession(alice);
		const notes: string[] = [];
		session.on('notify', (n) => notes.push(`${n.kind}:${n.message.text}`));
		try {
			await session.start(ws.id);
			await until(session, (s) => s.status === 'ready', 'ready');
			await session.loadThreads(false);
			await session.openChannel(general.id);
			const root = await session.send(general.id, 'a question for the thread');
			await session.openThread(root.id);
			await bobApi.postMessage(general.id, { text: `an answer for @${a.handle}`, client_msg_id: 'r1', thread_root_id: root.id });
			await bobApi.postMessage(general.id, { text: 'and more', client_msg_id: 'r2', thread_root_id: root.id });
			// The thread panel is open but the user looks at it: the replies arrive, no notification.
			let st = await until(session, (s) => (s.replies[root.id]?.messages.length ?? 0) === 2, 'two replies');
			expect(st.replies[root.id].messages.map((m) => m.text)).toEqual([`an answer for @${a.handle}`, 'and more']);
			st = await until(session, (s) => s.messages[general.id].messages.find((m) => m.id === root.id)?.reply_count === 2, 'reply count 2');
			// Replies count in the thread, not the channel (collapsed threads).
			expect(st.channelsById[general.id].unread_count).toBe(0);
			expect(notes).toEqual([]);
			// The sender's own reply counts once, whichever copy lands first.
			await session.send(general.id, 'my own reply', root.id);
			st = await until(session, (s) => s.replies[root.id].messages.filter((m) => !m.pending).length === 3, 'own reply');
			await until(session, (s) => s.messages[general.id].messages.find((m) => m.id === root.id)?.reply_count === 3, 'reply count 3');

			// Away from the thread: the next mention notifies and counts.
			session.closeThread();
			session.closeChannel();
			await bobApi.postMessage(general.id, { text: `@${a.handle} ping`, client_msg_id: 'r3', thread_root_id: root.id });
			st = await until(
				session,
				(s) => s.threadsSummary.unread_threads === 1 && s.threads.items.some((t) => t.root_id === root.id && t.unread_replies > 0),
				'unread thread',
			);
			await until(session, () => notes.length === 1, 'notified');
			expect(notes).toEqual([`mention:@${a.handle} ping`]);
			expect(st.threadsSummary.unread_mentions).toBeGreaterThanOrEqual(1);
			// The server agrees.
			const boot = await alice.boot({ workspace_id: ws.id });
			expect(boot.threads?.unread_threads).toBe(1);

			const rootNow = session.state.messages[general.id].messages.find((m) => m.id === root.id)!;
			expect(rootNow.reply_count).toBe(4);
			expect((await alice.getMessage(root.id)).reply_count).toBe(4);
			await session.markThreadRead(root.id);
			st = await until(session, (s) => s.threadsSummary.unread_threads === 0 && s.threadsSummary.unread_mentions === 0, 'read');
			expect(st.threads.items.find((t) => t.root_id === root.id)?.unread_replies).toBe(0);
			expect((await alice.boot({ workspace_id: ws.id })).threads?.unread_threads).toBe(0);
			// Marking a read thread read again costs nothing.
			const reads = () => counts.get(`/api/v1/threads/${root.id}/read`) ?? 0;
			const n = reads();
			await session.markThreadRead(root.id);
			await session.markThreadRead(root.id);
			expect(reads()).toBe(n);
			expect(b.handle).toBeTruthy();
		} finally {
			session.stop();
		}
	});

	it('keeps a conversation whole across a server restart', async () => {
		const { alice, bobApi, bobAuth, ws, general } = await twoUsers();
		const random = await alice.createChannel(ws.id, { name: 'random', kind: 'public' });
		await bobApi.joinChannel(random.id);
		const api = new Api({ baseUrl: server.url, token: bobAuth.token });
		const bob = newSession(api);
		bob.on('event', (e) => process.env.GWLOG && console.log('EV', e.t, e.source, e.d.seq));
		try {
			await bob.start(ws.id);
			await bob.openChannel(general.id);
			await until(bob, (s) => s.status === 'ready', 'ready');
			await alice.postMessage(general.id, { text: 'before 1', client_msg_id: 'b1' });
			await bob.send(general.id, 'before 2 (bob)');
			await until(bob, (s) => s.messages[general.id].messages.filter((m) => !m.pending).length === 2, 'two before');

			// A graceful restart: the gateway asks clients to come back, the
			// sessions die with the process, so bob identifies afresh and
			// catches up with /sync what was posted in between.
			const statuses: string[] = [];
			const off = bob.subscribe((s) => statuses.push(s.status));
			await server.restart();
			for (let i = 1; i <= 3; i++) await alice.postMessage(general.id, { text: `during ${i}`, client_msg_id: `d${i}` });
			await alice.postMessage(random.id, { text: 'elsewhere 1', client_msg_id: 'r1' });
			await alice.postMessage(random.id, { text: 'elsewhere 2', client_msg_id: 'r2' });
			await until(bob, (s) => s.status === 'ready' && s.messages[general.id].messages.length === 5, 'caught up after restart', 30_000);
			expect(statuses).toContain('reconnecting');
			// Unread counts from the new boot and the catch-up are not added up twice.
			await until(bob, (s) => s.channelsById[random.id]?.unread_count === 2, 'two unread in #random');
			expect(bob.state.channelsById[random.id].unread_count).toBe(2);
			off();
			// And a crash: no goodbye at all.
			await server.restart({ kill: true });
			await alice.postMessage(general.id, { text: 'after crash', client_msg_id: 'a1' });
			await until(bob, (s) => s.status === 'ready' && s.messages[general.id].messages.length === 6, 'caught up after crash', 40_000);
			await bob.send(general.id, 'still here (bob)');
			const done = await until(bob, (s) => s.messages[general.id].messages.filter((m) => !m.pending).length === 7, 'seven', 15_000);
			const texts = done.messages[general.id].messages.map((m) => m.text);
			expect(texts).toEqual(['before 1', 'before 2 (bob)', 'during 1', 'during 2', 'during 3', 'after crash', 'still here (bob)']);
			const seqs = done.messages[general.id].messages.map((m) => m.seq);
			expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
			expect(bob.gateway!.stats.catchUps).toBeGreaterThanOrEqual(2);
			expect(done.channelsById[random.id].unread_count).toBe(2);
			// Same as the server's history.
			const hist = await api.listMessages(general.id, { limit: 50 });
			expect(hist.messages.map((m) => m.text)).toEqual(texts);
		} finally {
			bob.stop();
		}
	}, 120_000);

	it('pins, renames and archives live for the other member; sets the own profile and status', async () => {
		const { alice, bobAuth, ws } = await twoUsers();
		const bobApi = new Api({ baseUrl: server.url, token: bobAuth.token });
		const ch = await alice.createChannel(ws.id, { name: 'ops', kind: 'public' });
		await bobApi.joinChannel(ch.id);
		const m = await bobApi.postMessage(ch.id, { text: 'pin me', client_msg_id: 'p1' });
		const aliceS = newSession(alice);
		const bob = newSession(bobApi);
		try {
			await Promise.all([aliceS.start(ws.id), bob.start(ws.id)]);
			await Promise.all([aliceS.openChannel(ch.id), bob.openChannel(ch.id)]);
			await until(bob, (s) => s.status === 'ready' && !!s.messages[ch.id]?.loaded, 'bob ready');
			await until(aliceS, (s) => s.status === 'ready', 'alice ready');

			// Alice pins: her copy at once, Bob's by pin.added; and back.
			await aliceS.pin(m.id, true);
			expect(aliceS.state.messages[ch.id].messages.find((x) => x.id === m.id)?.pinned).toBe(true);
			await until(bob, (s) => !!s.messages[ch.id].messages.find((x) => x.id === m.id)?.pinned, 'pinned for bob');
			expect((await bobApi.listPins(ch.id)).messages.map((x) => x.id)).toEqual([m.id]);
			await aliceS.pin(m.id, false);
			await until(bob, (s) => s.messages[ch.id].messages.find((x) => x.id === m.id)?.pinned === false, 'unpinned for bob');

			// Only the creator (or an admin) renames; a member's try is refused.
			await expect(bob.updateChannel(ch.id, { name: 'bobs' })).rejects.toMatchObject({ status: 403 });
			await aliceS.updateChannel(ch.id, { name: 'ops-room', purpose: 'Launch operations' });
			expect(aliceS.state.channelsById[ch.id].name).toBe('ops-room');
			await until(bob, (s) => s.channelsById[ch.id]?.name === 'ops-room', 'renamed for bob');
			expect(bob.state.channels.map((c) => c.name)).toContain('ops-room');

			await expect(bob.archiveChannel(ch.id)).rejects.toMatchObject({ status: 403 });
			await aliceS.archiveChannel(ch.id);
			expect(aliceS.state.channelsById[ch.id].archived_at).toBeTruthy();
			await until(bob, (s) => !!s.channelsById[ch.id]?.archived_at, 'archived for bob');
			await expect(bobApi.postMessage(ch.id, { text: 'too late', client_msg_id: 'p2' })).rejects.toMatchObject({ status: 409 });

			// The own profile and status: the answer updates self and the cache.
			const until1h = new Date(Date.now() + 3600_000).toISOString();
			await bob.setStatus('bus', 'Commuting', until1h);
			expect(bob.state.self?.status).toMatchObject({ emoji: 'bus', text: 'Commuting' });
			expect(Date.parse(bob.state.self!.status!.expires_at!)).toBe(Date.parse(until1h));
			expect(bob.state.users[bob.state.self!.id].status?.text).toBe('Commuting');
			await bob.updateProfile({ title: 'Launch lead' });
			expect(bob.state.self?.title).toBe('Launch lead');
			expect(bob.state.self?.status?.text).toBe('Commuting');
			await bob.setStatus('', '');
			expect(bob.state.self?.status).toBeUndefined();
		} finally {
			aliceS.stop();
			bob.stop();
		}
	}, 60_000);
});
