// Session.applyEvent cost per message.created into a loaded channel, on
// screen (the window grows) and in the background (the window is capped).
// Run: cd web && npx vitest bench --run client/test/session.bench.ts
import { bench, describe } from 'vitest';
import { Session } from '../src/session';
import type { ParleyEvent } from '../src/types';

function session(active: boolean): Session {
	const s = new Session({ baseUrl: 'http://127.0.0.1:9' });
	(s as unknown as { s: Session['state'] }).s = {
		...s.state,
		self: { id: 'U1', name: 'Me', handle: 'me', title: '', avatar_hash: '', created_at: '', updated_at: '' },
		activeChannelId: active ? 'C1' : undefined,
		channelsById: {
			C1: {
				id: 'C1',
				name: 'general',
				kind: 'public',
				topic: '',
				member_count: 2,
				last_seq: 0,
				last_read_seq: 0,
				unread_count: 0,
				mention_count: 0,
				updated_at: '',
				is_member: true,
			},
		},
		messages: { C1: { messages: [], hasOlder: false, hasNewer: false, loading: false, loaded: true } },
	};
	return s;
}

function created(i: number): ParleyEvent {
	return {
		t: 'message.created',
		source: 'live',
		d: {
			channel_id: 'C1',
			seq: i,
			message: {
				id: `M${i}`,
				workspace_id: 'W',
				channel_id: 'C1',
				seq: i,
				user_id: 'U2',
				text: 'hello there',
				created_at: '2026-01-01T00:00:00Z',
				reply_count: 0,
				pinned: false,
				reactions: [],
			},
		},
	};
}

for (const n of [1000, 5000]) {
	describe(`${n} message.created events`, () => {
		bench(
			'channel on screen',
			() => {
				const s = session(true);
				s.setVisible(false); // no read-marker timers
				for (let i = 1; i <= n; i++) s.applyEvent(created(i));
				s.stop();
			},
			{ iterations: 5, warmupIterations: 1 },
		);
		bench(
			'channel in the background',
			() => {
				const s = session(false);
				for (let i = 1; i <= n; i++) s.applyEvent(created(i));
				s.stop();
			},
			{ iterations: 5, warmupIterations: 1 },
		);
	});
}
