// Smoke: the harness works end to end — the binary serves the built client
// under its CSP, a new user signs up, creates a workspace and lands in #general.
import { test, expect, watchPage } from './fixtures';

test('sign up, create a workspace, see #general', async ({ page, server, shot, newUser }) => {
	const problems = watchPage(page);
	const u = newUser('smoke');
	const res = await page.goto('/');
	expect(res?.status()).toBe(200);
	expect(res?.headers()['content-security-policy']).toContain("script-src 'self'");

	await page.getByTestId('tab-signup').click();
	await page.getByLabel('Full name').fill(u.name);
	await page.getByLabel('Handle').fill(u.handle);
	await page.getByLabel('Email').fill(u.email);
	await page.getByLabel('Password').fill(u.password);
	await page.getByTestId('auth-submit').click();

	await page.getByTestId('ws-name').fill('Smoke Test Co');
	await page.getByTestId('ws-create').click();

	await expect(page.getByTestId('workspace-name')).toHaveText('Smoke Test Co');
	await expect(page.getByTestId('channel-general')).toBeVisible();
	await shot(page, 'smoke-general');
	expect(problems, server.logTail()).toEqual([]);
});
