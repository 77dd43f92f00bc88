// A tiny typed event emitter: on() returns the function that unsubscribes.

export type Unsubscribe = () => void;

export class Emitter<Events extends Record<string, unknown>> {
	private handlers = new Map<keyof Events, Set<(v: never) => void>>();

	on<K extends keyof Events>(type: K, fn: (v: Events[K]) => void): Unsubscribe {
		let set = this.handlers.get(type);
		if (!set) {
			set = new Set();
			this.handlers.set(type, set);
		}
		set.add(fn as (v: never) => void);
		return () => {
			set.delete(fn as (v: never) => void);
		};
	}

	emit<K extends keyof Events>(type: K, value: Events[K]): void {
		const set = this.handlers.get(type);
		if (!set) return;
		for (const fn of [...set]) {
			try {
				(fn as (v: Events[K]) => void)(value);
			} catch (e) {
				// A failing listener must not break the library's own state.
				console.error(`parley: ${String(type)} listener failed`, e);
			}
		}
	}
}
