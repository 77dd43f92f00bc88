// The pinned messages of the open channel, for the header's pin count and the
// pins panel. Loaded when a channel opens and kept live by its events
// (pin.added, pin.removed, message.updated, message.deleted).

import type { Message, ParleyEvent, Session } from '@parley/client';

export class Pins {
	/** The channel the list belongs to. */
	channelId = $state<string | null>(null);
	/** Pinned messages in the order they were pinned; null until loaded. */
	items = $state.raw<Message[] | null>(null);
	error = $state('');
	private session: Session | null = null;
	private gen = 0;

	/** Follow a channel: load its pins and listen to its events; returns the stop function. */
	follow(session: Session, channelId: string): () => void {
		this.session = session;
		this.channelId = channelId;
		this.items = null;
		this.error = '';
		const gen = ++this.gen;
		session.api.listPins(channelId).then(
			(r) => {
				if (gen === this.gen) this.items = r.messages;
			},
			(e) => {
				if (gen === this.gen) this.error = (e as Error).message;
			},
		);
		const off = session.on('event', (ev) => this.apply(ev));
		return () => {
			off();
			if (gen === this.gen) {
				this.gen++;
				this.channelId = null;
				this.items = null;
			}
		};
	}

	/** Apply an event of the followed channel. */
	apply(ev: ParleyEvent): void {
		const d = ev.d;
		if (!this.channelId || d.channel_id !== this.channelId || !this.items) return;
		const id = d.message_id ?? d.message?.id;
		if (!id) return;
		switch (ev.t) {
			case 'pin.added':
				if (!this.items.some((m) => m.id === id)) void this.fetch(id);
				break;
			case 'pin.removed':
				this.items = this.items.filter((m) => m.id !== id);
				break;
			case 'message.updated':
				if (d.message) this.items = this.items.map((m) => (m.id === id ? { ...d.message!, pinned: true } : m));
				break;
			case 'message.deleted':
				this.items = this.items.filter((m) => m.id !== id);
				break;
		}
	}

	private async fetch(id: string): Promise<void> {
		const gen = this.gen;
		const known = this.loaded(id);
		const m = known ?? (await this.session?.api.getMessage(id).catch(() => undefined));
		if (!m || gen !== this.gen || !this.items || this.items.some((x) => x.id === id)) return;
		this.items = [...this.items, { ...m, pinned: true }];
	}

	/** A copy the session already holds (channel window or thread). */
	private loaded(id: string): Message | undefined {
		const s = this.session?.state;
		if (!s) return undefined;
		for (const list of [s.messages[this.channelId ?? ''], ...Object.values(s.replies)]) {
			const m = list?.messages.find((x) => x.id === id);
			if (m && !('pending' in m && m.pending)) return m;
		}
		return undefined;
	}
}

export const pins = new Pins();
