// Drafts: what the user typed in a composer and did not send, per channel
// and per thread, kept in localStorage under one key per user and
// workspace, so that switching channels or reloading the page loses
// nothing. Sending clears the draft. Storage is capped (drafts are cut at
// a message's length, the oldest go past MAX_DRAFTS or MAX_STORED_CHARS),
// and a storage that is missing, corrupt or full only means drafts are not
// kept: nothing throws.

export const MAX_DRAFTS = 50;
export const MAX_DRAFT_CHARS = 40_000;
export const MAX_STORED_CHARS = 400_000;

/** One draft: its text, the channel it is in (a thread's too), when it was last typed. */
export interface Draft {
	text: string;
	ch: string;
	at: number;
}

type Drafts = Record<string, Draft>;

/** The part of the Web Storage API drafts use. */
export interface DraftStorage {
	getItem(key: string): string | null;
	setItem(key: string, value: string): void;
	removeItem(key: string): void;
}

/** Where a draft lives: a channel's composer, or a thread's. */
export const channelDraft = (channelId: string) => `c:${channelId}`;
export const threadDraft = (rootId: string) => `t:${rootId}`;

export class DraftStore {
	/** The channels with a draft (their own, or one of their threads'), for the sidebar. */
	channels = $state.raw<ReadonlySet<string>>(new Set());
	private loadedKey: string | undefined;

	constructor(
		private readonly storage: () => DraftStorage | undefined,
		/** The storage key of the current user and workspace; undefined before both are known. */
		private readonly scope: () => string | undefined,
	) {}

	/** The draft at where, or ''. */
	get(where: string): string {
		return this.read()[where]?.text ?? '';
	}

	/** Keep text as the draft at where (in channel ch); blank text removes it. */
	set(where: string, ch: string, text: string): void {
		const all = this.read();
		if (!text.trim()) {
			if (!all[where]) return;
			delete all[where];
		} else {
			// Later than every other draft, even within one millisecond: the oldest go first.
			const latest = Math.max(0, ...Object.values(all).map((d) => d.at));
			all[where] = { text: text.slice(0, MAX_DRAFT_CHARS), ch, at: Math.max(Date.now(), latest + 1) };
		}
		this.write(all);
	}

	/** Forget the draft at where (it was sent). */
	clear(where: string): void {
		this.set(where, '', '');
	}

	/** Whether the channel has a draft (its own or a thread's); call sync when the scope may have changed. */
	has(channelId: string): boolean {
		return this.channels.has(channelId);
	}

	/** Load the channels with drafts when the user or workspace changed (not from a template: it may set state). */
	sync(): void {
		if (this.scope() !== this.loadedKey) this.read();
	}

	private read(): Drafts {
		const key = this.scope();
		let all: Drafts = {};
		if (key) {
			try {
				const v: unknown = JSON.parse(this.storage()?.getItem(key) ?? '{}');
				if (v && typeof v === 'object' && !Array.isArray(v)) {
					for (const [k, d] of Object.entries(v as Record<string, unknown>)) {
						const x = d as Partial<Draft> | null;
						if (x && typeof x.text === 'string' && typeof x.ch === 'string') all[k] = { text: x.text, ch: x.ch, at: Number(x.at) || 0 };
					}
				}
			} catch {
				all = {}; // corrupt: start afresh (the next write replaces it)
			}
		}
		if (key !== this.loadedKey) {
			this.loadedKey = key;
			this.publish(all);
		}
		return all;
	}

	private write(all: Drafts): void {
		const key = this.scope();
		const storage = this.storage();
		this.publish(all);
		if (!key || !storage) return;
		// Newest first; the oldest go past the caps.
		let keep = Object.entries(all).sort((a, b) => b[1].at - a[1].at);
		if (keep.length > MAX_DRAFTS) keep = keep.slice(0, MAX_DRAFTS);
		let json = JSON.stringify(Object.fromEntries(keep));
		while (json.length > MAX_STORED_CHARS && keep.length > 1) {
			keep = keep.slice(0, -1);
			json = JSON.stringify(Object.fromEntries(keep));
		}
		for (let tries = 0; tries < 3; tries++) {
			try {
				if (keep.length) storage.setItem(key, json);
				else storage.removeItem(key);
				break;
			} catch {
				// Full (other keys use the quota too): keep the newer half and try again.
				keep = keep.slice(0, Math.floor(keep.length / 2));
				json = JSON.stringify(Object.fromEntries(keep));
			}
		}
		this.publish(Object.fromEntries(keep));
	}

	private publish(all: Drafts): void {
		const next = new Set(Object.values(all).map((d) => d.ch));
		const cur = this.channels;
		if (next.size !== cur.size || [...next].some((c) => !cur.has(c))) this.channels = next;
	}
}

function localStore(): DraftStorage | undefined {
	try {
		return globalThis.localStorage ?? undefined;
	} catch {
		return undefined;
	}
}

/** The app's drafts: the signed-in user's, in the open workspace. */
export function appDrafts(scope: () => { userId?: string; workspaceId?: string }): DraftStore {
	return new DraftStore(localStore, () => {
		const { userId, workspaceId } = scope();
		return userId && workspaceId ? `parley.drafts.${userId}.${workspaceId}` : undefined;
	});
}
