// URLs: every view has one, Back and Forward walk the views, deep links
// boot straight into them (through the log-in screen too), unknown places
// say so, and an invite link names its workspace and signs a newcomer up.
import { test, expect, watchPage } from './fixtures';
import { api, channel, post, signIn, workspace } from './seed';

const OLD = 70; // more than the first page of history (50): message 3 is not loaded at first

test('deep links open a channel, a thread and an old message; reload keeps them; unknown places say so', async ({ browser, server }) => {
	const s = await workspace(server.url, 'deep');
	const random = await channel(server.url, s.owner.token, s.ws.id, 'random');
	let third = '';
	for (let i = 1; i <= 3; i++) third = (await post(server.url, s.owner.token, random.id, `Line ${i}`)).id;
	for (let i = 4; i <= OLD; i += 10) {
		await Promise.all(Array.from({ length: Math.min(10, OLD - i + 1) }, (_, k) => post(server.url, s.owner.token, random.id, `Line ${i + k}`)));
	}
	const root = await post(server.url, s.owner.token, random.id, 'Thread root here');
	await post(server.url, s.owner.token, random.id, 'A reply in the thread', root.id);
	const base = `/w/${s.ws.slug}`;

	// A fresh context each: nothing remembered but the token.
	const fresh = async (path: string) => {
		const ctx = await browser.newContext({ baseURL: server.url });
		const page = await ctx.newPage();
		const problems = watchPage(page);
		await signIn(page, s.owner.token, path);
		return { page, problems, close: () => ctx.close() };
	};

	{
		const { page, problems, close } = await fresh(`${base}/c/random`);
		await expect(page.getByTestId('channel-title')).toContainText('random');
		await expect(page.getByTestId('message').filter({ hasText: 'Thread root here' })).toBeVisible();
		await expect(page).toHaveURL(`${base}/c/random`);
		expect(problems).toEqual([]);
		await close();
	}
	{
		const { page, problems, close } = await fresh(`${base}/c/random/t/${root.id}`);
		const panel = page.getByTestId('thread-panel');
		await expect(panel.getByText('A reply in the thread')).toBeVisible();
		await expect(page.getByTestId('channel-title')).toContainText('random');
		await page.reload();
		await expect(panel.getByText('A reply in the thread')).toBeVisible();
		await expect(page).toHaveURL(`${base}/c/random/t/${root.id}`);
		expect(problems).toEqual([]);
		await close();
	}
	{
		// By id, as "Copy link" makes them; an old message is loaded around.
		const { page, problems, close } = await fresh(`${base}/c/${random.id}/m/${third}`);
		const row = page.locator(`[data-message-id="${third}"]`);
		await expect(row).toBeVisible();
		await expect(row).toHaveClass(/flash/);
		await expect(page.getByTestId('message').filter({ hasText: 'Thread root here' })).toHaveCount(0);
		await page.reload();
		await expect(row).toBeVisible();
		expect(problems).toEqual([]);
		await close();
	}
	{
		const { page, close } = await fresh(`${base}/c/no-such-channel`);
		await expect(page.getByTestId('not-found')).toContainText('no-such-channel');
		await expect(page).toHaveURL(`${base}/c/no-such-channel`);
		await page.goto(`/w/no-such-workspace/c/general`);
		await expect(page.getByTestId('not-found')).toContainText('no-such-workspace');
		// A channel of a workspace one is not in is as unknown.
		const other = await workspace(server.url, 'other');
		await page.goto(`${base}/c/${other.general.id}`);
		await expect(page.getByTestId('not-found')).toBeVisible();
		await close();
	}
});

