// Issue 14, item 6: pins, group DMs, channel settings (rename, archive,
// leave) and the profile menu's custom status, between two real browsers
// (Alice and Bob) on a real parley. The workspace is seeded over HTTP; every
// wait is on a condition.
import type { Page } from '@playwright/test';
import { test, expect, watchPage } from './fixtures';
import { countRequests, storms } from './budget';
import type { ParleyServer, newUser as NewUser } from './harness';
import { message } from './people';
import { api } from './seed';

type Person = ReturnType<typeof NewUser>;

interface Member {
	id: string;
	token: string;
	name: string;
	call<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
}

async function signUp(server: ParleyServer, u: Person, name: string): Promise<Member> {
	const r = await api<{ token: string; user: { id: string } }>(server.url, null, 'POST', '/auth/signup', { ...u, name });
	return { id: r.user.id, token: r.token, name, call: (method, path, body) => api(server.url, r.token, method, path, body) };
}

/** Alice's workspace (she owns it) with Bob and Carol in it, all in #general. */
async function team(server: ParleyServer, newUser: typeof NewUser) {
	const [alice, bob, carol] = await Promise.all([
		signUp(server, newUser('alice'), 'Alice Moreau'),
		signUp(server, newUser('bob'), 'Bob Okafor'),
		signUp(server, newUser('carol'), 'Carol Lindqvist'),
	]);
	const ws = await alice.call<{ id: string }>('POST', '/workspaces', {
		name: 'Features Co',
		slug: `feat-${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`,
	});
	const invite = await alice.call<{ code: string }>('POST', `/workspaces/${ws.id}/invites`, {});
	await Promise.all([bob, carol].map((m) => m.call('POST', `/invites/${invite.code}/accept`)));
	return { ws: ws.id, alice, bob, carol };
}

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
	await expect(page.getByTestId('workspace-name')).toHaveText('Features Co');
}

/** The presence_sub frames a page sent: the users it has in view. */
function viewOf(page: Page): () => string[] {
	let last: string[] = [];
	page.on('websocket', (ws) => {
		ws.on('framesent', (e) => {
			const f = JSON.parse(String(e.payload)) as { op: string; user_ids?: string[] };
			if (f.op === 'presence_sub') last = f.user_ids ?? [];
		});
	});
	return () => last;
}

async function send(page: Page, text: string) {
	await page.getByTestId('composer').fill(text);
	await page.getByTestId('composer').press('Enter');
	await expect(message(page, text)).not.toHaveAttribute('data-message-id', /^local:/);
}

