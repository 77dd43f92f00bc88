// Accessibility (issue 14): axe-core on every screen of the web client, in
// the light and the dark theme, on the demo workspace (serve --demo). Any
// serious or critical violation fails the test, colour contrast included.
//
// With PARLEY_SCREENSHOTS=1 the same walk saves each screen, in both themes
// and at phone size, to docs/screenshots/<screen>-<theme>.png (1280×800,
// phones 390×844) for the README. Off by default, so that a test run never
// changes tracked files.
import AxeBuilder from '@axe-core/playwright';
import type { Browser, Page } from '@playwright/test';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, watchPage } from './fixtures';
import { ParleyServer, repoDir } from './harness';

const themes = ['light', 'dark'] as const;
type Theme = (typeof themes)[number];
const shotsDir = process.env.PARLEY_SCREENSHOTS === '1' ? join(repoDir, 'docs', 'screenshots') : '';

/**
 * Run axe on the page as it is; fail on serious and critical violations. The
 * light walk runs every WCAG 2.1 A/AA rule. The dark walk goes through the
 * same screens with the same DOM (the theme is CSS custom properties on
 * <html>), so only the rules that read colours can find anything new there:
 * it runs those alone, which saves the suite the theme-blind half of the work.
 */
async function audit(page: Page, screen: string, theme: Theme) {
	const axe = new AxeBuilder({ page });
	if (theme === 'dark') axe.withRules(['color-contrast', 'link-in-text-block']);
	else axe.withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']);
	const { violations } = await axe.analyze();
	const bad = violations
		.filter((v) => v.impact === 'serious' || v.impact === 'critical')
		.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
	expect(bad, `axe on ${screen} (${theme})`).toEqual([]);
}

async function shot(page: Page, screen: string, theme: Theme) {
	if (!shotsDir) return;
	await page.mouse.move(0, page.viewportSize()!.height - 1); // no hover toolbar in the picture
	// Let transitions (the drawer) end and the caret not matter.
	await page.screenshot({ path: join(shotsDir, `${screen}-${theme}.png`), animations: 'disabled', caret: 'hide' });
}

async function screen(page: Page, name: string, theme: Theme) {
	const t0 = Date.now();
	await audit(page, name, theme);
	console.log(`axe ${name} ${theme}: ${Date.now() - t0} ms`);
	await shot(page, name, theme);
}

async function walk(browser: Browser, base: string, theme: Theme) {
	const ctx = await browser.newContext({ baseURL: base, colorScheme: theme, viewport: { width: 1280, height: 800 } });
	const page = await ctx.newPage();
	const problems = watchPage(page);
	try {
		await page.goto('/');
		await expect(page.locator('html')).toHaveAttribute('data-theme', theme);
		await expect(page.getByTestId('auth-submit')).toBeVisible();
		await screen(page, 'auth', theme);

		await page.getByLabel('Email').fill('alice@demo.parley.dev');
		await page.getByLabel('Password').fill('parley-demo');
		await page.getByTestId('auth-submit').click();
		await page.getByTestId('channel-general').click();
		await expect(page.getByTestId('channel-title')).toContainText('general');
		const list = page.getByTestId('message-list');
		await expect(list.getByTestId('message').first()).toBeVisible();
		await screen(page, 'chat', theme);

		// A thread: one with replies if the demo has one in view, else a new one.
		const withReplies = list.getByTestId('reply-count').first();
		if (await withReplies.isVisible()) await withReplies.click();
		else {
			const m = list.getByTestId('message').last();
			await m.hover();
			await m.getByTestId('action-reply').click();
		}
		await expect(page.getByTestId('thread-panel')).toBeVisible();
		await expect(page.getByTestId('thread-panel').getByTestId('message').first()).toBeVisible();
		await screen(page, 'thread', theme);
		await page.getByTestId('close-panel').click();

		await page.getByTestId('search-input').fill('the');
		await page.getByTestId('search-input').press('Enter');
		await expect(page.getByTestId('search-result').first()).toBeVisible();
		await screen(page, 'search', theme);

		await page.getByTestId('nav-directory').click();
		await expect(page.getByTestId('directory-user').first()).toBeVisible();
		await screen(page, 'directory', theme);

		await page.getByTestId('nav-browse').click();
		await expect(page.getByTestId('browse-channel').first()).toBeVisible();
		await screen(page, 'browse', theme);

		await page.getByTestId('channel-general').click();
		await page.getByTestId('open-switcher').click();
		await page.getByTestId('switcher-input').fill('ra');
		await expect(page.getByTestId('switcher-option').first()).toBeVisible();
		await screen(page, 'quick-switcher', theme);
		await page.keyboard.press('Escape');

		await page.getByTestId('workspace-menu').click();
		await page.getByTestId('menu-invite').click();
		await expect(page.getByTestId('invite-code')).not.toBeEmpty();
		await screen(page, 'invite', theme);
		await page.getByTestId('close-dialog').click();

		await page.getByTestId('create-channel').click();
		await expect(page.getByTestId('create-channel-dialog')).toBeVisible();
		await screen(page, 'create-channel', theme);
		await page.keyboard.press('Escape');

		await page.getByTestId('open-preferences').click();
		await expect(page.getByTestId(`theme-system`)).toBeChecked();
		await screen(page, 'preferences', theme);
		await page.getByTestId('open-preferences').click();

		await page.getByTestId('workspace-menu').click();
		await page.getByRole('menuitem', { name: 'Switch workspace' }).click();
		await expect(page.getByTestId('workspace-list')).toBeVisible();
		await screen(page, 'workspaces', theme);

		// Phone size: the channel, the drawer, a thread over the channel.
		await page.setViewportSize({ width: 390, height: 844 });
		await page.getByTestId('workspace-list').getByRole('button').first().click();
		await expect(page.getByTestId('channel-title')).toBeVisible();
		await expect(list.getByTestId('message').first()).toBeVisible();
		await shot(page, 'chat-phone', theme); // the desktop's components: audited above
		await page.getByTestId('open-sidebar').click();
		await expect(page.getByTestId('workspace-name')).toBeVisible();
		await screen(page, 'drawer-phone', theme);
		await page.keyboard.press('Escape');
		await expect(page.getByTestId('workspace-name')).toBeHidden();
		const m = list.getByTestId('message').last();
		await m.hover();
		await m.getByTestId('action-reply').click();
		await expect(page.getByTestId('thread-panel')).toBeVisible();
		await screen(page, 'thread-phone', theme);

		expect(problems).toEqual([]);
	} finally {
		await ctx.close();
	}
}

