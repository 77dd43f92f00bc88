// A list read from the server a page at a time (channel browser, directory,
// members, search). Each load supersedes those in flight: a page that
// answers after a newer load began is dropped, so the list never shows
// the results of an earlier query or another channel.

export interface Page<T> {
	items: T[];
	next_cursor?: string;
}

/** Fetches one page; null when there is nothing to load yet (no workspace). */
export type PageFetcher<T> = (cursor: string | undefined) => Promise<Page<T>> | null;

export class PagedList<T> {
	items = $state.raw<T[]>([]);
	/** The cursor of the next page; undefined at the end. */
	cursor = $state<string | undefined>(undefined);
	loading = $state(false);
	/** The last load's error message, '' after a success. */
	error = $state('');
	#seq = 0;

	constructor(
		private fetchPage: PageFetcher<T>,
		private onError?: (message: string) => void,
	) {}

	/** Loads the first page, or with more the next one after the last. */
	async load(more = false): Promise<void> {
		const pending = this.fetchPage(more ? this.cursor : undefined);
		if (!pending) return;
		const mine = ++this.#seq;
		this.loading = true;
		this.error = '';
		try {
			const page = await pending;
			if (mine !== this.#seq) return;
			this.items = more ? [...this.items, ...page.items] : page.items;
			this.cursor = page.next_cursor || undefined;
		} catch (e) {
			if (mine !== this.#seq) return;
			this.error = (e as Error).message;
			this.onError?.(this.error);
		} finally {
			if (mine === this.#seq) this.loading = false;
		}
	}
}
