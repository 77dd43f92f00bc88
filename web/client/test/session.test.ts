import { describe, expect, it } from 'vitest';
import { Session } from '../src/session';
import type { Message, ParleyEvent } from '../src/types';

function msg(p: Partial<Message>): Message {
	return {
		id: 'M1',
		workspace_id: 'W',
		channel_id: 'C1',
		seq: 1,
		user_id: 'U2',
		text: '',
		created_at: '2026-01-01T00:00:00Z',
		reply_count: 0,
		pinned: false,
		reactions: [],
		...p,
	};
}

const ev = (t: string, d: ParleyEvent['d']): ParleyEvent => ({ t, d, source: 'live' });

describe('Session.applyEvent', () => {
	function session(): Session {
		const s = new Session({ baseUrl: 'http://127.0.0.1:9' });
		// A state as after boot and a loaded channel (what start/openChannel build).
		(s as unknown as { s: Session['state'] }).s = {
			...s.state,
			self: { id: 'U1', name: 'Me', handle: 'me', title: '', avatar_hash: '', created_at: '', updated_at: '' },
			channelsById: {
				C1: {
					id: 'C1',
					name: 'general',
					kind: 'public',
					topic: '',
					member_count: 2,
					last_seq: 3,
					last_read_seq: 3,
					unread_count: 0,
					mention_count: 0,
					updated_at: '',
					is_member: true,
				},
			},
			messages: {
				C1: {
					messages: [msg({ id: 'M1', seq: 3, reactions: [{ emoji: 'tada', count: 1, me: true }] })],
					hasOlder: false,
					hasNewer: false,
					loading: false,
					loaded: true,
				},
			},
		};
		return s;
	}

	it("keeps the caller's own reactions when an event copy says me=false", () => {
		const s = session();
		s.applyEvent(ev('reaction.added', { channel_id: 'C1', seq: 4, message_id: 'M1', emoji: 'tada', user_id: 'U2' }));
		expect(s.state.messages.C1.messages[0].reactions).toEqual([{ emoji: 'tada', count: 2, me: true }]);
		s.applyEvent(ev('reaction.added', { channel_id: 'C1', seq: 5, message_id: 'M1', emoji: 'thumbsup', user_id: 'U1' }));
		s.applyEvent(
			ev('message.updated', {
				channel_id: 'C1',
				seq: 6,
				message: msg({
					id: 'M1',
					seq: 3,
					text: 'edited',
					reactions: [
						{ emoji: 'tada', count: 2, me: false },
						{ emoji: 'thumbsup', count: 1, me: false },
					],
				}),
			}),
		);
		const m = s.state.messages.C1.messages[0];
		expect(m.text).toBe('edited');
		expect(m.reactions).toEqual([
			{ emoji: 'tada', count: 2, me: true },
			{ emoji: 'thumbsup', count: 1, me: true },
		]);
		s.applyEvent(ev('reaction.removed', { channel_id: 'C1', seq: 7, message_id: 'M1', emoji: 'thumbsup', user_id: 'U1' }));
		expect(s.state.messages.C1.messages[0].reactions).toEqual([{ emoji: 'tada', count: 2, me: true }]);
		expect(s.state.channelsById.C1.last_seq).toBe(7);
	});

	it("counts unread and mentions for others' top-level messages only, and publishes new snapshots", () => {
		const s = session();
		const seen: unknown[] = [];
		s.subscribe((st) => seen.push(st));
		const before = s.state;
		s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 4, message: msg({ id: 'M4', seq: 4, text: 'hi @me' }) }));
		s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 5, message: msg({ id: 'M5', seq: 5, text: 'mine', user_id: 'U1' }) }));
		s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 6, message: msg({ id: 'M6', seq: 6, text: 'reply', thread_root_id: 'M1' }) }));
		s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 4, message: msg({ id: 'M4', seq: 4, text: 'hi @me' }) }));
		const c = s.state.channelsById.C1;
		expect([c.unread_count, c.mention_count]).toEqual([1, 1]);
		expect(s.state.messages.C1.messages.map((m) => m.id)).toEqual(['M1', 'M4', 'M5']);
		expect(s.state.messages.C1.messages[0].reply_count).toBe(1);
		expect(s.state).not.toBe(before);
		expect(before.messages.C1.messages.map((m) => m.id)).toEqual(['M1']); // snapshots are not mutated
		s.applyEvent(ev('channel.read', { channel_id: 'C1', last_read_seq: 6 }));
		expect([s.state.channelsById.C1.unread_count, s.state.channelsById.C1.mention_count]).toEqual([0, 0]);
		s.applyEvent(ev('message.deleted', { channel_id: 'C1', seq: 7, message_id: 'M4' }));
		expect(s.state.messages.C1.messages.map((m) => m.id)).toEqual(['M1', 'M5']);
	});

	it('counts @here only when the server says the user was active (its mention event)', () => {
		const s = session();
		const here = msg({ id: 'M4', seq: 4, text: 'deploy in 5 @here' });
		s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 4, message: here }));
		expect([s.state.channelsById.C1.unread_count, s.state.channelsById.C1.mention_count]).toEqual([1, 0]);
		s.applyEvent(ev('mention', { channel_id: 'C1', message: here }));
		expect(s.state.channelsById.C1.mention_count).toBe(1);
		// @channel and a named mention count from the message itself; their
		// mention event adds nothing.
		const all = msg({ id: 'M5', seq: 5, text: '@channel and @here' });
		s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 5, message: all }));
		s.applyEvent(ev('mention', { channel_id: 'C1', message: all }));
		expect(s.state.channelsById.C1.mention_count).toBe(2);
		// An @here already read is not counted again.
		s.applyEvent(ev('channel.read', { channel_id: 'C1', last_read_seq: 5 }));
		s.applyEvent(ev('mention', { channel_id: 'C1', message: here }));
		expect(s.state.channelsById.C1.mention_count).toBe(0);
	});

	it("tracks presence and typing, and a message clears its author's typing", () => {
		const s = session();
		s.applyEvent(ev('presence.changed', { user_id: 'U2', presence: 'away' }));
		expect(s.state.presence.U2).toBe('away');
		s.applyEvent(ev('typing.started', { channel_id: 'C1', user_id: 'U2' }));
		expect(s.state.typing.C1.map((t) => t.userId)).toEqual(['U2']);
		s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 4, message: msg({ id: 'M4', seq: 4 }) }));
		expect(s.state.typing.C1).toEqual([]);
		s.stop();
	});
});