test('every screen passes axe in both themes', async ({ browser }) => {
	// Some thirty axe runs: about a second each on an idle machine, many more on a busy one.
	test.setTimeout(600_000);
	if (shotsDir) mkdirSync(shotsDir, { recursive: true });
	const demo = new ParleyServer({ demo: true });
	await demo.start();
	try {
		for (const theme of themes) await walk(browser, demo.url, theme);
	} catch (e) {
		console.log(demo.logTail());
		throw e;
	} finally {
		await demo.dispose();
	}
});

test('the theme switch overrides the system and survives a reload', async ({ page, newUser }) => {
	const problems = watchPage(page);
	await page.emulateMedia({ colorScheme: 'light' });
	const u = newUser('theme');
	await page.goto('/');
	await expect(page.locator('html')).toHaveAttribute('data-theme', 'light');
	await page.getByTestId('tab-signup').click();
	await page.getByLabel('Full name').fill(u.name);
	await page.getByLabel('Handle').fill(u.handle);
	await page.getByLabel('Email').fill(u.email);
	await page.getByLabel('Password').fill(u.password);
	await page.getByTestId('auth-submit').click();
	await page.getByTestId('ws-name').fill('Themes');
	await page.getByTestId('ws-create').click();
	await expect(page.getByTestId('channel-title')).toContainText('general');

	await page.getByTestId('open-preferences').click();
	await page.getByTestId('theme-dark').check();
	await page.getByTestId('density-compact').check();
	await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
	await expect(page.locator('html')).toHaveAttribute('data-density', 'compact');
	const bg = () => page.evaluate(() => getComputedStyle(document.querySelector('.main')!).backgroundColor);
	expect(await bg()).toBe('rgb(26, 29, 33)');
	// Escape closes the menu and gives focus back to its button.
	await page.keyboard.press('Escape');
	await expect(page.getByTestId('preferences')).toBeHidden();
	await expect(page.getByTestId('open-preferences')).toBeFocused();

	// After a reload the choice is there before the app starts (public/theme.js).
	await page.reload();
	await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
	await expect(page.locator('html')).toHaveAttribute('data-density', 'compact');
	await expect(page.getByTestId('channel-title')).toContainText('general');

	// Back to the system's choice: it follows the system as it changes.
	await page.getByTestId('open-preferences').click();
	await page.getByTestId('theme-system').check();
	await page.getByTestId('density-comfortable').check();
	await expect(page.locator('html')).toHaveAttribute('data-theme', 'light');
	await page.emulateMedia({ colorScheme: 'dark' });
	await expect(page.locator('html')).toHaveAttribute('data-theme', 'dark');
	expect(await page.evaluate(() => [localStorage.getItem('parley.theme'), localStorage.getItem('parley.density')])).toEqual([null, null]);
	expect(problems).toEqual([]);
});
