// Issue 14: nothing typed is lost. A draft stays with its channel (and a
// thread's with its thread) across channel switches and reloads, with a
// pencil beside the channel in the sidebar; messages sent offline go by
// themselves, in order and once each, when the connection is back.
import { test, expect, watchPage } from './fixtures';
import type { ParleyServer, newUser as NewUser } from './harness';
import { message, openAs, pair, type Pair } from './people';

// Both tests use one workspace (sign-ups hash passwords: slow on a busy machine).
let shared: Promise<Pair> | undefined;
const team = (server: ParleyServer, newUser: typeof NewUser) => (shared ??= pair(server, newUser, 'Draft Co'));

test('a draft survives a channel switch and a reload, and goes away when sent', async ({ bob, server, newUser }) => {
	const problems = watchPage(bob);
	const p = await team(server, newUser);
	const root = await p.alice.call<{ id: string }>('POST', `/channels/${p.other}/messages`, { text: 'Thread about drafts', client_msg_id: 'draft-root' });
	await openAs(bob, p.bob, p);
	await expect(bob.getByTestId('channel-title')).toContainText('general');
	await bob.getByTestId('composer').fill('Half a thought about the launch');
	const marker = (name: string) => bob.getByTestId(`channel-${name}`).getByTestId('draft-marker');
	await expect(marker('general')).toHaveCount(0); // not beside the channel on screen

	await bob.getByTestId('channel-other').click();
	await expect(bob.getByTestId('channel-title')).toContainText('other');
	await expect(bob.getByTestId('composer')).toHaveValue('');
	await expect(marker('general')).toBeVisible();
	// A reply half written in a thread of #other.
	await message(bob, 'Thread about drafts').hover();
	await message(bob, 'Thread about drafts').getByTestId('action-reply').click();
	await bob.getByTestId('thread-composer').fill('A reply I will finish later');

	await bob.reload();
	await expect(bob.getByTestId('channel-title')).toContainText('other');
	await expect(marker('general')).toBeVisible();
	await message(bob, 'Thread about drafts').hover();
	await message(bob, 'Thread about drafts').getByTestId('action-reply').click();
	await expect(bob.getByTestId('thread-composer')).toHaveValue('A reply I will finish later');

	await bob.getByTestId('channel-general').click();
	await expect(bob.getByTestId('composer')).toHaveValue('Half a thought about the launch');
	await bob.getByTestId('composer').press('Enter');
	await expect(message(bob, 'Half a thought about the launch')).not.toHaveAttribute('data-message-id', /^local:/);
	await expect(bob.getByTestId('composer')).toHaveValue('');
	await bob.getByTestId('channel-other').click();
	await expect(marker('general')).toHaveCount(0);
	expect(
		await bob.evaluate(() =>
			Object.keys(localStorage)
				.filter((k) => k.startsWith('parley.drafts.'))
				.map((k) => localStorage.getItem(k)),
		),
	).not.toContainEqual(expect.stringContaining('Half a thought'));
	expect(root.id).toBeTruthy();
	expect(problems).toEqual([]);
});

test('messages sent offline go when the connection is back: once each, in order, for the other person too', async ({ alice, bob, server, newUser }) => {
	const problems = [alice, bob].map(watchPage);
	const p = await team(server, newUser);
	await openAs(alice, p.alice, p);
	await openAs(bob, p.bob, p);
	await expect(alice.getByTestId('channel-title')).toContainText('general');
	await expect(bob.getByTestId('channel-title')).toContainText('general');

	await alice.context().setOffline(true);
	for (const text of ['Offline one', 'Offline two']) {
		await alice.getByTestId('composer').fill(text);
		await alice.getByTestId('composer').press('Enter');
	}
	await expect(message(alice, 'Offline one').getByTestId('not-sent')).toBeVisible();
	await expect(message(alice, 'Offline two').getByTestId('not-sent')).toBeVisible();

	await alice.context().setOffline(false);
	for (const page of [alice, bob]) {
		await expect(message(page, 'Offline one')).toHaveCount(1);
		await expect(message(page, 'Offline two')).toHaveCount(1);
		await expect(message(page, 'Offline two')).not.toHaveAttribute('data-message-id', /^local:/);
		const texts = await page.getByTestId('message-list').getByTestId('message-text').allTextContents();
		expect(texts.findIndex((t) => t.includes('Offline one'))).toBeLessThan(texts.findIndex((t) => t.includes('Offline two')));
	}
	await expect(message(alice, 'Offline one').getByTestId('not-sent')).toHaveCount(0);
	// The server has each once, in order.
	const page = await p.bob.call<{ messages: { text: string }[] }>('GET', `/channels/${p.general}/messages?limit=10`);
	expect(page.messages.map((m) => m.text).filter((t) => t.startsWith('Offline'))).toEqual(['Offline one', 'Offline two']);
	expect(problems.flat()).toEqual([]);
});
