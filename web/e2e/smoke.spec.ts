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

test('the binary serves the client: SPA fallback, hashed assets cached and gzipped, API 404s stay JSON', async ({ page, request }) => {
	const deep = await request.get('/some/client/route');
	expect(deep.status()).toBe(200);
	expect(deep.headers()['content-type']).toContain('text/html');
	const html = await deep.text();
	const js = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1];
	expect(js, html).toBeTruthy();
	const asset = await request.get(js!, { headers: { 'Accept-Encoding': 'gzip' } });
	expect(asset.status()).toBe(200);
	expect(asset.headers()['cache-control']).toContain('immutable');
	expect(asset.headers()['content-encoding']).toBe('gzip');
	const stale = await request.get('/assets/index-doesnotexist.js');
	expect(stale.status()).toBe(404);
	const api = await request.get('/api/v1/no/such/thing');
	expect(api.status()).toBe(404);
	expect(await api.json()).toMatchObject({ error: { code: 'not_found' } });
	// The app itself boots on a deep link.
	const problems = watchPage(page);
	await page.goto('/some/client/route');
	await expect(page.getByTestId('auth-submit')).toBeVisible();
	expect(problems).toEqual([]);
});
