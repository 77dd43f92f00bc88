// Long history in a real browser: the message list is virtualised (only
// rows near the viewport are in the DOM), scrolling up loads older pages
// until the first message, and the DOM stays bounded all the way.
import type { Page } from '@playwright/test';
import { test, expect, watchPage } from './fixtures';

const TOTAL = 300;

async function api<T>(base: string, token: string | null, method: string, path: string, body?: unknown): Promise<T> {
	const res = await fetch(`${base}/api/v1${path}`, {
		method,
		headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), 'Content-Type': 'application/json' },
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const text = await res.text();
	if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
	return (text ? JSON.parse(text) : undefined) as T;
}

const rows = (page: Page) => page.getByTestId('message-list').getByTestId('message');
const label = (i: number) => `History line ${String(i).padStart(3, '0')}`;

test('a long channel is virtualised and loads older history on scroll', async ({ page, server, newUser, shot }) => {
	const problems = watchPage(page);
	const u = newUser('hist');
	const { token } = await api<{ token: string }>(server.url, null, 'POST', '/auth/signup', {
		email: u.email,
		password: u.password,
		name: 'Hedda History',
		handle: u.handle,
	});
	const ws = await api<{ id: string }>(server.url, token, 'POST', '/workspaces', { name: 'History Co', slug: `hist-${u.handle.slice(4, 16)}` });
	const boot = await api<{ channels: { id: string; name: string }[] }>(server.url, token, 'POST', '/boot', { workspace_id: ws.id });
	const general = boot.channels.find((c) => c.name === 'general')!;
	for (let i = 1; i <= TOTAL; i++) {
		// Every tenth line is long enough to wrap: rows have different heights.
		const text =
			i === 42
				? `${label(i)} mentions the zeppelin`
				: i % 10 === 0
					? `${label(i)} — ${'a longer line that wraps across the width of the pane '.repeat(4)}`
					: label(i);
		await api(server.url, token, 'POST', `/channels/${general.id}/messages`, { text, client_msg_id: `hist-${i}` });
	}

	await page.goto('/');
	await page.evaluate((t) => localStorage.setItem('parley.token', t), token);
	await page.reload();
	await expect(page.getByTestId('channel-title')).toContainText('general');

	// The newest line is in view, the oldest is not even in the DOM.
	await expect(rows(page).filter({ hasText: label(TOTAL) })).toBeVisible();
	await expect(rows(page).filter({ hasText: label(1) })).toHaveCount(0);
	const initial = await rows(page).count();
	expect(initial).toBeGreaterThan(5);
	expect(initial).toBeLessThan(80);

	// Scroll up a screenful at a time, as a reader would. Older pages load on
	// the way and the view never jumps: the first line in view only ever moves
	// back in history, until line 1.
	const list = page.getByTestId('message-list');
	const firstInView = () =>
		list.evaluate((el) => {
			const top = el.getBoundingClientRect().top;
			for (const r of el.querySelectorAll('[data-testid="message"]')) {
				if (r.getBoundingClientRect().bottom > top + 1) return Number(/History line (\d+)/.exec(r.textContent ?? '')?.[1] ?? NaN);
			}
			return NaN;
		});
	let most = initial;
	let prev = await firstInView();
	const seen: number[] = [prev];
	for (let step = 0; step < 200 && prev !== 1; step++) {
		await list.evaluate((el) => el.scrollBy(0, -500));
		await expect(page.getByText('Loading older messages…')).toHaveCount(0);
		most = Math.max(most, await rows(page).count());
		const now = await firstInView();
		seen.push(now);
		expect(now, `first line in view, step by step: ${seen.join(' ')}`).toBeLessThanOrEqual(prev);
		// 500 px is about 20 short lines: a bigger move means the view jumped.
		expect(prev - now, `first line in view, step by step: ${seen.join(' ')}`).toBeLessThanOrEqual(25);
		prev = now;
	}
	expect(prev).toBe(1);
	await expect(page.getByText(`This is the very beginning of #general.`)).toBeVisible();
	await shot(page, 'history-top');

	// All 300 were loaded, but the DOM never held more than a window of them.
	expect(most).toBeLessThan(100);
	expect(
		await rows(page)
			.filter({ hasText: label(TOTAL) })
			.count(),
	).toBe(0);

	// Back at the bottom, the newest line returns and new messages follow live.
	await list.evaluate((el) => (el.scrollTop = el.scrollHeight));
	await expect(rows(page).filter({ hasText: label(TOTAL) })).toBeVisible();
	await page.getByTestId('composer').fill('And one more, live');
	await page.getByTestId('composer').press('Enter');
	await expect(rows(page).filter({ hasText: 'And one more, live' })).toBeInViewport();

	// Search: the hit is highlighted; opening it loads history around it and
	// flashes it, far from the window on screen.
	await list.evaluate((el) => (el.scrollTop = el.scrollHeight));
	await expect(rows(page).filter({ hasText: label(42) })).toHaveCount(0);
	const hit = page.getByTestId('search-result').filter({ hasText: 'zeppelin' });
	await expect(async () => {
		// The index is fed asynchronously: search again until the hit shows.
		await page.getByTestId('search-input').fill('zeppelin');
		await page.getByTestId('search-input').press('Enter');
		await expect(hit).toBeVisible({ timeout: 1000 });
	}).toPass({ timeout: 30_000 });
	await expect(hit.locator('mark')).toHaveText(/zeppelin/i);
	await shot(page, 'search');
	await hit.click();
	const target = rows(page).filter({ hasText: label(42) });
	await expect(target).toBeInViewport();
	await expect(target).toHaveClass(/flash/);
	// Sending from an old window goes back to the live end and shows the message.
	await page.getByTestId('composer').fill('Sent from deep in history');
	await page.getByTestId('composer').press('Enter');
	await expect(rows(page).filter({ hasText: 'Sent from deep in history' })).toBeInViewport();
	await expect(rows(page).filter({ hasText: label(42) })).toHaveCount(0);

	// Jump again; below the hit, newer pages load on scroll back down to the live end.
	await page.getByTestId('search-input').fill('zeppelin');
	await page.getByTestId('search-input').press('Enter');
	await hit.click();
	await expect(rows(page).filter({ hasText: label(42) })).toBeInViewport();
	await expect(async () => {
		await list.evaluate((el) => (el.scrollTop = el.scrollHeight));
		await expect(rows(page).filter({ hasText: 'And one more, live' })).toBeVisible({ timeout: 1000 });
	}).toPass({ timeout: 30_000 });
	expect(problems, server.logTail()).toEqual([]);
});
