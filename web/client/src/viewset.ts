// ViewSet: the session's users in view, kept equal to the users on screen.
//
// The server sends a session the presence, profile changes (user.updated)
// and status changes (user.status) of the users in its presence_sub set
// only (and of its own user). The app reports, per part of the screen
// (sidebar, messages, thread, profile, member list, ...), the users that
// part shows; the view set is their union, capped at the server's 500 with
// the earlier sources of `order` kept first.
//
// Sending: a frame goes delayMs after the view settled (each change waits
// again, but never more than maxWaitMs after the first unsent change), two
// frames are at least minIntervalMs apart, so a scrolling list costs at
// most one frame a second (the gateway allows 1,200 a minute, burst 200),
// and only when the set differs from the one last sent. The ids go in
// priority order: were the server to cut the list, it keeps the first.
//
// Freshness: while a user is out of view, their changes do not come. When
// they come back into view, a cached copy that may have missed a change is
// fetched again (POST /users/batch): one received before the user last
// left the set, or older than freshMs while never watched (boot's users, a
// message's just-in-time users a while ago). A user who left the set also
// loses their presence until the server answers the new set with it. After
// a fresh identify the new session missed everything since the old one
// died: every cached user in view is fetched again. A resumed session keeps
// its set on the server and gets its missed events replayed: only users
// that entered the set while no socket was live are fetched.

/** What the view set needs from the session. */
export interface ViewSetHost {
	/** Send the set as the session's presence_sub (the gateway re-sends it on a new session). */
	send(ids: string[]): void;
	/** Whether a socket is live now (a frame sent now reaches the session). */
	live(): boolean;
	/** Fetch these users again, although cached. */
	refresh(ids: string[]): void;
	/** When the cached copy of a user came (the same clock as now), or undefined when none is cached. */
	receivedAt(id: string): number | undefined;
	/** These users left the set: their presence is no longer kept current. */
	left(ids: string[]): void;
}

export interface ViewSetOptions {
	/** Send this long after the last change (default 500 ms). */
	delayMs?: number;
	/** But at most this long after the first unsent change (default 2000 ms). */
	maxWaitMs?: number;
	/** At least this long between two frames (default 1000 ms). */
	minIntervalMs?: number;
	/** The most users in the set (default 500, the server's cap). */
	max?: number;
	/** A never-watched cached copy at most this old counts as fresh when its user comes into view (default 2000 ms). */
	freshMs?: number;
	/** Sources in priority order: above the cap, users of earlier sources are kept (unknown sources come last). */
	order?: string[];
	/** The clock (ms); default Date.now. */
	now?: () => number;
}

/** The app's parts in the order their users are kept above the cap. */
export const VIEW_SOURCES = ['sidebar', 'header', 'profile', 'thread', 'messages', 'typing', 'members', 'threads', 'search', 'directory'];

export class ViewSet {
	private readonly delayMs: number;
	private readonly maxWaitMs: number;
	private readonly minIntervalMs: number;
	private readonly max: number;
	private readonly freshMs: number;
	private readonly order: string[];
	private readonly now: () => number;

	private readonly bySource = new Map<string, string[]>();
	/** The set as last sent. */
	private sent = new Set<string>();
	private lastSentAt = -Infinity;
	/** Per user, when they last left the sent set. */
	private readonly leftAt = new Map<string, number>();
	/** Users that entered the set while no socket was live: fetched when a session is live. */
	private readonly owed = new Set<string>();
	private timer: ReturnType<typeof setTimeout> | undefined;
	/** When the first change not sent yet came (undefined: none pending). */
	private pendingSince: number | undefined;
	private sessions = 0;
	/** Users left out of the last set for the cap. */
	private _dropped = 0;
	/** Frames sent (for tests and diagnostics). */
	frames = 0;

