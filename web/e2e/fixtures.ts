// Playwright fixtures for Parley scenarios. Import `test` and `expect` from
// here instead of @playwright/test:
//
//   test('…', async ({ server, alice, bob, shot }) => { … });
//
// - server: the worker's ParleyServer (server.url, server.restart()).
// - page / context: the default ones, with baseURL = server.url.
// - alice, bob: two separate browser contexts (separate storage, so two
//   users), each with one page at baseURL, notifications permitted.
// - shot(page, name): a full-page screenshot in web/test-results/screenshots/<name>.png.
// - newUser(prefix): unique sign-up details.

import { test as base, expect, type Page } from '@playwright/test';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ParleyServer, chromiumPath, newUser, resultsDir } from './harness';

export const screenshotDir = join(resultsDir, 'screenshots');

interface WorkerFixtures {
	server: ParleyServer;
}

interface TestFixtures {
	alice: Page;
	bob: Page;
	shot: (page: Page, name: string) => Promise<string>;
	newUser: typeof newUser;
}

export const test = base.extend<TestFixtures, WorkerFixtures>({
	server: [
		async ({}, use) => {
			const s = new ParleyServer();
			await s.start();
			try {
				await use(s);
			} finally {
				await s.dispose();
			}
		},
		{ scope: 'worker', timeout: 60_000 },
	],
	baseURL: async ({ server }, use) => {
		await use(server.url);
	},
	alice: async ({ browser, server }, use) => {
		const ctx = await browser.newContext({ baseURL: server.url, permissions: ['notifications'] });
		const page = await ctx.newPage();
		await use(page);
		await ctx.close();
	},
	bob: async ({ browser, server }, use) => {
		const ctx = await browser.newContext({ baseURL: server.url, permissions: ['notifications'] });
		const page = await ctx.newPage();
		await use(page);
		await ctx.close();
	},
	shot: async ({}, use) => {
		mkdirSync(screenshotDir, { recursive: true });
		await use(async (page, name) => {
			const path = join(screenshotDir, `${name}.png`);
			await page.screenshot({ path, fullPage: true });
			return path;
		});
	},
	newUser: async ({}, use) => {
		await use(newUser);
	},
});

test.beforeEach(() => {
	test.skip(!existsSync(chromiumPath) && process.env.CI !== 'true', `${chromiumPath} is missing: install Debian's chromium to run the e2e suite`);
});

/** Fail the test on any CSP violation or uncaught error in the page. */
export function watchPage(page: Page): string[] {
	const problems: string[] = [];
	page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
	page.on('console', (m) => {
		if (m.type() === 'error' && /Content.Security.Policy|Refused to/i.test(m.text())) problems.push(`csp: ${m.text()}`);
	});
	return problems;
}

export { expect };