test('pins, rename and archive reach the other browser live; the menu offers what the server allows; leaving', async ({
	alice,
	bob,
	server,
	newUser,
	shot,
}) => {
	const problems = [alice, bob].map(watchPage);
	const calls = [alice, bob].map(countRequests);
	const t = await team(server, newUser);
	const ops = await t.alice.call<{ id: string }>('POST', `/workspaces/${t.ws}/channels`, { name: 'ops', kind: 'public' });
	await t.bob.call('POST', `/channels/${ops.id}/join`);
	await t.bob.call('POST', `/channels/${ops.id}/messages`, { text: 'Ship it on Friday', client_msg_id: `f-${Date.now()}` });
	await Promise.all([openAs(alice, t.alice, t.ws), openAs(bob, t.bob, t.ws)]);
	for (const p of [alice, bob]) await p.getByTestId('channel-ops').click();

	// ---- Pins: Alice pins Bob's message; both see the marker and the count ----
	const row = message(alice, 'Ship it on Friday');
	await row.hover();
	await row.getByTestId('action-pin').click();
	for (const p of [alice, bob]) {
		await expect(message(p, 'Ship it on Friday')).toHaveAttribute('data-pinned', 'true');
		await expect(message(p, 'Ship it on Friday').getByTestId('pinned-mark')).toBeVisible();
		await expect(p.getByTestId('pins-button')).toHaveAttribute('data-count', '1');
	}
	// Bob's pins list has it; a click jumps to (flashes) the message.
	await bob.getByTestId('pins-button').click();
	await expect(bob.getByTestId('pin-item')).toHaveCount(1);
	await expect(bob.getByTestId('pin-item')).toContainText('Ship it on Friday');
	await bob.getByTestId('pin-item').click();
	await expect(message(bob, 'Ship it on Friday')).toHaveClass(/flash/);
	// A second pin shows in Bob's open list live.
	await send(alice, 'Budget is 40k');
	await message(alice, 'Budget is 40k').hover();
	await message(alice, 'Budget is 40k').getByTestId('action-pin').click();
	await expect(bob.getByTestId('pin-item')).toHaveCount(2);
	await expect(bob.getByTestId('pins-button')).toHaveAttribute('data-count', '2');
	await shot(bob, 'features-pins');
	// Unpinning from the list takes it away for both.
	await bob.getByTestId('pin-item').filter({ hasText: 'Budget' }).locator('..').getByTestId('pin-remove').click();
	await expect(bob.getByTestId('pin-item')).toHaveCount(1);
	await expect(alice.getByTestId('pins-button')).toHaveAttribute('data-count', '1');
	await expect(message(alice, 'Budget is 40k')).not.toHaveAttribute('data-pinned', 'true');
	await bob.getByTestId('close-panel').click();

	// ---- The menu: Bob (a member, not the creator) may not rename or archive ----
	await bob.getByTestId('channel-menu').click();
	await expect(bob.getByTestId('menu-leave')).toBeVisible();
	await expect(bob.getByTestId('menu-channel-settings')).toHaveText(/Edit topic and purpose/);
	await expect(bob.getByTestId('menu-archive')).toHaveCount(0);
	await shot(bob, 'features-channel-menu-member');
	await bob.keyboard.press('Escape');

	// ---- Rename: the server's refusal shows; then Alice's rename reaches Bob ----
	await alice.getByTestId('channel-menu').click();
	await alice.getByTestId('menu-channel-settings').click();
	await alice.getByTestId('channel-rename-input').fill('general');
	await alice.getByTestId('channel-settings-save').click();
	await expect(alice.getByTestId('channel-settings-error')).toContainText(/already exists/);
	await shot(alice, 'features-channel-settings');
	await alice.getByTestId('channel-rename-input').fill('ops-room');
	await alice.getByTestId('channel-purpose-input').fill('Launch operations');
	await alice.getByTestId('channel-settings-save').click();
	await expect(alice.getByTestId('channel-settings-dialog')).toHaveCount(0);
	await expect(bob.getByTestId('channel-title')).toContainText('ops-room');
	await expect(bob.getByTestId('channel-ops-room')).toBeVisible();

	// ---- Archive (with confirmation): read-only for both ----
	await alice.getByTestId('channel-menu').click();
	await alice.getByTestId('menu-archive').click();
	await alice.getByTestId('channel-confirm-ok').click();
	for (const p of [alice, bob]) {
		await expect(p.getByTestId('archived-banner')).toBeVisible();
		await expect(p.getByTestId('composer')).toHaveCount(0);
	}
	await shot(bob, 'features-archived');
	await message(bob, 'Ship it on Friday').hover();
	await expect(message(bob, 'Ship it on Friday').getByRole('toolbar', { name: 'Message actions' })).toHaveCount(0);

	// ---- Leave: Bob leaves the archived channel; Alice sees one member ----
	await bob.getByTestId('channel-menu').click();
	await expect(bob.getByTestId('menu-archive')).toHaveCount(0);
	await bob.getByTestId('menu-leave').click();
	await bob.getByTestId('channel-confirm-ok').click();
	await expect(bob.getByTestId('channel-ops-room')).toHaveCount(0);
	await expect(bob.getByTestId('channel-title')).toContainText('general');
	await expect(alice.getByTestId('member-count')).toHaveAccessibleName('1 members');

	for (const c of calls) expect(storms(c, 30)).toEqual([]);
	expect(problems.flat()).toEqual([]);
});