describe('Session.ensureUsers', () => {
	it('batches one tick into one call, and callers during the call wait for it', async () => {
		const { FakeParley, fakeUser } = await import('./fakeserver');
		const srv = new FakeParley();
		await srv.start();
		try {
			srv.users.set('U2', fakeUser('U2', 'bob'));
			srv.users.set('U3', fakeUser('U3', 'carol'));
			const s = new Session({ baseUrl: srv.url, token: 'T' });
			const first = s.ensureUsers(['U2', 'U3', 'U2']);
			const same = s.ensureUsers(['U3', 'NOPE']);
			await srv.waitFor(() => srv.requestsTo('/api/v1/users/batch').length === 1, 'batch call');
			// The call is out: a new caller for an id in flight waits for it, with no new call.
			const during = s.ensureUsers(['U2']);
			await Promise.all([first, same, during]);
			expect(srv.requestsTo('/api/v1/users/batch')).toHaveLength(1);
			expect((srv.requestsTo('/api/v1/users/batch')[0].body as { ids: string[] }).ids.sort()).toEqual(['NOPE', 'U2', 'U3']);
			expect(s.state.users.U2.handle).toBe('bob');
			expect(s.state.users.U3.handle).toBe('carol');
			// Known and unknown ids are not asked for again.
			await s.ensureUsers(['U2', 'U3', 'NOPE']);
			expect(s.user('U3')?.handle).toBe('carol');
			expect(srv.requestsTo('/api/v1/users/batch')).toHaveLength(1);
			s.stop();
		} finally {
			await srv.stop();
		}
	});
});

