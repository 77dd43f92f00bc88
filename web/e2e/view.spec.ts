// Subscriptions, not broadcasts (issue 19), from the web client's side: a
// session hears about the profile and status changes of the users in its
// view only (presence_sub), so the client must keep that view equal to what
// is on screen and fetch again a user who comes back into view. Channels the
// user is not in come over HTTP (the channel browser), not as pushes.
//
// The other people act through the HTTP API (seeded like history.spec.ts);
// Alice is a real browser. Every wait is on a condition.
import type { Page, WebSocket as PwWebSocket } from '@playwright/test';
import { test, expect, watchPage } from './fixtures';
import type { ParleyServer, newUser as NewUser } from './harness';

type Person = ReturnType<typeof NewUser>;

async function api<T>(base: string, token: string | null, method: string, path: string, body?: unknown): Promise<T> {
	const res = await fetch(`${base}/api/v1${path}`, {
		method,
		headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), 'Content-Type': 'application/json' },
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const text = await res.text();
	if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
	return (text ? JSON.parse(text) : undefined) as T;
}

interface Member {
	id: string;
	token: string;
	name: string;
	/** This person's HTTP calls. */
	call<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
}

interface Team {
	ws: string;
	general: string;
	alice: Member;
	bob: Member;
	carol: Member;
}

async function signUp(server: ParleyServer, u: Person, name: string): Promise<Member> {
	const r = await api<{ token: string; user: { id: string } }>(server.url, null, 'POST', '/auth/signup', {
		email: u.email,
		password: u.password,
		name,
		handle: u.handle,
	});
	return { id: r.user.id, token: r.token, name, call: (method, path, body) => api(server.url, r.token, method, path, body) };
}

/** Alice's workspace with Bob and Carol in it (by invite), and its #general. */
async function team(server: ParleyServer, newUser: typeof NewUser): Promise<Team> {
	const alice = await signUp(server, newUser('alice'), 'Alice Moreau');
	const bob = await signUp(server, newUser('bob'), 'Bob Okafor');
	const carol = await signUp(server, newUser('carol'), 'Carol Lindqvist');
	const ws = await alice.call<{ id: string }>('POST', '/workspaces', {
		name: 'View Co',
		slug: `view-${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`,
	});
	const invite = await alice.call<{ code: string }>('POST', `/workspaces/${ws.id}/invites`, {});
	await bob.call('POST', `/invites/${invite.code}/accept`);
	await carol.call('POST', `/invites/${invite.code}/accept`);
	const boot = await alice.call<{ channels: { id: string; name: string }[] }>('POST', '/boot', { workspace_id: ws.id });
	const general = boot.channels.find((c) => c.name === 'general')!.id;
	for (const m of [bob, carol]) await m.call('POST', `/channels/${general}/join`).catch(() => undefined);
	return { ws: ws.id, general, alice, bob, carol };
}

let msgSeq = 0;
const post = (m: Member, channelId: string, text: string) =>
	m.call('POST', `/channels/${channelId}/messages`, { text, client_msg_id: `view-${Date.now()}-${msgSeq++}` });

/** Open the app as this member (a stored token, as after a log-in). */
async function openAs(page: Page, m: Member, ws: string) {
	await page.goto('/');
	await page.evaluate(
		([t, w]) => {
			localStorage.setItem('parley.token', t);
			localStorage.setItem('parley.workspace', w);
		},
		[m.token, ws],
	);
	await page.reload();
	await expect(page.getByTestId('workspace-name')).toHaveText('View Co');
}

/** The gateway frames of a page: what it sent and the events it received, in order. */
function frames(page: Page) {
	const sent: { at: number; f: { op: string; user_ids?: string[] } }[] = [];
	const got: { at: number; f: { op: string; t?: string; d?: { user?: { id: string }; user_id?: string } } }[] = [];
	let n = 0;
	page.on('websocket', (ws: PwWebSocket) => {
		if (!ws.url().includes('/gateway')) return;
		ws.on('framesent', (e) => sent.push({ at: n++, f: JSON.parse(String(e.payload)) }));
		ws.on('framereceived', (e) => got.push({ at: n++, f: JSON.parse(String(e.payload)) }));
	});
	return {
		sent,
		got,
		/** The view set as last sent. */
		view: () => sent.filter((s) => s.f.op === 'presence_sub').at(-1)?.f.user_ids ?? [],
		/** The position of the last presence_sub sent. */
		lastSub: () => sent.filter((s) => s.f.op === 'presence_sub').at(-1)?.at ?? -1,
		/** Profile and status events about a user received after a position. */
		aboutUser: (id: string, after: number) =>
			got.filter(
				(g) => g.at > after && g.f.op === 'event' && (g.f.t === 'user.status' || g.f.t === 'user.updated') && (g.f.d?.user?.id ?? g.f.d?.user_id) === id,
			),
	};
}

