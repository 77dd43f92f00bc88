import { describe, expect, it } from 'vitest';
import { Ephemerals, forPlace, parseCommand } from './ephemeral.svelte';

describe('parseCommand', () => {
	it('splits a slash command from its text', () => {
		expect(parseCommand('/deploy api staging')).toEqual({ name: 'deploy', args: 'api staging' });
		expect(parseCommand('  /ME waves')).toEqual({ name: 'me', args: 'waves' });
		expect(parseCommand('/leave')).toEqual({ name: 'leave', args: '' });
		expect(parseCommand('/shrug\nmultiple lines')).toEqual({ name: 'shrug', args: 'multiple lines' });
	});
	it('leaves other text to be sent as a message', () => {
		for (const t of ['hello', '//not a command', '/', 'a /b', '/path/to/file', '/name-that-is-far-too-long-to-be-a-command-name']) {
			expect(parseCommand(t)).toBeNull();
		}
	});
});

describe('Ephemerals', () => {
	const msg = (id: string, ch = 'C1') => ({ id, channel_id: ch, user_id: 'U1', text: id, created_at: '2026-11-25T00:00:00Z' });
	it('keeps each message once, whether it came by event or by answer', () => {
		const e = new Ephemerals();
		e.add(msg('E1'));
		e.apply({ t: 'message.ephemeral', d: { message: msg('E1') } as never, source: 'live' });
		e.apply({ t: 'message.ephemeral', d: { message: msg('E2') } as never, source: 'live' });
		e.apply({ t: 'message.created', d: { message: msg('M1') } as never, source: 'live' });
		expect(e.byChannel.C1.map((m) => m.id)).toEqual(['E1', 'E2']);
		e.dismiss('C1', 'E1');
		expect(e.byChannel.C1.map((m) => m.id)).toEqual(['E2']);
	});
	it("splits a channel's messages between the channel and its threads", () => {
		const e = new Ephemerals();
		e.add(msg('E1'));
		e.add({ ...msg('E2'), thread_root_id: 'M1' });
		e.add({ ...msg('E3'), thread_root_id: 'M2' });
		e.notice('C1', 'failed here', 'M1');
		e.notice('C1', 'failed in the channel');
		expect(forPlace(e.byChannel.C1).map((m) => m.text)).toEqual(['E1', 'failed in the channel']);
		expect(forPlace(e.byChannel.C1, 'M1').map((m) => m.text)).toEqual(['E2', 'failed here']);
		expect(forPlace(e.byChannel.C1, 'M2').map((m) => m.id)).toEqual(['E3']);
		expect(forPlace(undefined, 'M1')).toEqual([]);
	});
});