test('Back and Forward walk channel, thread and search; Copy link; a deep link survives the log-in screen', async ({ page, browser, server }) => {
	const problems = watchPage(page);
	const s = await workspace(server.url, 'hist');
	const random = await channel(server.url, s.owner.token, s.ws.id, 'random');
	const root = await post(server.url, s.owner.token, random.id, 'Walk the thread');
	await post(server.url, s.owner.token, random.id, 'walking reply', root.id);
	const base = `/w/${s.ws.slug}`;

	await signIn(page, s.owner.token, '/');
	await expect(page).toHaveURL(`${base}/c/general`);
	await page.getByTestId('channel-random').click();
	await expect(page).toHaveURL(`${base}/c/random`);
	await page.getByTestId('reply-count').click();
	await expect(page.getByTestId('thread-panel')).toBeVisible();
	await expect(page).toHaveURL(`${base}/c/random/t/${root.id}`);
	await page.getByTestId('search-input').fill('walk');
	await page.getByTestId('search-input').press('Enter');
	await expect(page).toHaveURL(`${base}/search?q=walk`);

	await page.goBack();
	await expect(page).toHaveURL(`${base}/c/random/t/${root.id}`);
	await expect(page.getByTestId('thread-panel').getByText('walking reply')).toBeVisible();
	await page.goBack();
	await expect(page).toHaveURL(`${base}/c/random`);
	await expect(page.getByTestId('thread-panel')).toHaveCount(0);
	await expect(page.getByTestId('channel-title')).toContainText('random');
	await page.goBack();
	await expect(page.getByTestId('channel-title')).toContainText('general');
	await page.goForward();
	await page.goForward();
	await expect(page.getByTestId('thread-panel')).toBeVisible();
	await page.goForward();
	await expect(page).toHaveURL(`${base}/search?q=walk`);
	await expect(page.getByTestId('search-input')).toHaveValue('walk');
	await page.reload();
	await expect(page.getByTestId('search-input')).toHaveValue('walk');
	await expect(page).toHaveURL(`${base}/search?q=walk`);

	// Copy link: the message's permanent URL, on the clipboard.
	await page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
	await page.goto(`${base}/c/random`);
	const msg = page.getByTestId('message').filter({ hasText: 'Walk the thread' });
	await msg.hover();
	await msg.getByTestId('action-copy-link').click();
	await expect(msg.getByTestId('link-copied')).toHaveCount(1);
	const link = await page.evaluate(() => navigator.clipboard.readText());
	expect(link).toBe(`${server.url}${base}/c/${random.id}/m/${root.id}`);
	expect(problems).toEqual([]);

	// Signed out, the link shows the log-in screen, then the message.
	const ctx = await browser.newContext({ baseURL: server.url });
	const other = await ctx.newPage();
	await other.goto(link);
	await other.getByLabel('Email').fill(s.owner.email);
	await other.getByLabel('Password').fill(s.owner.password);
	await other.getByTestId('auth-submit').click();
	await expect(other.locator(`[data-message-id="${root.id}"]`)).toBeVisible();
	await expect(other.getByTestId('channel-title')).toContainText('random');
	await ctx.close();
});

test('an invite link names its workspace and signs a newcomer up into it', async ({ page, server, newUser }) => {
	const problems = watchPage(page);
	const s = await workspace(server.url, 'inv');
	const inv = await api<{ code: string }>(server.url, s.owner.token, 'POST', `/workspaces/${s.ws.id}/invites`, {});

	await page.goto(`/invite/${inv.code}`);
	await expect(page.getByRole('heading', { name: `Join ${s.ws.name}` })).toBeVisible();
	await expect(page.getByTestId('tab-signup')).toHaveAttribute('aria-selected', 'true');
	const u = newUser('newbie');
	await page.getByLabel('Full name').fill('Nina Newbie');
	await page.getByLabel('Email').fill(u.email);
	await page.getByLabel('Password').fill(u.password);
	await expect(page.getByTestId('auth-submit')).toHaveText(`Join ${s.ws.name}`);
	await page.getByTestId('auth-submit').click();
	await expect(page.getByTestId('workspace-name')).toHaveText(s.ws.name);
	await expect(page.getByTestId('channel-title')).toContainText('general');
	await expect(page).toHaveURL(`/w/${s.ws.slug}/c/general`);

	// An unknown code says so instead of naming nothing.
	const stranger = await page.context().browser()!.newContext({ baseURL: server.url });
	const p2 = await stranger.newPage();
	await p2.goto('/invite/nosuchcode');
	await expect(p2.getByTestId('invite-unknown')).toBeVisible();
	await stranger.close();
	expect(problems).toEqual([]);
});