const message = (page: Page, text: string) => page.getByTestId('message-list').getByTestId('message').filter({ hasText: text });

test('a user in view renames themselves and sets a status: the other browser shows both without a reload', async ({ alice: page, server, newUser }) => {
	const problems = watchPage(page);
	const t = await team(server, newUser);
	const f = frames(page);
	await post(t.bob, t.general, 'Bob was here');
	await openAs(page, t.alice, t.ws);
	const row = message(page, 'Bob was here');
	await expect(row.getByTestId('message-author')).toHaveText('Bob Okafor');
	// Bob is in Alice's view once the (debounced) presence_sub says so.
	await expect.poll(() => f.view()).toContain(t.bob.id);

	await t.bob.call('PATCH', '/me', { name: 'Bob the Builder' });
	await t.bob.call('PUT', '/me/status', { emoji: 'rocket', text: 'Launching' });
	await expect(row.getByTestId('message-author')).toHaveText('Bob the Builder');
	await expect(row.getByTestId('author-status')).toHaveAttribute('data-status-text', 'Launching');
	// The profile shows the same, fresh.
	await row.getByTestId('message-author').click();
	await expect(page.getByTestId('profile-name')).toHaveText('Bob the Builder');
	await expect(page.getByTestId('profile-status')).toContainText('Launching');
	expect(problems).toEqual([]);
});

test('a user out of view changes status: when they come back into view the status shown is the fresh one', async ({ alice: page, server, newUser }) => {
	const problems = watchPage(page);
	const t = await team(server, newUser);
	const f = frames(page);
	const side = await t.alice.call<{ id: string }>('POST', `/workspaces/${t.ws}/channels`, { name: 'side', kind: 'public' });
	await t.carol.call('POST', `/channels/${side.id}/join`);
	await t.carol.call('PUT', '/me/status', { emoji: 'eyes', text: 'Reading' });
	await post(t.carol, side.id, 'Carol on the side');
	await post(t.alice, t.general, 'Alice in general');

	// Alice sees Carol in #side, then goes to #general, where Carol is nowhere.
	await openAs(page, t.alice, t.ws);
	await page.getByTestId('channel-side').click();
	const carolsRow = message(page, 'Carol on the side');
	await expect(carolsRow.getByTestId('author-status')).toHaveAttribute('data-status-text', 'Reading');
	await expect.poll(() => f.view()).toContain(t.carol.id);
	await page.getByTestId('channel-general').click();
	await expect(message(page, 'Alice in general')).toBeVisible();
	await expect.poll(() => f.view()).not.toContain(t.carol.id);

	// Out of view, Carol changes her status (no push needs to reach Alice);
	// then she is back on screen: the status shown is the new one.
	await t.carol.call('PUT', '/me/status', { emoji: 'tada', text: 'Shipped it' });
	await page.getByTestId('channel-side').click();
	await expect(carolsRow.getByTestId('author-status')).toHaveAttribute('data-status-text', 'Shipped it');

	// Again, and this time she comes into view by posting in #general, whose
	// message brings no copy of her (the session has had her before).
	await page.getByTestId('channel-general').click();
	await expect(message(page, 'Alice in general')).toBeVisible();
	await expect.poll(() => f.view()).not.toContain(t.carol.id);
	await t.carol.call('PUT', '/me/status', { emoji: 'fire', text: 'On call' });
	await t.carol.call('PATCH', '/me', { name: 'Carol L.' });
	await post(t.carol, t.general, 'Carol drops by');
	const drop = message(page, 'Carol drops by');
	await expect(drop.getByTestId('message-author')).toHaveText('Carol L.');
	await expect(drop.getByTestId('author-status')).toHaveAttribute('data-status-text', 'On call');
	await expect.poll(() => f.view()).toContain(t.carol.id);
	// Five screens (boot, #side, #general, #side, #general) and a new author:
	// a frame per change of view at most, never a storm.
	const subs = f.sent.filter((x) => x.f.op === 'presence_sub').length;
	console.log(`view.spec: ${subs} presence_sub frames for six changes of view, ${f.sent.length} frames sent in all`);
	expect(subs).toBeLessThanOrEqual(8);
	expect(problems).toEqual([]);
});

