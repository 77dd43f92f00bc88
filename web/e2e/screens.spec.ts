// The main screens on the demo workspace (serve --demo), saved under
// web/test-results/screenshots: log in, the channel with a thread open and
// someone typing, the member list, the people directory. docs/screenshot.png
// is one of these. The checks are what each screen must show.
import type { Page } from '@playwright/test';
import { test, expect, watchPage } from './fixtures';
import { ParleyServer } from './harness';
import { countRequests, storms } from './budget';

async function logIn(page: Page, base: string, who: string) {
	await page.goto(base + '/');
	await page.getByLabel('Email').fill(`${who}@demo.parley.dev`);
	await page.getByLabel('Password').fill('parley-demo');
	await page.getByTestId('auth-submit').click();
	await expect(page.getByTestId('workspace-name')).toHaveText('Demo');
}

test('main screens of the demo workspace', async ({ browser, shot }) => {
	const demo = new ParleyServer({ demo: true });
	await demo.start();
	try {
		const aliceCtx = await browser.newContext({ permissions: ['notifications'] });
		const bobCtx = await browser.newContext();
		const alice = await aliceCtx.newPage();
		const bob = await bobCtx.newPage();
		const problems = [alice, bob].map(watchPage);
		const calls = [alice, bob].map(countRequests);

		await alice.goto(demo.url + '/');
		await expect(alice.getByTestId('auth-submit')).toBeVisible();
		await shot(alice, 'login');

		await logIn(alice, demo.url, 'alice');
		await logIn(bob, demo.url, 'bob');
		for (const p of [alice, bob]) {
			await p.getByTestId('channel-general').click();
			await expect(p.getByTestId('channel-title')).toContainText('general');
		}

		// Alice opens a thread on Bob's message and replies.
		const bobsLine = alice.getByTestId('message-list').getByTestId('message').filter({ hasText: 'hold the migration' });
		await bobsLine.hover();
		await bobsLine.getByTestId('action-reply').click();
		await alice.getByTestId('thread-composer').fill('Thanks Bob! I will ping you once the **staging** work is done.');
		await alice.getByTestId('thread-composer').press('Enter');
		await expect(alice.getByTestId('thread-replies').getByTestId('message')).toHaveCount(1);
		await expect(bobsLine.getByTestId('reply-count')).toHaveText(/1 reply/);

		// Bob is typing in #general: Alice sees it, and his dot is green.
		await bob.getByTestId('composer').pressSequentially('Sounds good, ', { delay: 15 });
		await expect(alice.getByTestId('channel-view').getByTestId('typing-indicator')).toHaveText('Bob Okafor is typing…');
		await expect(bobsLine.locator('[data-presence]')).toHaveAttribute('data-presence', 'online');
		await alice.getByTestId('composer').click();
		await shot(alice, 'channel');

		// Escape closes the thread panel.
		await alice.keyboard.press('Escape');
		await expect(alice.getByTestId('thread-panel')).toBeHidden();

		// The member list (with presence) and the directory.
		await alice.getByTestId('member-count').click();
		await expect(alice.getByTestId('member-panel').getByTestId('member').first()).toBeVisible();
		await shot(alice, 'members');
		await alice.getByTestId('nav-directory').click();
		await expect(alice.getByTestId('directory-user').filter({ hasText: 'Carol' })).toBeVisible();
		await shot(alice, 'directory');

		expect(problems.flat(), demo.logTail()).toEqual([]);
		for (const c of calls) expect(storms(c, 15), JSON.stringify([...c])).toEqual([]);
		await aliceCtx.close();
		await bobCtx.close();
	} catch (e) {
		console.log(demo.logTail());
		throw e;
	} finally {
		await demo.dispose();
	}
});
