// The chat flow at phone, tablet and desktop sizes (issue 14): sign up,
// create a workspace, post, open a thread and reply, then switch channel
// through the sidebar (a drawer on phones). At every step the page must not
// scroll sideways, and the page logs no error at all (an effect loop such
// as effect_update_depth_exceeded shows up as one).
import type { Page } from '@playwright/test';
import { test, expect, watchPage } from './fixtures';

const sizes = [
	{ name: 'phone', width: 390, height: 844 },
	{ name: 'tablet', width: 768, height: 1024 },
	{ name: 'desktop', width: 1440, height: 900 },
] as const;

/** Every console error, on top of watchPage's CSP violations and uncaught errors. */
function consoleErrors(page: Page): string[] {
	const errors: string[] = [];
	page.on('console', (m) => {
		if (m.type() === 'error') errors.push(`console: ${m.text()}`);
	});
	return errors;
}

async function noSidewaysScroll(page: Page, where: string) {
	const [scrollWidth, innerWidth] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
	expect(scrollWidth, `page scrolls sideways ${where}`).toBeLessThanOrEqual(innerWidth);
}

/** The element's box comes to lie inside the viewport horizontally (a drawer slides in over 0.2 s). */
async function onScreen(page: Page, testId: string) {
	const width = page.viewportSize()!.width;
	const box = async () => (await page.getByTestId(testId).boundingBox())!;
	await expect.poll(async () => (await box()).x, { message: `${testId} starts off-screen` }).toBeGreaterThanOrEqual(0);
	const b = await box();
	expect(b.x + b.width, `${testId} ends off-screen`).toBeLessThanOrEqual(width + 0.5);
	return b;
}

for (const size of sizes) {
	test(`chat flow at ${size.name} size (${size.width}×${size.height})`, async ({ page, newUser }) => {
		const problems = [...watchPage(page), ...consoleErrors(page)];
		const phone = size.width < 768;
		await page.setViewportSize({ width: size.width, height: size.height });
		const u = newUser(size.name);

		await page.goto('/');
		await page.getByTestId('tab-signup').click();
		await page.getByLabel('Full name').fill(u.name);
		await page.getByLabel('Handle').fill(u.handle);
		await page.getByLabel('Email').fill(u.email);
		await page.getByLabel('Password').fill(u.password);
		await noSidewaysScroll(page, 'on the sign-up screen');
		await page.getByTestId('auth-submit').click();
		await page.getByTestId('ws-name').fill(`Team ${size.name}`);
		await noSidewaysScroll(page, 'on the workspaces screen');
		await page.getByTestId('ws-create').click();
		await expect(page.getByTestId('channel-title')).toContainText('general');

		// Phones: the sidebar is a closed drawer; the menu button opens it.
		const toggle = page.getByTestId('open-sidebar');
		const drawer = page.getByTestId('sidebar-drawer');
		if (phone) {
			await expect(page.getByTestId('workspace-name')).toBeHidden();
			await expect(toggle).toBeVisible();
			expect((await toggle.boundingBox())!.height).toBeGreaterThanOrEqual(44);
			await toggle.click();
			await expect(toggle).toHaveAttribute('aria-expanded', 'true');
			await expect(page.getByTestId('workspace-name')).toBeVisible();
			await onScreen(page, 'sidebar-drawer');
		} else {
			await expect(toggle).toBeHidden();
			await expect(page.getByTestId('workspace-name')).toBeVisible();
		}
		// A second channel (the drawer closes as the dialog opens).
		await page.getByTestId('create-channel').click();
		await page.getByTestId('channel-name-input').fill('design');
		await page.getByTestId('channel-create-submit').click();
		await expect(page.getByTestId('channel-title')).toContainText('design');
		if (phone) await expect(toggle).toHaveAttribute('aria-expanded', 'false');

		// The message column and the composer take the width they should.
		const composer = await onScreen(page, 'composer');
		expect(composer.width, 'composer width').toBeGreaterThan(phone ? size.width * 0.6 : 300);
		const text =
			'A long message that has to wrap over several lines on a phone, and must never push the page sideways: https://example.com/a/very/long/path/without/any/spaces/at/all/to/break/on';
		await page.getByTestId('composer').fill(text);
		await page.getByTestId('composer').press('Enter');
		const line = page.getByTestId('message-list').getByTestId('message').filter({ hasText: 'A long message' });
		await expect(line).not.toHaveAttribute('data-message-id', /^local:/);
		await noSidewaysScroll(page, 'with a long message');

		// A thread: beside the channel on desktops, over it on tablets, full-screen on phones.
		await line.hover();
		await line.getByTestId('action-reply').click();
		const panel = await onScreen(page, 'thread-panel');
		if (phone) {
			expect(panel.width).toBeGreaterThanOrEqual(size.width - 1);
			expect(panel.height).toBeGreaterThanOrEqual(size.height - 1);
		} else {
			expect(panel.width).toBeGreaterThanOrEqual(300);
		}
		await page.getByTestId('thread-composer').fill('A reply in the thread');
		await page.getByTestId('thread-composer').press('Enter');
		await expect(page.getByTestId('thread-replies').getByTestId('message')).toHaveCount(1);
		await expect(line.getByTestId('reply-count')).toHaveText(/1 reply/);
		await noSidewaysScroll(page, 'with the thread open');
		await page.getByTestId('close-panel').click();
		await expect(page.getByTestId('thread-panel')).toBeHidden();

		// Switch channel through the sidebar.
		if (phone) {
			await toggle.click();
			await expect(drawer).toBeVisible();
			// Focus moves into the drawer; Escape closes it and gives focus back.
			await expect(drawer.locator(':focus')).toHaveCount(1);
			await page.keyboard.press('Escape');
			await expect(toggle).toHaveAttribute('aria-expanded', 'false');
			await expect(toggle).toBeFocused();
			await expect(page.getByTestId('workspace-name')).toBeHidden();
			// A tap on the dimmed rest closes it too.
			await toggle.click();
			await page.getByTestId('drawer-scrim').click({ position: { x: size.width - 20, y: size.height / 2 } });
			await expect(toggle).toHaveAttribute('aria-expanded', 'false');
			await toggle.click();
			expect((await page.getByTestId('channel-general').boundingBox())!.height).toBeGreaterThanOrEqual(44);
		}
		await page.getByTestId('channel-general').click();
		await expect(page.getByTestId('channel-title')).toContainText('general');
		if (phone) await expect(page.getByTestId('workspace-name')).toBeHidden();
		await noSidewaysScroll(page, 'after switching channel');

		expect(problems).toEqual([]);
	});
}
