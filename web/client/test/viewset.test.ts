import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ViewSet, type ViewSetHost, type ViewSetOptions } from '../src/viewset';

/** A host that records what the view set asks of the session; the clock is vitest's fake one. */
class Host implements ViewSetHost {
	frames: string[][] = [];
	refreshed: string[][] = [];
	leftIds: string[][] = [];
	isLive = true;
	/** When each cached user's copy came. */
	cached = new Map<string, number>();

	send(ids: string[]): void {
		this.frames.push(ids);
	}
	live(): boolean {
		return this.isLive;
	}
	refresh(ids: string[]): void {
		this.refreshed.push([...ids].sort());
		// The answer is a fresh copy.
		for (const id of ids) this.cached.set(id, Date.now());
	}
	receivedAt(id: string): number | undefined {
		return this.cached.get(id);
	}
	left(ids: string[]): void {
		this.leftIds.push([...ids].sort());
	}
	/** A copy of each user comes now (boot, a message's users, an event). */
	got(...ids: string[]): void {
		for (const id of ids) this.cached.set(id, Date.now());
	}
}

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}`);

describe('ViewSet', () => {
	let host: Host;
	let view: ViewSet;

	function make(opts: ViewSetOptions = {}) {
		host = new Host();
		view = new ViewSet(host, { delayMs: 500, minIntervalMs: 1000, freshMs: 2000, ...opts });
	}

	beforeEach(() => {
		vi.useFakeTimers({ now: 1_000_000 });
		make();
	});
	afterEach(() => {
		view.stop();
		vi.useRealTimers();
	});

	it('sends one frame once the view has settled for the delay, with the union of the sources in priority order', () => {
		view.set('messages', ['U3']);
		view.set('sidebar', ['U1', 'U2']);
		vi.advanceTimersByTime(300);
		view.set('messages', ['U3', 'U4']);
		vi.advanceTimersByTime(499);
		expect(host.frames).toEqual([]);
		vi.advanceTimersByTime(1);
		expect(host.frames).toEqual([['U1', 'U2', 'U3', 'U4']]);
		expect(view.current()).toEqual(['U1', 'U2', 'U3', 'U4']);
	});

	it('does not wait for a view that never settles longer than the maximum wait', () => {
		for (let i = 0; i < 19; i++) {
			view.set('messages', [`U${i}`]);
			vi.advanceTimersByTime(100);
		}
		expect(host.frames).toEqual([]);
		view.set('messages', ['U19']);
		vi.advanceTimersByTime(100);
		expect(host.frames).toEqual([['U19']]);
	});

	it('sends only when the set changed', () => {
		view.set('messages', ['U1', 'U2']);
		vi.advanceTimersByTime(500);
		expect(host.frames).toHaveLength(1);
		// The same ids again: nothing scheduled, nothing sent.
		view.set('messages', ['U1', 'U2']);
		vi.advanceTimersByTime(5000);
		expect(host.frames).toHaveLength(1);
		// Another source shows the same users, and the list changes and
		// changes back within the delay: the union is what was sent.
		view.set('profile', ['U2']);
		view.set('messages', ['U1']);
		view.set('messages', ['U1', 'U2']);
		vi.advanceTimersByTime(5000);
		expect(host.frames).toHaveLength(1);
		// A user scrolled out and back within the delay never leaves the set.
		view.set('profile', []);
		view.set('messages', ['U1']);
		view.set('messages', ['U1', 'U2']);
		vi.advanceTimersByTime(5000);
		expect(host.frames).toHaveLength(1);
		expect(host.leftIds).toEqual([]);
		// Nothing in view at all, from the start: no frame.
		make();
		view.set('messages', []);
		vi.advanceTimersByTime(5000);
		expect(host.frames).toEqual([]);
	});

	it('never sends more than one frame per minimum interval, however fast the view changes', () => {
		// A list scrolled for a minute: the authors change every 50 ms.
		for (let i = 0; i < 1200; i++) {
			view.set('messages', [`U${i}`, `U${i + 1}`]);
			vi.advanceTimersByTime(50);
		}
		vi.advanceTimersByTime(2000);
		// One frame per maximum wait (2 s), well under the one a second allowed,
		// and the last one is the final view.
		expect(host.frames.length).toBeLessThanOrEqual(31);
		expect(host.frames.length).toBeGreaterThan(20);
		expect(host.frames.at(-1)).toEqual(['U1199', 'U1200']);
		// And however the waits are set, never more than one per minimum interval.
		make({ delayMs: 0, maxWaitMs: 0, minIntervalMs: 1000 });
		for (let i = 0; i < 1200; i++) {
			view.set('messages', [`U${i}`]);
			vi.advanceTimersByTime(50);
		}
		expect(host.frames.length).toBeLessThanOrEqual(61);
		expect(host.frames.length).toBeGreaterThan(50);
		vi.advanceTimersByTime(2000);
		expect(host.frames.at(-1)).toEqual(['U1199']);
	});

	it('keeps at most max users, those of the earlier sources first, and says how many it left out', () => {
		view.set('directory', ids('D', 300));
		view.set('messages', ids('M', 250));
		view.set('sidebar', ids('S', 20));
		vi.advanceTimersByTime(500);
		const sent = host.frames[0];
		expect(sent).toHaveLength(500);
		expect(view.dropped).toBe(70);
		// sidebar, then messages, then directory (VIEW_SOURCES order)
		for (const id of [...ids('S', 20), ...ids('M', 250)]) expect(sent).toContain(id);
		expect(sent.filter((id) => id.startsWith('D'))).toHaveLength(230);
		// The frame stays under the server's 16 KiB even with long ids.
		const big = Array.from({ length: 600 }, (_, i) => `U01M80MSB0HG2YGSKAV1CN${String(i).padStart(5, '0')}`);
		view.set('members', big);
		vi.advanceTimersByTime(1000);
		expect(JSON.stringify({ op: 'presence_sub', user_ids: host.frames.at(-1) }).length).toBeLessThan(16 * 1024);
	});

	it('refreshes a user who comes back into view, since their changes did not come while away', () => {
		host.got('U1', 'U2');
		view.set('messages', ['U1', 'U2']);
		vi.advanceTimersByTime(500);
		expect(host.refreshed).toEqual([]); // copies from a moment ago are fresh
		vi.advanceTimersByTime(10_000);
		view.set('messages', ['U1']);
		vi.advanceTimersByTime(500);
		expect(host.frames.at(-1)).toEqual(['U1']);
		expect(host.leftIds).toEqual([['U2']]); // their presence is no longer kept
		vi.advanceTimersByTime(500);
		view.set('messages', ['U1', 'U2']);
		vi.advanceTimersByTime(1000);
		expect(host.frames.at(-1)).toEqual(['U1', 'U2']);
		expect(host.refreshed).toEqual([['U2']]); // U1 stayed in view: its copy is current
	});

	it('refreshes an old copy of a user never in view, not a recent one, and leaves uncached users to the lookup', () => {
		host.got('OLD');
		vi.advanceTimersByTime(60_000);
		host.got('NEW'); // e.g. the users of a message that just arrived
		view.set('messages', ['OLD', 'NEW', 'UNKNOWN']);
		vi.advanceTimersByTime(500);
		expect(host.refreshed).toEqual([['OLD']]);
	});

	it('a copy that came after the user left is still refreshed when it is old by the time they return', () => {
		host.got('U1');
		view.set('messages', ['U1']);
		vi.advanceTimersByTime(500);
		view.set('messages', []);
		vi.advanceTimersByTime(1100);
		host.got('U1'); // fetched for a search result, say, while out of view
		vi.advanceTimersByTime(1000);
		view.set('messages', ['U1']);
		vi.advanceTimersByTime(1000);
		expect(host.refreshed).toEqual([]); // 1 s old: fresh
		view.set('messages', []);
		vi.advanceTimersByTime(1000);
		host.got('U1');
		vi.advanceTimersByTime(30_000);
		view.set('messages', ['U1']);
		vi.advanceTimersByTime(1000);
		expect(host.refreshed).toEqual([['U1']]);
	});

	it('while no socket is live, refreshes the users that entered the view once a session is live', () => {
		host.got('U1', 'U2');
		host.isLive = false;
		view.set('sidebar', ['U1']);
		vi.advanceTimersByTime(500);
		expect(host.frames).toEqual([['U1']]); // the gateway sends it on the next session
		// The first session: boot's copies of a moment ago are fresh.
		host.isLive = true;
		view.sessionLive(false);
		expect(host.refreshed).toEqual([]);
		vi.advanceTimersByTime(60_000);
		// The socket drops; U2 comes into view meanwhile; the session resumes.
		host.isLive = false;
		view.set('messages', ['U2']);
		vi.advanceTimersByTime(500);
		expect(host.refreshed).toEqual([]);
		host.isLive = true;
		view.sessionLive(true);
		expect(host.refreshed).toEqual([['U2']]); // U1's missed events were replayed
		// A fresh identify after that: the new session missed everything.
		view.sessionLive(false);
		expect(host.refreshed).toEqual([['U2'], ['U1', 'U2']]);
	});

	it('stop cancels a pending frame', () => {
		view.set('messages', ['U1']);
		view.stop();
		vi.advanceTimersByTime(5000);
		expect(host.frames).toEqual([]);
	});
});
