// A clock for what shows until a given time (custom statuses that run out):
// `now` changes when the earliest time asked for passes, not on an interval.

class Clock {
	/** Epoch ms; reading it makes the reader re-run when a wake-up passes. */
	now = $state(Date.now());
	private timer: ReturnType<typeof setTimeout> | undefined;
	private at: number | undefined;
	private readonly wants = new Map<string, number>();

	/**
	 * Be woken at `at` (epoch ms) for `key`, replacing that key's previous
	 * wish; undefined drops it. One timer serves the earliest wish.
	 */
	wakeAt(key: string, at: number | undefined): void {
		if (at === undefined) this.wants.delete(key);
		else this.wants.set(key, at);
		this.schedule();
	}

	private schedule(): void {
		const now = Date.now();
		let next: number | undefined;
		for (const t of this.wants.values()) if (t > now && (next === undefined || t < next)) next = t;
		if (next === this.at) return;
		clearTimeout(this.timer);
		this.at = next;
		if (next === undefined) return;
		// Timers past ~24.8 days overflow: wake up early and look again.
		this.timer = setTimeout(
			() => {
				this.at = undefined;
				this.now = Date.now();
				this.schedule();
			},
			Math.min(next - now + 50, 2 ** 31 - 1),
		);
	}
}

export const clock = new Clock();
