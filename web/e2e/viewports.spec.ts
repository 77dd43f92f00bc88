// Issue 14's items at phone and tablet sizes. Each item has its own spec at
// the desktop size (routes, drafts-outbox, features, markdown, keyboard,
// a11y, threads-stale, responsive); this walks every one of them once more
// in a narrow window, where the sidebar is a drawer (phone) and panels lie
// over the message column (tablet): the control is reachable, what it opens
// lies inside the viewport, it works, and the page never scrolls sideways.
// The workspace is seeded over HTTP so that the walk costs little.
import type { Page } from '@playwright/test';
import { test, expect, watchPage } from './fixtures';
import { message } from './people';
import { api, channel, member, post, signIn, workspace } from './seed';

const sizes = [
	{ name: 'phone', width: 390, height: 844 },
	{ name: 'tablet', width: 768, height: 1024 },
] as const;

async function noSidewaysScroll(page: Page, where: string) {
	const [scrollWidth, innerWidth] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
	expect(scrollWidth, `page scrolls sideways ${where}`).toBeLessThanOrEqual(innerWidth);
}

/** The element lies inside the viewport (drawers and panels slide in over 0.2 s). */
async function onScreen(page: Page, testId: string) {
	const { width, height } = page.viewportSize()!;
	const el = page.getByTestId(testId);
	await expect(el).toBeVisible();
	await expect.poll(async () => (await el.boundingBox())!.x, { message: `${testId} starts off-screen` }).toBeGreaterThanOrEqual(0);
	const b = (await el.boundingBox())!;
	expect(b.x + b.width, `${testId} ends off-screen to the right`).toBeLessThanOrEqual(width + 0.5);
	expect(b.y, `${testId} starts above the screen`).toBeGreaterThanOrEqual(0);
	expect(b.y, `${testId} starts below the screen`).toBeLessThan(height);
	return b;
}