describe('Session.loadLatest', () => {
	it('keeps a message that arrives live while the first page is on its way', async () => {
		const { FakeParley } = await import('./fakeserver');
		const srv = new FakeParley();
		await srv.start();
		try {
			srv.appendMessage('C1', 'one');
			const s = new Session({ baseUrl: srv.url, token: 'T' });
			(s as unknown as { s: Session['state'] }).s = {
				...s.state,
				self: { id: 'U1', name: 'Me', handle: 'me', title: '', avatar_hash: '', created_at: '', updated_at: '' },
				channelsById: {
					C1: {
						id: 'C1',
						name: 'general',
						kind: 'public',
						topic: '',
						member_count: 2,
						last_seq: 1,
						last_read_seq: 1,
						unread_count: 0,
						mention_count: 0,
						updated_at: '',
						is_member: true,
					},
				},
			};
			srv.holdMessages = true;
			const loading = s.loadLatest('C1');
			await srv.waitFor(() => srv.requestsTo('/api/v1/channels/C1/messages').length === 1, 'page requested');
			// The page is taken; a new message is committed and delivered before the answer lands.
			const e2 = srv.appendMessage('C1', 'two');
			s.applyEvent({ t: e2.t, d: e2.d, source: 'live' });
			srv.releaseMessages();
			await loading;
			expect(s.state.messages.C1.messages.map((m) => m.text)).toEqual(['one', 'two']);
			// A deletion while a reload is out is not undone by a page taken before it.
			srv.holdMessages = true;
			const reloading = s.loadLatest('C1');
			await srv.waitFor(() => srv.requestsTo('/api/v1/channels/C1/messages').length === 2, 'second page requested');
			s.applyEvent({ t: 'message.deleted', d: { channel_id: 'C1', seq: 3, message_id: 'MC1-1' }, source: 'live' });
			srv.releaseMessages();
			await reloading;
			expect(s.state.messages.C1.messages.map((m) => m.text)).toEqual(['two']);
			s.stop();
		} finally {
			await srv.stop();
		}
	});
});

describe('Session.start', () => {
	it('keeps messages posted between the one-channel-first boot and the full boot', async () => {
		const { FakeParley, fakeUser } = await import('./fakeserver');
		const { WebSocket } = await import('ws');
		const srv = new FakeParley();
		await srv.start();
		try {
			const one = srv.appendMessage('C1', 'one');
			const two = srv.appendMessage('C1', 'two');
			const chan = (last: number) => ({
				id: 'C1',
				name: 'general',
				kind: 'public',
				topic: '',
				member_count: 2,
				last_seq: last,
				last_read_seq: last,
				unread_count: 0,
				mention_count: 0,
				updated_at: '',
			});
			const base = {
				self: fakeUser('U1', 'me'),
				workspace: { id: 'W1', name: 'W', slug: 'w' },
				dms: [],
				ws_url: srv.url.replace(/^http/, 'ws') + '/api/v1/gateway',
				prefs: null,
			};
			// The one-channel boot was answered before "two" was posted; the full boot after.
			srv.bootAnswer = (q) => (q.channel_id ? { ...base, channels: [chan(1)], messages: [one.d.message] } : { ...base, channels: [chan(2)] });
			const s = new Session({ baseUrl: srv.url, token: 'T', WebSocket: WebSocket as never });
			await s.start('W1', { channelId: 'C1' });
			const t0 = Date.now();
			while (s.state.status !== 'ready' && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 10));
			expect(s.state.status).toBe('ready');
			await s.gateway!.idle();
			expect(s.state.messages.C1.messages.map((m) => m.text)).toEqual(['one', 'two']);
			expect(s.state.channelsById.C1.unread_count).toBe(0);
			expect(two.seq).toBe(2);
			s.stop();
		} finally {
			await srv.stop();
		}
	});
});

/** Polls cond (client-side state) until it holds, failing after a deadline. */
async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
	const t0 = Date.now();
	while (!cond()) {
		if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
		await new Promise((r) => setTimeout(r, 10));
	}
}

