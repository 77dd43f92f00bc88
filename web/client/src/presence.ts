// Presence: only the users on screen are subscribed (presence_sub follows
// the view), and their presence.changed events fill state.presence.

import type { Presence as PresenceValue } from './types';
import type { Core } from './state';

export class Presence {
	/** The subscribed ids, sorted and joined: a cheap equality test. */
	private ids = '';

	constructor(private readonly core: Core) {}

	/** The users whose presence dots are on screen; replaces the previous set. */
	setView(userIds: string[]): void {
		const ids = [...new Set(userIds)].sort();
		const key = ids.join(',');
		if (key === this.ids) return;
		this.ids = key;
		this.core.gw()?.presenceSub(ids);
	}

	/** A new gateway: subscribe what the view asked for before it existed. */
	resubscribe(): void {
		if (this.ids) this.core.gw()?.presenceSub(this.ids.split(','));
	}

	changed(userId: string, presence: PresenceValue): void {
		const store = this.core.store;
		store.set({ presence: { ...store.s.presence, [userId]: presence } });
	}
}
