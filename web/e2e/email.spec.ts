// Email notifications (issue 16, item 6; docs/email.md): the Preferences
// popover's "Email notifications" choice is the server's
// GET/PUT /me/notifications, kept across a reload. The e2e server has no
// SMTP server, which the popover says. Every wait is on a condition.
import { test, expect, watchPage } from './fixtures';
import { openAs, pair } from './people';

test('Preferences sets the email notification interval and turns it off', async ({ alice, server, newUser }) => {
	const problems = [alice].map(watchPage);
	const p = await pair(server, newUser, 'Email Co');
	await openAs(alice, p.alice, p);

	await alice.getByTestId('open-preferences').click();
	const choice = alice.getByTestId('email-notifications');
	await expect(choice).toHaveValue('900');
	await expect(alice.getByTestId('email-off-server')).toBeVisible();
	await choice.selectOption('3600');
	await expect.poll(async () => (await p.alice.call<{ mode: string; interval_seconds: number }>('GET', '/me/notifications')).interval_seconds).toBe(3600);

	await alice.reload();
	await alice.getByTestId('open-preferences').click();
	await expect(alice.getByTestId('email-notifications')).toHaveValue('3600');
	await alice.getByTestId('email-notifications').selectOption('off');
	await expect.poll(async () => (await p.alice.call<{ mode: string }>('GET', '/me/notifications')).mode).toBe('off');
	expect(problems.flat()).toEqual([]);
});