test('the channel browser lists a channel someone else created, with its member count; preview and join work', async ({ alice: page, server, newUser }) => {
	const problems = watchPage(page);
	const t = await team(server, newUser);
	await openAs(page, t.alice, t.ws);
	await expect(page.getByTestId('channel-title')).toContainText('general');

	// Bob creates a channel and Carol joins it while Alice's app is open.
	const corner = await t.bob.call<{ id: string }>('POST', `/workspaces/${t.ws}/channels`, { name: 'bobs-corner', kind: 'public', topic: 'Tea' });
	await t.carol.call('POST', `/channels/${corner.id}/join`);
	await post(t.carol, corner.id, 'Carol in the corner');
	await page.getByTestId('nav-browse').click();
	const item = page.locator('[data-testid="browse-channel"][data-channel-name="bobs-corner"]');
	await expect(item.getByTestId('browse-member-count')).toContainText('2 members');
	await expect(page.getByTestId('channel-bobs-corner')).toHaveCount(0); // not in the sidebar: Alice is not in it

	// Preview it, then join from the preview.
	await item.getByTestId('browse-view-channel').click();
	await expect(page.getByTestId('channel-title')).toContainText('bobs-corner');
	await expect(message(page, 'Carol in the corner')).toBeVisible();
	await expect(page.getByTestId('member-count')).toContainText('2');
	// While previewed (in focus) the channel is delivered live.
	await post(t.carol, corner.id, 'Live in the preview');
	await expect(message(page, 'Live in the preview')).toBeVisible();
	// Out of focus it is not: back in the preview, what came meanwhile is read over HTTP.
	await page.getByTestId('channel-general').click();
	await expect(page.getByTestId('channel-title')).toContainText('general');
	await post(t.carol, corner.id, 'While Alice was away');
	await page.getByTestId('nav-browse').click();
	await item.getByTestId('browse-view-channel').click();
	await expect(message(page, 'While Alice was away')).toBeVisible();
	await post(t.carol, corner.id, 'Live again');
	await expect(message(page, 'Live again')).toBeVisible();
	await expect(page.getByTestId('message-list').getByTestId('message')).toHaveCount(4);
	await page.getByTestId('join-channel').click();
	await expect(page.getByTestId('composer')).toBeVisible();
	await expect(page.getByTestId('channel-bobs-corner')).toBeVisible();
	await expect(page.getByTestId('member-count')).toContainText('3');
	await page.getByTestId('composer').fill('Alice joins the corner');
	await page.getByTestId('composer').press('Enter');
	await expect(message(page, 'Alice joins the corner')).not.toHaveAttribute('data-message-id', /^local:/);

	// Bob adds Alice to a private channel: it shows in her sidebar.
	const secret = await t.bob.call<{ id: string }>('POST', `/workspaces/${t.ws}/channels`, { name: 'secret-plans', kind: 'private' });
	await t.bob.call('POST', `/channels/${secret.id}/members`, { user_ids: [t.alice.id] });
	await expect(page.getByTestId('channel-secret-plans')).toBeVisible();
	// And a channel Alice creates herself shows at once.
	await page.getByTestId('create-channel').click();
	await page.getByTestId('channel-name-input').fill('alices-own');
	await page.getByTestId('channel-create-submit').click();
	await expect(page.getByTestId('channel-alices-own')).toBeVisible();
	expect(problems).toEqual([]);
});

test('a session with a user out of view receives none of their status or profile changes', async ({ alice: page, server, newUser }) => {
	const problems = watchPage(page);
	const t = await team(server, newUser);
	const f = frames(page);
	await post(t.bob, t.general, 'Bob stays in view');
	await openAs(page, t.alice, t.ws);
	await expect(message(page, 'Bob stays in view')).toBeVisible();
	await expect.poll(() => f.view()).toContain(t.bob.id);
	expect(f.view()).not.toContain(t.carol.id);
	const since = f.lastSub();

	// Carol is nowhere on Alice's screen: her changes must not reach Alice.
	await t.carol.call('PUT', '/me/status', { emoji: 'eyes', text: 'Unseen' });
	await t.carol.call('PATCH', '/me', { name: 'Carol Unseen' });
	// Bob, in view, changes after her: once his change is in, hers would be too.
	await t.bob.call('PUT', '/me/status', { emoji: 'rocket', text: 'Seen' });
	await expect.poll(() => f.aboutUser(t.bob.id, since).length).toBeGreaterThan(0);
	await expect(message(page, 'Bob stays in view').getByTestId('author-status')).toHaveAttribute('data-status-text', 'Seen');
	expect(f.lastSub()).toBe(since); // the view did not change meanwhile
	expect(f.aboutUser(t.carol.id, -1)).toEqual([]);
	expect(problems).toEqual([]);
});
