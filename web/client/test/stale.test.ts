// Cached windows of channels that are not on screen (issue 14): a root
// whose replies, edits, reactions and deletions arrive while the user looks
// at another channel shows them when the user comes back, with no reload.

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
	member_count: 2,
	last_seq: last,
	last_read_seq: last,
	unread_count: 0,
	mention_count: 0,
	updated_at: '',
});

async function started(): Promise<{ s: Session; fs: FakeSession }> {
	srv.bootAnswer = () => ({
		self: fakeUser('U1', 'me'),
		workspace: { id: 'W1', name: 'W', slug: 'w' },
		channels: [chan('C1', 'general', srv.log.get('C1')?.at(-1)?.seq ?? 0), chan('C2', 'other', srv.log.get('C2')?.at(-1)?.seq ?? 0)],
		dms: [],
		ws_url: srv.url.replace(/^http/, 'ws') + '/api/v1/gateway',
		prefs: null,
	});
	const s = new Session({ baseUrl: srv.url, token: 'T', WebSocket: WebSocket as never, gateway: { backoffMinMs: 10, backoffMaxMs: 20 } });
	sess = s;
	s.on('error', () => {});
	await s.start('W1');
	await until(() => s.state.status === 'ready', 'ready');
	return { s, fs: srv.session() };
}

const thread = (rootId: string, reply_count: number, last_reply_at: string, unread: number) => ({
	root_id: rootId,
	workspace_id: 'W1',
	channel_id: 'C1',
	reply_count,
	last_reply_at,
	participants: reply_count ? ['U2'] : [],
	following: true,
	last_viewed_at: '2026-01-01T00:00:00Z',
	unread_replies: unread,
	unread_mentions: 0,
});

describe('a channel off screen', () => {
	it('keeps its cached roots current: reply count and last reply, edits, reactions, deletions', async () => {
		const root = srv.appendMessage('C1', 'who has the keys?', 'U1').d.message!;
		const edited = srv.appendMessage('C1', 'first', 'U2').d.message!;
		const gone = srv.appendMessage('C1', 'take this back', 'U2').d.message!;
		const { s, fs } = await started();
		let reads = 0;
		s.on('event', (e) => void (e.t === 'thread.read' && reads++));
		await s.openChannel('C1');
		expect(s.state.messages.C1.messages.map((m) => m.text)).toEqual(['who has the keys?', 'first', 'take this back']);
		await s.openChannel('C2');

		// While C2 is on screen: a reply (message.created and the follower's
		// thread.updated), an edit, a reaction and a deletion in C1.
		const reply = srv.appendMessage('C1', 'I do', 'U2', root.id);
		srv.sendEntry(fs, reply);
		const at = reply.d.message!.created_at;
		srv.sendEvent(fs, 'thread.updated', { thread: thread(root.id, 1, at, 1), message: reply.d.message });
		srv.sendEntry(fs, srv.append('C1', 'message.updated', { message: { ...edited, text: 'first (edited)', edited_at: at } }));
		srv.sendEntry(fs, srv.append('C1', 'reaction.added', { message_id: edited.id, emoji: 'tada', user_id: 'U2' }));
		srv.sendEntry(fs, srv.append('C1', 'message.deleted', { message_id: gone.id, user_id: 'U2' }));
		await until(() => s.state.channelsById.C1.last_seq === 7, 'C1 events applied');
		const shown = () => s.state.messages.C1.messages;
		expect(shown().find((m) => m.id === root.id)).toMatchObject({ reply_count: 1, last_reply_at: at });

		// Reading the channel elsewhere clears the thread's unread replies: the
		// thread.read of an older server carries no count, which changes nothing.
		const readAt = new Date(Date.parse(at) + 1000).toISOString();
		srv.sendEvent(fs, 'thread.read', { thread: { ...thread(root.id, 0, '0001-01-01T00:00:00Z', 0), last_viewed_at: readAt } });
		await until(() => reads === 1, 'thread.read applied');
		expect(shown().find((m) => m.id === root.id)).toMatchObject({ reply_count: 1, last_reply_at: at });
		expect(s.state.threadsSummary.unread_threads).toBe(0);

		// Back in C1: the cached window shows it all, and is not loaded again.
		const pages = srv.requestsTo('/api/v1/channels/C1/messages').length;
		await s.openChannel('C1');
		expect(srv.requestsTo('/api/v1/channels/C1/messages').length).toBe(pages);
		expect(shown().map((m) => [m.text, m.reply_count])).toEqual([
			['who has the keys?', 1],
			['first (edited)', 0],
		]);
		expect(shown()[1].reactions).toEqual([{ emoji: 'tada', count: 1, me: false }]);
	});

	it('ignores a read made before a reply it already counted (events on two topics arrive out of order)', async () => {
		const root = srv.appendMessage('C1', 'who has the keys?', 'U1').d.message!;
		const { s, fs } = await started();
		let reads = 0;
		s.on('event', (e) => void (e.t === 'thread.read' && reads++));
		const reply = srv.appendMessage('C1', 'I do', 'U2', root.id);
		srv.sendEntry(fs, reply);
		const at = reply.d.message!.created_at;
		srv.sendEvent(fs, 'thread.updated', { thread: thread(root.id, 1, at, 1), message: reply.d.message });
		await until(() => s.state.threadsSummary.unread_threads === 1, 'the reply counted');

		// The user read the channel on another device just before the reply:
		// that read's event arrives now, after the reply's.
		const readBefore = new Date(Date.parse(at) - 1).toISOString();
		srv.sendEvent(fs, 'thread.read', { thread: { ...thread(root.id, 0, at, 0), last_viewed_at: readBefore } });
		await until(() => reads === 1, 'thread.read delivered');
		expect(s.state.threadsSummary.unread_threads).toBe(1);

		// So marking the thread read still asks the server.
		await s.markThreadRead(root.id);
		expect(srv.requestsTo(`/api/v1/threads/${root.id}/read`)).toHaveLength(1);
	});
});
