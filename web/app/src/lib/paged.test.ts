import { describe, expect, it } from 'vitest';
import { PagedList, type Page } from './paged.svelte';

// A fetcher whose answers the test releases one by one, in any order.
function deferred() {
	const calls: { cursor: string | undefined; resolve: (p: Page<number>) => void; reject: (e: Error) => void }[] = [];
	const fetch = (cursor: string | undefined) => new Promise<Page<number>>((resolve, reject) => calls.push({ cursor, resolve, reject }));
	return { calls, fetch };
}

describe('PagedList', () => {
	it('appends the next page from the cursor and stops at the end', async () => {
		const { calls, fetch } = deferred();
		const list = new PagedList<number>(fetch);
		const first = list.load();
		expect(list.loading).toBe(true);
		calls[0].resolve({ items: [1, 2], next_cursor: 'c2' });
		await first;
		expect(list.items).toEqual([1, 2]);
		expect(list.cursor).toBe('c2');
		const second = list.load(true);
		expect(calls[1].cursor).toBe('c2');
		calls[1].resolve({ items: [3] });
		await second;
		expect(list.items).toEqual([1, 2, 3]);
		expect(list.cursor).toBeUndefined();
		expect(list.loading).toBe(false);
	});

	it('drops a page that answers after a newer load began', async () => {
		const { calls, fetch } = deferred();
		const list = new PagedList<number>(fetch);
		const old = list.load();
		const fresh = list.load();
		calls[1].resolve({ items: [9] });
		await fresh;
		calls[0].resolve({ items: [1, 2, 3], next_cursor: 'stale' });
		await old;
		expect(list.items).toEqual([9]);
		expect(list.cursor).toBeUndefined();
		expect(list.loading).toBe(false);
	});

	it('reports the error of the latest load only', async () => {
		const { calls, fetch } = deferred();
		const seen: string[] = [];
		const list = new PagedList<number>(fetch, (m) => seen.push(m));
		const old = list.load();
		const fresh = list.load();
		calls[0].reject(new Error('stale failure'));
		await old;
		expect(seen).toEqual([]);
		calls[1].reject(new Error('boom'));
		await fresh;
		expect(list.error).toBe('boom');
		expect(seen).toEqual(['boom']);
		expect(list.loading).toBe(false);
	});

	it('does nothing while the fetcher has nothing to load', async () => {
		const list = new PagedList<number>(() => null);
		await list.load();
		expect(list.loading).toBe(false);
		expect(list.items).toEqual([]);
	});
});