for (const size of sizes) {
	test(`issue 14's items at ${size.name} size (${size.width}×${size.height})`, async ({ page, browser, server }) => {
		const phone = size.width < 768;
		const problems = watchPage(page);
		await page.setViewportSize({ width: size.width, height: size.height });

		// ---- Seed: Olivia's workspace with Bob, #ops with markdown and a thread ----
		const s = await workspace(server.url, `vp-${size.name}`);
		const bob = await member(server.url, s, `vpb-${size.name}`);
		const ops = await channel(server.url, s.owner.token, s.ws.id, 'ops');
		await api(server.url, bob.token, 'POST', `/channels/${ops.id}/join`);
		await post(
			server.url,
			s.owner.token,
			ops.id,
			'Deploy checklist:\n- build the image\n- roll it out\n```go\nfunc main() { fmt.Println("a line of code far longer than any phone is wide, which scrolls inside its block") }\n```',
		);
		const root = await post(server.url, bob.token, ops.id, 'Who takes the deploy tonight?');
		await post(server.url, s.owner.token, ops.id, 'I can', root.id);
		const base = `/w/${s.ws.slug}`;
		const sidebar = async () => {
			if (!phone) return;
			await page.getByTestId('open-sidebar').click();
			await onScreen(page, 'sidebar-drawer');
		};

		// ---- URLs: a deep link opens the thread; Back and Forward walk it ----
		await signIn(page, s.owner.token, `${base}/c/ops/t/${root.id}`);
		const panel = await onScreen(page, 'thread-panel');
		if (phone) expect(panel.width).toBeGreaterThanOrEqual(size.width - 1);
		await expect(page.getByTestId('thread-panel').getByText('I can')).toBeVisible();
		await noSidewaysScroll(page, 'with a deep-linked thread');
		await page.getByTestId('close-panel').click();
		await expect(page).toHaveURL(`${base}/c/ops`);
		await page.goBack();
		await expect(page.getByTestId('thread-panel')).toBeVisible();
		await page.goForward();
		await expect(page.getByTestId('thread-panel')).toBeHidden();

		// ---- Reply count stays right: Bob's reply arrives live ----
		const rootRow = message(page, 'Who takes the deploy tonight?');
		await expect(rootRow.getByTestId('reply-count')).toHaveText(/1 reply/);
		await post(server.url, bob.token, ops.id, 'Thanks!', root.id);
		await expect(rootRow.getByTestId('reply-count')).toHaveText(/2 replies/);

		// ---- Markdown: the list and the code block render; the code scrolls inside its block ----
		const md = message(page, 'Deploy checklist');
		await expect(md.locator('li')).toHaveCount(2);
		const pre = md.locator('pre');
		await expect(pre).toBeVisible();
		expect((await pre.boundingBox())!.x + (await pre.boundingBox())!.width).toBeLessThanOrEqual(size.width + 0.5);
		await noSidewaysScroll(page, 'with a long code block');

		// ---- Pins: a tap on a message shows its actions; the pins panel fits ----
		await rootRow.getByTestId('message-text').click();
		await rootRow.getByTestId('action-pin').click();
		await expect(page.getByTestId('pins-button')).toHaveAttribute('data-count', '1');
		await page.getByTestId('pins-button').click();
		await onScreen(page, 'pins-panel');
		await expect(page.getByTestId('pin-item')).toContainText('Who takes the deploy tonight?');
		await noSidewaysScroll(page, 'with the pins panel open');
		await page.getByTestId('close-panel').click();

		// ---- Emoji picker from the composer fits the screen ----
		await page.getByTestId('composer-emoji').click();
		await onScreen(page, 'emoji-picker');
		await page.getByTestId('emoji-picker').getByTestId('emoji-search').fill('rocket');
		await page.getByTestId('emoji-picker').getByRole('option').first().click();
		await expect(page.getByTestId('composer')).toHaveValue(/^🚀/);

		// ---- Drafts: what is typed stays with #ops across a switch ----
		await page.getByTestId('composer').fill('🚀 a draft typed on a small screen');
		await sidebar();
		await page.getByTestId('channel-general').click();
		await expect(page.getByTestId('channel-title')).toContainText('general');
		await sidebar();
		await expect(page.getByTestId('channel-ops').getByTestId('draft-marker')).toBeVisible();
		await page.getByTestId('channel-ops').click();
		await expect(page.getByTestId('composer')).toHaveValue('🚀 a draft typed on a small screen');
		await page.getByTestId('composer').fill('');

		// ---- Keyboard: Alt+↓ moves to the next channel (a tablet or phone with a keyboard) ----
		await page.getByTestId('composer').focus();
		await page.keyboard.press('Alt+ArrowUp');
		await expect(page.getByTestId('channel-title')).toContainText('general');
		await page.keyboard.press('Alt+ArrowDown');
		await expect(page.getByTestId('channel-title')).toContainText('ops');

		// ---- Channel menu opens inside the screen ----
		await page.getByTestId('channel-menu').click();
		await onScreen(page, 'menu-leave');
		await page.keyboard.press('Escape');
		await expect(page.getByTestId('menu-leave')).toHaveCount(0);

		// ---- Group DM: the New message dialog fits and opens the conversation ----
		await sidebar();
		await page.getByTestId('new-message').click();
		await onScreen(page, 'dm-people-input');
		await page.getByTestId('dm-people-input').fill(bob.name.split(' ')[0]);
		await expect(page.getByTestId('dm-people-option')).toHaveCount(1);
		await page.getByTestId('dm-people-input').press('Enter');
		await page.getByTestId('dm-people-input').press('Enter');
		await expect(page.getByTestId('channel-title')).toHaveText(bob.name);
		await noSidewaysScroll(page, 'in a direct message');

		// ---- Profile menu and the status dialog fit ----
		await page.getByTestId('profile-menu').click();
		await onScreen(page, 'menu-set-status');
		await page.getByTestId('menu-set-status').click();
		await onScreen(page, 'status-dialog');
		await page.keyboard.press('Escape');
		await expect(page.getByTestId('status-dialog')).toHaveCount(0);

		// ---- Dark mode from Preferences ----
		await page.getByTestId('open-preferences').click();
		await onScreen(page, 'preferences');
		await page.getByTestId('theme-dark').check();
		await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
		await page.getByTestId('theme-system').check();
		await page.getByTestId('open-preferences').click();

		// ---- Search by URL ----
		await page.goto(`${base}/search?q=deploy`);
		await expect(page.getByTestId('search-result').first()).toBeVisible();
		await noSidewaysScroll(page, 'on the search page');

		// ---- First-run nudge in an empty workspace of one's own ----
		const empty = await api<{ slug: string }>(server.url, s.owner.token, 'POST', '/workspaces', {
			name: `Empty ${size.name}`,
			slug: `vpe-${size.name}-${s.owner.id.slice(-8).toLowerCase()}`,
		});
		await page.goto(`/w/${empty.slug}/c/general`);
		await onScreen(page, 'first-run');
		await noSidewaysScroll(page, 'with the first-run nudge');

		// ---- Invite page for someone signed out ----
		const inv = await api<{ code: string }>(server.url, s.owner.token, 'POST', `/workspaces/${s.ws.id}/invites`, {});
		const ctx = await browser.newContext({ baseURL: server.url, viewport: { width: size.width, height: size.height } });
		const guest = await ctx.newPage();
		const guestProblems = watchPage(guest);
		await guest.goto(`/invite/${inv.code}`);
		await expect(guest.getByRole('heading', { name: `Join ${s.ws.name}` })).toBeVisible();
		await onScreen(guest, 'auth-submit');
		await noSidewaysScroll(guest, 'on the invite page');
		await ctx.close();

		expect([...problems, ...guestProblems]).toEqual([]);
	});
}
