// The library's file calls against a real parley binary (SQLite, files in
// its data directory): a small upload, a resumable one that survives a
// failed chunk, attaching to a message, and a signed download with its
// headers.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, RESUMABLE_OVER } from '../src/api';
import { ParleyServer, newUser } from '../../e2e/harness';

let server: ParleyServer;

beforeAll(async () => {
	server = new ParleyServer();
	await server.start();
}, 60_000);

afterAll(async () => {
	await server?.dispose();
});

async function signUp(api: Api, prefix: string) {
	const u = newUser(prefix);
	return api.signup({ email: u.email, password: u.password, name: u.name, handle: u.handle });
}

describe('files against a real server', () => {
	it('uploads, resumes after a failed chunk, attaches and downloads', async () => {
		// Alice's fetch fails her first chunk in transit, as a dropped connection would.
		let failed = false;
		const alice = new Api({
			baseUrl: server.url,
			fetch: (input, init) => {
				if (!failed && init?.method === 'PUT' && String(input).includes('/uploads/')) {
					failed = true;
					return Promise.reject(new TypeError('network down'));
				}
				return fetch(input, init);
			},
		});
		const bob = new Api({ baseUrl: server.url });
		await signUp(alice, 'alice');
		const b = await signUp(bob, 'bob');
		const ws = await alice.createWorkspace('Files', `files-${Date.now().toString(36)}`);
		const invite = await alice.createInvite(ws.id);
		await bob.acceptInvite(invite.code);
		const ch = await alice.createChannel(ws.id, { name: 'drop', kind: 'public' });
		await bob.joinChannel(ch.id);

		const small = await alice.uploadFile(ws.id, new Blob(['plain words']), 'notes.txt');
		expect([small.name, small.size, small.content_type]).toEqual(['notes.txt', 11, 'text/plain; charset=utf-8']);

		const big = new Uint8Array(RESUMABLE_OVER + 1000);
		for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
		const seen: number[] = [];
		const file = await alice.uploadFile(ws.id, new Blob([big]), 'big.bin', (n) => seen.push(n));
		expect(failed).toBe(true);
		expect(file.size).toBe(big.length);
		expect(seen.at(-1)).toBe(big.length);

		const m = await alice.postMessage(ch.id, { text: '', client_msg_id: `f-${Date.now()}`, file_ids: [small.id, file.id] });
		expect(m.files?.map((f) => f.id)).toEqual([small.id, file.id]);

		const signed = await bob.getFile(file.id);
		expect(signed.url).toMatch(/sig=/);
		const res = await fetch(bob.fileUrl(signed.url!));
		expect(res.status).toBe(200);
		expect(res.headers.get('content-type')).toBe('application/octet-stream');
		expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="?big\.bin/);
		expect(res.headers.get('x-content-type-options')).toBe('nosniff');
		expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(big))).toBe(true); // not toEqual: 8 MB element by element

		const page = await bob.listChannelFiles(ch.id);
		expect(page.files.map((f) => f.id)).toEqual([file.id, small.id]);
		expect(b.user.id).not.toBe(file.user_id);
	}, 60_000);
});
