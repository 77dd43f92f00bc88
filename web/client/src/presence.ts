// Presence: the presence.changed events of the users in view (the view set,
// viewset.ts, keeps presence_sub equal to the users on screen) fill
// state.presence; a user who leaves the view loses their entry, since their
// changes stop coming.

import type { Presence as PresenceValue } from './types';
import type { Core } from './state';

export class Presence {
	constructor(private readonly core: Core) {}

	changed(userId: string, presence: PresenceValue): void {
		const store = this.core.store;
		store.set({ presence: { ...store.s.presence, [userId]: presence } });
	}

	/** These users left the view: what is known of their presence goes stale, so it goes. */
	forget(userIds: string[]): void {
		const store = this.core.store;
		const self = store.s.self?.id;
		const next = { ...store.s.presence };
		let changed = false;
		for (const id of userIds) {
			if (id === self || !(id in next)) continue;
			delete next[id];
			changed = true;
		}
		if (changed) store.set({ presence: next });
	}
}
