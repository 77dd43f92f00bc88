// Load timings of the web client (issue 14), from Chromium's Navigation
// Timing (PerformanceNavigationTiming) and a MutationObserver that notes when
// the channel's first message is on screen: a first load with an empty cache
// (signed in already, as a returning user on a new device would be after
// logging in) and reloads with a warm cache. It logs them and writes
// test-results/load-timings.json; docs/benchmarks.md records a run.
import type { Page } from '@playwright/test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, watchPage } from './fixtures';
import { resultsDir } from './harness';

interface Timing {
	responseEnd: number;
	domContentLoaded: number;
	loadEventEnd: number;
	firstMessage: number;
	transferred: number;
}

declare global {
	interface Window {
		__firstMessageAt?: number;
	}
}

/** Note when the first channel message is in the DOM (before the app runs). */
function watchFirstMessage() {
	new MutationObserver((_, obs) => {
		if (document.querySelector('[data-testid="message-list"] [data-testid="message"]')) {
			window.__firstMessageAt = performance.now();
			obs.disconnect();
		}
	}).observe(document, { childList: true, subtree: true });
}

async function timing(page: Page): Promise<Timing> {
	await expect(page.getByTestId('message-list').getByTestId('message').first()).toBeVisible();
	await page.waitForFunction(
		() => performance.getEntriesByType('navigation')[0] && (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).loadEventEnd > 0,
	);
	return page.evaluate(() => {
		const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
		const res = performance.getEntriesByType('resource') as PerformanceResourceTiming[];
		const r = (n: number) => Math.round(n * 10) / 10;
		return {
			responseEnd: r(nav.responseEnd),
			domContentLoaded: r(nav.domContentLoadedEventEnd),
			loadEventEnd: r(nav.loadEventEnd),
			firstMessage: r(window.__firstMessageAt ?? NaN),
			// Bytes over the wire for the document, scripts and styles (0 when cached).
			transferred: nav.transferSize + res.filter((e) => /\.(js|css)$/.test(new URL(e.name).pathname)).reduce((n, e) => n + e.transferSize, 0),
		};
	});
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test('first load and reload timings', async ({ browser, page, server, newUser }) => {
	const u = newUser('load');
	await page.goto('/');
	await page.getByTestId('tab-signup').click();
	await page.getByLabel('Full name').fill(u.name);
	await page.getByLabel('Handle').fill(u.handle);
	await page.getByLabel('Email').fill(u.email);
	await page.getByLabel('Password').fill(u.password);
	await page.getByTestId('auth-submit').click();
	await page.getByTestId('ws-name').fill('Timings');
	await page.getByTestId('ws-create').click();
	await page.getByTestId('composer').fill('The first message of the channel');
	await page.getByTestId('composer').press('Enter');
	await expect(page.getByTestId('message-list').getByTestId('message')).not.toHaveAttribute('data-message-id', /^local:/);
	const signedIn = await page.context().storageState();

	// A new browser context: empty HTTP cache, the stored session.
	const ctx = await browser.newContext({ baseURL: server.url, storageState: signedIn });
	const p = await ctx.newPage();
	const problems = watchPage(p);
	await p.addInitScript(watchFirstMessage);
	await p.goto('/');
	const first = await timing(p);
	const reloads: Timing[] = [];
	for (let i = 0; i < 3; i++) {
		await p.reload();
		reloads.push(await timing(p));
	}
	await ctx.close();

	const reload = Object.fromEntries(Object.keys(first).map((k) => [k, median(reloads.map((t) => t[k as keyof Timing]))])) as unknown as Timing;
	const report = { first, reload, reloads };
	console.log(`load timings (ms from navigation start; transferred in bytes):\n${JSON.stringify(report, null, 1)}`);
	writeFileSync(join(resultsDir, 'load-timings.json'), JSON.stringify(report, null, '\t'));

	for (const t of [first, ...reloads]) {
		expect(t.responseEnd).toBeGreaterThan(0);
		expect(t.domContentLoaded).toBeGreaterThanOrEqual(t.responseEnd);
		expect(t.firstMessage).toBeGreaterThan(t.responseEnd);
	}
	expect(first.transferred, 'a cold load transfers the bundle').toBeGreaterThan(20_000);
	expect(problems).toEqual([]);
});