describe('Session page signals', () => {
	it('counts messages on screen as unread while the page is hidden, and reads them once it shows', async () => {
		const { FakeParley } = await import('./fakeserver');
		const srv = new FakeParley();
		await srv.start();
		try {
			const s = new Session({ baseUrl: srv.url, token: 'T' });
			(s as unknown as { s: Session['state'] }).s = {
				...s.state,
				self: { id: 'U1', name: 'Me', handle: 'me', title: '', avatar_hash: '', created_at: '', updated_at: '' },
				activeChannelId: 'C1',
				channelsById: {
					C1: {
						id: 'C1',
						name: 'general',
						kind: 'public',
						topic: '',
						member_count: 2,
						last_seq: 3,
						last_read_seq: 3,
						unread_count: 0,
						mention_count: 0,
						updated_at: '',
						is_member: true,
					},
				},
				messages: { C1: { messages: [], hasOlder: false, hasNewer: false, loading: false, loaded: true } },
			};
			s.setVisible(false);
			s.applyEvent(ev('message.created', { channel_id: 'C1', seq: 4, message: msg({ id: 'M4', seq: 4, text: 'hi @me' }) }));
			expect([s.state.channelsById.C1.unread_count, s.state.channelsById.C1.mention_count]).toEqual([1, 1]);
			s.setVisible(true);
			await srv.waitFor(() => srv.requestsTo('/api/v1/channels/C1/read').length === 1, 'read marker');
			expect((srv.requestsTo('/api/v1/channels/C1/read')[0].body as { seq: number }).seq).toBe(4);
			expect([s.state.channelsById.C1.unread_count, s.state.channelsById.C1.mention_count]).toEqual([0, 0]);
			s.stop();
		} finally {
			await srv.stop();
		}
	});

	it('reconnects at once when told the network is back, instead of waiting out the backoff', async () => {
		const { FakeParley, fakeUser } = await import('./fakeserver');
		const { WebSocket } = await import('ws');
		const srv = new FakeParley();
		await srv.start();
		try {
			srv.bootAnswer = () => ({
				self: fakeUser('U1', 'me'),
				workspace: { id: 'W1', name: 'W', slug: 'w' },
				channels: [],
				dms: [],
				ws_url: srv.url.replace(/^http/, 'ws') + '/api/v1/gateway',
				prefs: null,
			});
			// A backoff far longer than the test.
			const s = new Session({ baseUrl: srv.url, token: 'T', WebSocket: WebSocket as never, gateway: { backoffMinMs: 60_000, backoffMaxMs: 60_000 } });
			await s.start('W1');
			await until(() => s.state.status === 'ready', 'ready');
			srv.closeSocket(srv.session(), 4009, 'too slow');
			await until(() => s.state.status === 'reconnecting', 'reconnecting');
			s.online();
			await until(() => s.state.status === 'ready' && srv.conns.length === 2, 'back at once');
			expect(srv.framesOf('resume')).toHaveLength(1);
			s.stop();
		} finally {
			await srv.stop();
		}
	});
});

