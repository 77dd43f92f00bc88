// Seeding through the real HTTP API for the routes and keyboard specs: an
// account, a workspace, channels and messages, and a signed-in page.
import type { Page } from '@playwright/test';
import { newUser } from './harness';

export async function api<T>(base: string, token: string | null, method: string, path: string, body?: unknown): Promise<T> {
	const res = await fetch(`${base}/api/v1${path}`, {
		method,
		headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), 'Content-Type': 'application/json' },
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const text = await res.text();
	if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
	return (text ? JSON.parse(text) : undefined) as T;
}

export interface Account {
	token: string;
	id: string;
	name: string;
	email: string;
	password: string;
}

export async function account(base: string, prefix: string): Promise<Account> {
	const u = newUser(prefix);
	const r = await api<{ token: string; user: { id: string } }>(base, null, 'POST', '/auth/signup', {
		email: u.email,
		password: u.password,
		name: u.name,
		handle: u.handle,
	});
	return { token: r.token, id: r.user.id, name: u.name, email: u.email, password: u.password };
}

export interface Seeded {
	owner: Account;
	ws: { id: string; slug: string; name: string };
	general: { id: string };
}

/** An account and a workspace of its own (only #general, nothing said). */
export async function workspace(base: string, prefix: string): Promise<Seeded> {
	const owner = await account(base, prefix);
	const slug = `${prefix}-${owner.id.slice(-10).toLowerCase()}`;
	const ws = await api<{ id: string; slug: string; name: string }>(base, owner.token, 'POST', '/workspaces', { name: `${prefix} Co`, slug });
	const boot = await api<{ channels: { id: string; name: string }[] }>(base, owner.token, 'POST', '/boot', { workspace_id: ws.id });
	return { owner, ws, general: boot.channels.find((c) => c.name === 'general')! };
}

export const channel = (base: string, token: string, wsId: string, name: string) =>
	api<{ id: string; name: string }>(base, token, 'POST', `/workspaces/${wsId}/channels`, { name, kind: 'public' });

let n = 0;
export const post = (base: string, token: string, channelId: string, text: string, threadRootId?: string) =>
	api<{ id: string; seq: number }>(base, token, 'POST', `/channels/${channelId}/messages`, {
		text,
		client_msg_id: `seed-${Date.now()}-${n++}`,
		...(threadRootId ? { thread_root_id: threadRootId } : {}),
	});

/** Another account joined to the workspace through an invite. */
export async function member(base: string, s: Seeded, prefix: string): Promise<Account> {
	const a = await account(base, prefix);
	const inv = await api<{ code: string }>(base, s.owner.token, 'POST', `/workspaces/${s.ws.id}/invites`, {});
	await api(base, a.token, 'POST', `/invites/${inv.code}/accept`);
	return a;
}

/** Sign the page in with a token (the app reads it from localStorage), then open path. */
export async function signIn(page: Page, token: string, path = '/'): Promise<void> {
	await page.addInitScript((t) => {
		if (!localStorage.getItem('parley.token')) localStorage.setItem('parley.token', t);
	}, token);
	await page.goto(path);
}
