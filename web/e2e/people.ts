// Seeding for the specs of issue 14 (threads-stale, drafts, outbox): people
// signed up over the HTTP API, a workspace with both in it, and a browser
// page opened as one of them (a stored token, as after a log-in).
import { expect, type Page } from '@playwright/test';
import type { ParleyServer, newUser as NewUser } from './harness';
import { api } from './seed';

export { api };

export interface Member {
	id: string;
	token: string;
	/** This person's HTTP calls. */
	call<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
}

export interface Pair {
	ws: string;
	wsName: string;
	general: string;
	/** A second channel both are in. */
	other: string;
	alice: Member;
	bob: Member;
}

async function signUp(server: ParleyServer, newUser: typeof NewUser, prefix: string, name: string): Promise<Member> {
	const u = newUser(prefix);
	const r = await api<{ token: string; user: { id: string } }>(server.url, null, 'POST', '/auth/signup', {
		email: u.email,
		password: u.password,
		name,
		handle: u.handle,
	});
	return { id: r.user.id, token: r.token, call: (method, path, body) => api(server.url, r.token, method, path, body) };
}

/** Alice's workspace with Bob in it (by invite), its #general and a second channel #other. */
export async function pair(server: ParleyServer, newUser: typeof NewUser, wsName: string): Promise<Pair> {
	const alice = await signUp(server, newUser, 'alice', 'Alice Moreau');
	const bob = await signUp(server, newUser, 'bob', 'Bob Okafor');
	const ws = await alice.call<{ id: string }>('POST', '/workspaces', { name: wsName, slug: `p-${alice.id.slice(-12).toLowerCase()}` });
	const invite = await alice.call<{ code: string }>('POST', `/workspaces/${ws.id}/invites`, {});
	await bob.call('POST', `/invites/${invite.code}/accept`);
	const boot = await alice.call<{ channels: { id: string; name: string }[] }>('POST', '/boot', { workspace_id: ws.id });
	const general = boot.channels.find((c) => c.name === 'general')!.id;
	const other = await alice.call<{ id: string }>('POST', `/workspaces/${ws.id}/channels`, { name: 'other', kind: 'public' });
	await bob.call('POST', `/channels/${general}/join`).catch(() => undefined);
	await bob.call('POST', `/channels/${other.id}/join`);
	return { ws: ws.id, wsName, general, other: other.id, alice, bob };
}

/** Open the app as this member in the pair's workspace. */
export async function openAs(page: Page, m: Member, p: Pair): Promise<void> {
	await page.goto('/');
	await page.evaluate(
		([t, w]) => {
			localStorage.setItem('parley.token', t);
			localStorage.setItem('parley.workspace', w);
		},
		[m.token, p.ws],
	);
	await page.reload();
	await expect(page.getByTestId('workspace-name')).toHaveText(p.wsName);
}

/** The row in the channel's message list whose text contains `text`. */
export const message = (page: Page, text: string) => page.getByTestId('message-list').getByTestId('message').filter({ hasText: text });