	constructor(
		private readonly host: ViewSetHost,
		opts: ViewSetOptions = {},
	) {
		this.delayMs = opts.delayMs ?? 500;
		this.maxWaitMs = Math.max(this.delayMs, opts.maxWaitMs ?? 2000);
		this.minIntervalMs = opts.minIntervalMs ?? 1000;
		this.max = opts.max ?? 500;
		this.freshMs = opts.freshMs ?? 2000;
		this.order = opts.order ?? VIEW_SOURCES;
		this.now = opts.now ?? Date.now;
	}

	/** A part of the screen shows these users (replacing what it showed); [] when it shows none. */
	set(source: string, ids: string[]): void {
		const old = this.bySource.get(source) ?? [];
		const next = [...new Set(ids.filter(Boolean))];
		if (next.length === old.length && next.every((id, i) => id === old[i])) return;
		if (next.length) this.bySource.set(source, next);
		else this.bySource.delete(source);
		this.schedule();
	}

	/** The users in view now, capped, in priority order (what the next frame sends). */
	wanted(): string[] {
		const sources = [...this.bySource.keys()].sort((a, b) => this.rank(a) - this.rank(b));
		const all = new Set<string>();
		for (const s of sources) for (const id of this.bySource.get(s)!) all.add(id);
		const ids = [...all];
		this._dropped = Math.max(0, ids.length - this.max);
		return ids.slice(0, this.max);
	}

	/** The set as last sent, in the order sent. */
	current(): string[] {
		return [...this.sent];
	}

	/** How many users the cap left out of the set the last time it was computed. */
	get dropped(): number {
		return this._dropped;
	}

	/** Send now what is pending (tests; a page about to hide). */
	flush(): void {
		clearTimeout(this.timer);
		this.timer = undefined;
		this.pendingSince = undefined;
		const want = this.wanted();
		const next = new Set(want);
		if (next.size === this.sent.size && want.every((id) => this.sent.has(id))) return;
		const now = this.now();
		const added = want.filter((id) => !this.sent.has(id));
		const removed = [...this.sent].filter((id) => !next.has(id));
		this.sent = next;
		this.lastSentAt = now;
		this.frames++;
		this.host.send(want);
		for (const id of removed) {
			this.leftAt.set(id, now);
			this.owed.delete(id);
		}
		if (removed.length) this.host.left(removed);
		if (!this.host.live()) {
			for (const id of added) this.owed.add(id);
			return;
		}
		const stale = added.filter((id) => this.stale(id, now));
		if (stale.length) this.host.refresh(stale);
	}

	/**
	 * A session is live: after a fresh identify (resumed false) everything
	 * since the last session may have been missed, and users that entered
	 * the set while no socket was live may have changed before it arrived.
	 */
	sessionLive(resumed: boolean): void {
		const first = this.sessions++ === 0;
		const now = this.now();
		let ids: string[];
		if (!resumed && !first) ids = [...this.sent].filter((id) => this.host.receivedAt(id) !== undefined);
		else ids = [...this.owed].filter((id) => this.sent.has(id) && (!first || this.stale(id, now)));
		this.owed.clear();
		if (ids.length) this.host.refresh(ids);
	}

	/** Stop the timer (the session stopped). */
	stop(): void {
		clearTimeout(this.timer);
		this.timer = undefined;
		this.pendingSince = undefined;
	}

	private rank(source: string): number {
		const i = this.order.indexOf(source);
		return i < 0 ? this.order.length : i;
	}

	/** Whether the cached copy of a user entering the set may have missed a change. */
	private stale(id: string, now: number): boolean {
		const got = this.host.receivedAt(id);
		if (got === undefined) return false; // not cached: the UI's lookup fetches it
		const left = this.leftAt.get(id);
		if (left !== undefined && got <= left) return true;
		return got < now - this.freshMs;
	}

	private schedule(): void {
		const now = this.now();
		this.pendingSince ??= now;
		const settled = Math.min(now + this.delayMs, this.pendingSince + this.maxWaitMs);
		const at = Math.max(settled, this.lastSentAt + this.minIntervalMs);
		clearTimeout(this.timer);
		this.timer = setTimeout(() => this.flush(), at - now);
	}
}