test('a group DM of three is named from its members; a status with an expiry shows to the other user and clears itself', async ({
	alice,
	bob,
	server,
	newUser,
	shot,
}) => {
	const problems = [alice, bob].map(watchPage);
	const t = await team(server, newUser);
	const aliceView = viewOf(alice);
	await Promise.all([openAs(alice, t.alice, t.ws), openAs(bob, t.bob, t.ws)]);

	// ---- Alice: New message, pick Bob and Carol with the keyboard ----
	await alice.getByTestId('new-message').click();
	const box = alice.getByTestId('dm-people-input');
	await box.fill('bob');
	await expect(alice.getByTestId('dm-people-option')).toHaveCount(1);
	await box.press('Enter');
	await box.fill('Carol');
	await expect(alice.getByTestId('dm-people-option')).toHaveText(/Carol Lindqvist/);
	await box.press('Enter');
	await expect(alice.getByTestId('dm-chip')).toHaveCount(2);
	await shot(alice, 'features-new-message');
	// Backspace in the empty box takes the last chip; add her again.
	await box.press('Backspace');
	await expect(alice.getByTestId('dm-chip')).toHaveCount(1);
	await box.fill('carol');
	await expect(alice.getByTestId('dm-people-option')).toHaveCount(1);
	await box.press('Enter');
	await box.press('Enter'); // nothing typed: open the conversation
	await expect(alice.getByTestId('channel-title')).toHaveText('Bob Okafor, Carol Lindqvist');
	await expect(alice.getByTestId('dm-list').getByTestId('dm-name')).toHaveText(['Bob Okafor, Carol Lindqvist']);
	await send(alice, 'Hello you two');

	// Bob has it in his sidebar, named from the others.
	await expect(bob.getByTestId('dm-list').getByTestId('dm-name')).toHaveText(['Alice Moreau, Carol Lindqvist']);
	await bob.getByTestId('dm-list').getByTestId('dm-item').click();
	await expect(bob.getByTestId('channel-title')).toHaveText('Alice Moreau, Carol Lindqvist');
	await expect(message(bob, 'Hello you two')).toBeVisible();

	// ---- Bob sets a status for an hour from the profile menu ----
	await bob.getByTestId('profile-menu').click();
	await bob.getByTestId('menu-set-status').click();
	await bob.getByTestId('status-text-input').fill('In a meeting');
	await bob.getByTestId('status-emoji').click();
	await bob.getByTestId('status-emoji-spiral_calendar_pad').click();
	await bob.getByTestId('status-expiry').selectOption('1h');
	await shot(bob, 'features-status-dialog');
	await bob.getByTestId('status-save').click();
	await expect(bob.getByTestId('status-dialog')).toHaveCount(0);
	await bob.getByTestId('profile-menu').click();
	await expect(bob.getByTestId('menu-status-text')).toContainText('In a meeting');
	await expect(bob.getByTestId('menu-status-text')).toContainText('Until');
	await shot(bob, 'features-profile-menu');
	await bob.keyboard.press('Escape');
	await send(bob, 'On my way');

	// Alice sees it beside Bob's name and in his profile, with its expiry.
	const bobsRow = message(alice, 'On my way');
	await expect(bobsRow.getByTestId('author-status')).toHaveAttribute('data-status-text', 'In a meeting');
	await bobsRow.getByTestId('message-author').click();
	await expect(alice.getByTestId('profile-status')).toContainText('In a meeting');
	await expect(alice.getByTestId('profile-status-until')).toContainText('Until');
	await shot(alice, 'features-status-seen');

	// ---- A status that runs out disappears by itself (the server sends nothing then) ----
	await expect.poll(aliceView).toContain(t.bob.id);
	const soon = new Date(Date.now() + 4000).toISOString();
	await t.bob.call('PUT', '/me/status', { emoji: 'bus', text: 'Back in a moment', expires_at: soon });
	await expect(bobsRow.getByTestId('author-status')).toHaveAttribute('data-status-text', 'Back in a moment');
	await expect(bobsRow.getByTestId('author-status')).toHaveCount(0, { timeout: 10_000 });
	await expect(alice.getByTestId('profile-status')).toHaveCount(0);

	// ---- Bob edits his profile: Alice's open profile of him follows ----
	await bob.getByTestId('profile-menu').click();
	await bob.getByTestId('menu-edit-profile').click();
	await bob.getByTestId('profile-name-input').fill('Bob O. Okafor');
	await bob.getByTestId('profile-title-input').fill('Launch lead');
	await bob.getByTestId('profile-save').click();
	await expect(bob.getByTestId('edit-profile-dialog')).toHaveCount(0);
	await expect(bob.getByTestId('profile-menu')).toBeVisible();
	await expect(alice.getByTestId('profile-name')).toHaveText('Bob O. Okafor');
	await expect(alice.getByTestId('profile-handle')).toContainText('Launch lead');
	await expect(alice.getByTestId('channel-title')).toHaveText('Bob O. Okafor, Carol Lindqvist');

	expect(problems.flat()).toEqual([]);
});
