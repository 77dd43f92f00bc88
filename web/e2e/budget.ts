// Request budgets for the e2e specs.
import type { Page } from '@playwright/test';

/**
 * Count the page's API calls by method and route (ids folded), so that a
 * feedback loop (an effect that re-fires a request on every state change)
 * fails the test instead of going unnoticed.
 */
export function countRequests(page: Page): Map<string, number> {
	const counts = new Map<string, number>();
	page.on('request', (r) => {
		const u = new URL(r.url());
		if (!u.pathname.startsWith('/api/')) return;
		const route = `${r.method()} ${u.pathname.replace(/\/[A-Za-z0-9_-]{20,}/g, '/:id')}`;
		counts.set(route, (counts.get(route) ?? 0) + 1);
	});
	return counts;
}

/** The routes called more than `max` times. */
export const storms = (counts: Map<string, number>, max: number) => [...counts].filter(([, n]) => n > max);