describe('Session view set', () => {
	it('keeps presence_sub equal to the users on screen, and fetches again a user back in view or after a fresh identify', async () => {
		const { FakeParley, fakeUser } = await import('./fakeserver');
		const { WebSocket } = await import('ws');
		const srv = new FakeParley();
		await srv.start();
		try {
			const bob = fakeUser('U2', 'bob');
			const carol = fakeUser('U3', 'carol');
			srv.users.set('U2', bob);
			srv.users.set('U3', carol);
			srv.bootAnswer = () => ({
				self: fakeUser('U1', 'me'),
				workspace: { id: 'W1', name: 'W', slug: 'w' },
				channels: [],
				dms: [],
				users: [bob, carol],
				ws_url: srv.url.replace(/^http/, 'ws') + '/api/v1/gateway',
				prefs: null,
			});
			const s = new Session({
				baseUrl: srv.url,
				token: 'T',
				WebSocket: WebSocket as never,
				viewSet: { delayMs: 10, minIntervalMs: 10, freshMs: 60_000 },
				gateway: { backoffMinMs: 10, backoffMaxMs: 20 },
			});
			const subs = () => srv.framesOf('presence_sub').map((f) => f.user_ids);
			const batches = () => srv.requestsTo('/api/v1/users/batch').map((r) => (r.body as { ids: string[] }).ids);
			// Reported before the gateway exists: sent on the first session.
			s.setViewUsers('messages', ['U2', 'U3']);
			await s.start('W1');
			await until(() => s.state.status === 'ready' && subs().length === 1, 'ready and subscribed');
			expect(subs()).toEqual([['U2', 'U3']]);
			const sess = srv.session();
			srv.sendEvent(sess, 'presence.changed', { user_id: 'U3', presence: 'online' });
			await until(() => s.state.presence.U3 === 'online', 'U3 online');

			// U3 leaves the screen: the set follows, and U3's presence is no longer known.
			s.setViewUsers('messages', ['U2']);
			await until(() => subs().length === 2, 'second presence_sub');
			expect(subs()[1]).toEqual(['U2']);
			expect(s.state.presence.U3).toBeUndefined();
			// Meanwhile U3 changes; the session is not told.
			srv.users.set('U3', { ...carol, name: 'Carol L.', status: { emoji: 'tada', text: 'Shipped' }, updated_at: '2026-01-02T00:00:00Z' });
			// U2, in view, changes too: the event applies.
			srv.sendEvent(sess, 'user.status', { user: { ...bob, status: { emoji: 'eyes', text: 'Reading' }, updated_at: '2026-01-02T00:00:00Z' } });
			await until(() => s.state.users.U2?.status?.text === 'Reading', 'U2 status');
			expect(batches()).toEqual([]);

			// U3 back on screen: fetched again, fresh.
			s.setViewUsers('messages', ['U2', 'U3']);
			await until(() => s.state.users.U3?.name === 'Carol L.', 'U3 fetched again');
			expect(subs()[2]).toEqual(['U2', 'U3']);
			expect(batches()).toEqual([['U3']]);
			expect(s.state.users.U3.status?.text).toBe('Shipped');

			// A fresh identify (the old session is gone): the set goes to the
			// new session, and every user in view is fetched again.
			srv.resumeMode = 'invalid';
			srv.dropSocket(sess);
			await until(() => srv.framesOf('identify').length === 2 && subs().length === 4 && batches().length === 2, 'new session');
			expect(subs()[3]).toEqual(['U2', 'U3']);
			expect([...batches()[1]].sort()).toEqual(['U2', 'U3']);
			s.stop();
		} finally {
			await srv.stop();
		}
	});
});

describe('Session focus', () => {
	it("keeps the open channel and the open thread's channel in focus", async () => {
		const { FakeParley, fakeUser } = await import('./fakeserver');
		const { WebSocket } = await import('ws');
		const srv = new FakeParley();
		await srv.start();
		try {
			const chan = (id: string, name: string) => ({ id, name, kind: 'public', topic: '', member_count: 1, last_seq: 0, last_read_seq: 0, updated_at: '' });
			srv.bootAnswer = () => ({
				self: fakeUser('U1', 'me'),
				workspace: { id: 'W1', name: 'W', slug: 'w' },
				channels: [chan('C1', 'one'), chan('C2', 'two')],
				dms: [],
				ws_url: srv.url.replace(/^http/, 'ws') + '/api/v1/gateway',
				prefs: null,
			});
			const root = srv.appendMessage('C2', 'a root in two').d.message!;
			const s = new Session({ baseUrl: srv.url, token: 'T', WebSocket: WebSocket as never });
			await s.start('W1');
			await until(() => s.state.status === 'ready', 'ready');
			const focus = () => srv.framesOf('focus').map((f) => f.channel_ids);
			await s.openChannel('C1');
			await until(() => focus().length === 1, 'focus on one');
			// A thread of another channel opens beside it (e.g. from the Threads view).
			await s.openThread(root.id);
			await until(() => focus().length === 2, 'focus on the thread too');
			expect(focus()[1]).toEqual(['C1', 'C2']);
			s.closeChannel();
			await until(() => focus().length === 3, 'channel closed');
			expect(focus()[2]).toEqual(['C2']);
			s.closeThread();
			await until(() => focus().length === 4, 'thread closed');
			expect(focus()[3]).toEqual([]);
			s.stop();
		} finally {
			await srv.stop();
		}
	});
});
