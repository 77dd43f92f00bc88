import { describe, expect, it } from 'vitest';
import { Session, mentions, typingKey } from '../src/session';
import type { Message, ParleyEvent } from '../src/types';

function msg(p: Partial<Message>): Message {
	return { id: 'M1', workspace_id: 'W', channel_id: 'C1', seq: 1, user_id: 'U2', text: '', created_at: '2026-01-01T00:00:00Z', reply_count: 0, pinned: false, reactions: [], ...p };
}

const ev = (t: string, d: ParleyEvent['d']): ParleyEvent => ({ t, d, source: 'live' });

describe('mentions', () => {
	it('finds @handle and the broadcast mentions, not lookalikes', () => {
		expect(mentions('hi @bob', 'bob')).toBe(true);
		expect(mentions('hi @Bob.', 'bob')).toBe(true);
		expect(mentions('@bob: look', 'bob')).toBe(true);
		expect(mentions('hi @bobby', 'bob')).toBe(false);
		expect(mentions('mail bob@bob.com', 'bob')).toBe(false);
		expect(mentions('@here standup', 'bob')).toBe(true);
		expect(mentions('@channel', undefined)).toBe(true);
		expect(mentions('nothing', 'bob')).toBe(false);
	});

	it('keys typing by channel and thread', () => {
		expect(typingKey('C1')).toBe('C1');
		expect(typingKey('C1', 'M1')).toBe('C1/M1');
	});
});

describe('Session.applyEvent', () => {
	function session(): Session {
		const s = new Session({ baseUrl: 'http://127.0.0.1:9' });
		// A state as after boot and a loaded channel (what start/openChannel build).
		(s as unknown as { s: Session['state'] }).s = {
			...s.state,
			self: { id: 'U1', name: 'Me', handle: 'me', title: '', avatar_hash: '', created_at: '', updated_at: '' },
			channelsById: {
				C1: { id: 'C1', name: 'general', kind: 'public', topic: '', member_count: 2, last_seq: 3, last_read_seq: 3, unread_count: 0, mention_count: 0, updated_at: '', is_member: true },
			},
			messages: { C1: { messages: [msg({ id: 'M1', seq: 3, reactions: [{ emoji: 'tada', count: 1, me: true }] })], hasOlder: false, hasNewer: false, loading: false, loaded: true } },
		};
		return s;
	}

	it('keeps the caller\'s own reactions when an event copy says me=false', () => {
		const s = session();
		s.applyEvent(ev('reaction.added', { channel_id: 'C1', seq: 4, message_id: 'M1', emoji: 'tada', user_id: 'U2' }));
		expect(s.state.messages.C1.messages[0].reactions).toEqual([{ emoji: 'tada', count: 2, me: true }]);
		s.applyEvent(ev('reaction.added', { channel_id: 'C1', seq: 5, message_id: 'M1', emoji: 'thumbsup', user_id: 'U1' }));
		s.applyEvent(ev('message.updated', { channel_id: 'C1', seq: 6, message: msg({ id: 'M1', seq: 3, text: 'edited', reactions: [{ emoji: 'tada', count: 2, me: false }, { emoji: 'thumbsup', count: 1, me: false }] }) }));
		const m = s.state.messages.C1.messages[0];
		expect(m.text).toBe('edited');
		expect(m.reactions).toEqual([{ emoji: 'tada', count: 2, me: true }, { emoji: 'thumbsup', count: 1, me: true }]);
		s.applyEvent(ev('reaction.removed', { channel_id: 'C1', seq: 7, message_id: 'M1', emoji: 'thumbsup', user_id: 'U1' }));
		expect(s.state.messages.C1.messages[0].reactions).toEqual([{ emoji: 'tada', count: 2, me: true }]);
		expect(s.state.channelsById.C1.last_seq).toBe(7);
	});

	it('counts unread and mentions for others\' top-level messages only, and publishes new snapshots', () => {
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

	it('tracks presence and typing, and a message clears its author\'s typing', () => {
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
