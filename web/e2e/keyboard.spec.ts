// The keyboard, as in Slack: Alt+↑/↓ through the sidebar (with Shift: the
// unread ones), ↑ in an empty composer edits the last message, Esc marks
// the channel read, the message list is one tab stop with ↑/↓ inside, a
// skip link comes first. And the first-run nudge of an empty workspace.
import { test, expect, watchPage } from './fixtures';
import { channel, member, post, signIn, workspace } from './seed';

test('an empty workspace nudges to invite people and create a channel', async ({ page, server }) => {
	const problems = watchPage(page);
	const s = await workspace(server.url, 'first');
	await signIn(page, s.owner.token, '/');
	const nudge = page.getByTestId('first-run');
	await expect(nudge).toBeVisible();
	await nudge.getByTestId('first-run-invite').click();
	await expect(page.getByTestId('invite-dialog')).toBeVisible();
	await expect(page.getByTestId('invite-code')).not.toBeEmpty();
	await page.getByTestId('close-dialog').click();
	await nudge.getByTestId('first-run-create').click();
	await expect(page.getByTestId('create-channel-dialog')).toBeVisible();
	await page.keyboard.press('Escape');
	await expect(page.getByTestId('create-channel-dialog')).toHaveCount(0);
	// Once someone speaks, it goes.
	await page.getByTestId('composer').fill('Hello, me');
	await page.getByTestId('composer').press('Enter');
	await expect(nudge).toHaveCount(0);
	expect(problems).toEqual([]);
});

test('Alt+arrows, ↑ to edit, Esc to mark read, one tab stop for the list, skip link', async ({ page, server }) => {
	const problems = watchPage(page);
	const s = await workspace(server.url, 'keys');
	const alpha = await channel(server.url, s.owner.token, s.ws.id, 'alpha');
	await channel(server.url, s.owner.token, s.ws.id, 'beta');
	for (let i = 1; i <= 3; i++) await post(server.url, s.owner.token, s.general.id, `General ${i}`);
	const base = `/w/${s.ws.slug}`;
	await signIn(page, s.owner.token, `${base}/c/general`);
	await expect(page.getByTestId('channel-title')).toContainText('general');

	// Alt+↑/↓ in the sidebar's order: alpha, beta, general.
	await page.keyboard.press('Alt+ArrowUp');
	await expect(page).toHaveURL(`${base}/c/beta`);
	await page.keyboard.press('Alt+ArrowUp');
	await expect(page).toHaveURL(`${base}/c/alpha`);
	await page.keyboard.press('Alt+ArrowDown');
	await expect(page).toHaveURL(`${base}/c/beta`);

	// Alt+Shift+↓: the next unread one, skipping general (read), wrapping to alpha.
	const bob = await member(server.url, s, 'bob');
	await fetch(`${server.url}/api/v1/channels/${alpha.id}/join`, { method: 'POST', headers: { Authorization: `Bearer ${bob.token}` } });
	for (let i = 1; i <= 3; i++) await post(server.url, bob.token, alpha.id, `From Bob ${i}`);
	await expect(page.getByTestId('channel-alpha')).toHaveAttribute('data-unread', '3');
	await page.keyboard.press('Alt+Shift+ArrowDown');
	await expect(page).toHaveURL(`${base}/c/alpha`);
	// The "New" line marks Bob's messages; Esc marks the channel read and takes it away.
	await expect(page.getByTestId('new-messages')).toBeVisible();
	await page.keyboard.press('Escape');
	await expect(page.getByTestId('new-messages')).toHaveCount(0);

	// ↑ in the empty composer edits the last own message; Enter saves and the composer has focus again.
	await page.keyboard.press('Alt+ArrowDown'); // beta
	await page.keyboard.press('Alt+ArrowDown'); // general
	await expect(page).toHaveURL(`${base}/c/general`);
	const composer = page.getByTestId('composer');
	await composer.fill('Typo here');
	await composer.press('Enter');
	await expect(page.getByTestId('message').filter({ hasText: 'Typo here' })).toBeVisible();
	await composer.press('ArrowUp');
	const edit = page.getByTestId('edit-input');
	await expect(edit).toBeFocused();
	await expect(edit).toHaveValue('Typo here');
	await edit.fill('Fixed here');
	await edit.press('Enter');
	await expect(page.getByTestId('message').filter({ hasText: 'Fixed here' })).toBeVisible();
	await expect(composer).toBeFocused();

	// Shift+Tab from the composer: one stop, the newest message; ↑ moves inside the list.
	await page.keyboard.press('Shift+Tab');
	const focused = page.locator('[data-testid="message"]:focus');
	await expect(focused).toContainText('Fixed here');
	await page.keyboard.press('ArrowUp');
	await expect(focused).toContainText('General 3');
	// Enter reaches the message's actions; Esc goes back to the message.
	await page.keyboard.press('Enter');
	await expect(page.locator('[data-testid="message"] button:focus')).toHaveCount(1);
	await page.keyboard.press('Escape');
	await expect(focused).toContainText('General 3');
	// One more Shift+Tab leaves the list: no other message, no message button.
	await page.keyboard.press('Shift+Tab');
	await expect(page.locator('[data-testid="message-list"] :focus')).toHaveCount(0);
	// Tab comes back to the same message; inside it, Tab goes on to its actions.
	await page.keyboard.press('Tab');
	await expect(focused).toContainText('General 3');
	await page.keyboard.press('Tab');
	await expect(page.locator('[data-testid="message"] button:focus')).toHaveCount(1);

	// The skip link is the first focusable element, and goes to the composer.
	await page.getByTestId('open-switcher').focus();
	await page.keyboard.press('Shift+Tab');
	const skip = page.getByTestId('skip-link');
	await expect(skip).toBeFocused();
	expect(
		await page.evaluate(() => document.querySelector('a[href], button, input, textarea, select, [tabindex]:not([tabindex="-1"])')?.getAttribute('data-testid')),
	).toBe('skip-link');
	await expect(skip).toHaveText('Skip to message composer');
	await page.keyboard.press('Enter');
	await expect(composer).toBeFocused();
	expect(problems).toEqual([]);
});
