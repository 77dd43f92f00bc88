// The RowContext that message rows use, backed by the app and its session.
import type { Message } from '@parley/client';
import { app } from './app.svelte';
import { clock } from './clock.svelte';
import type { RowContext, ViewMessage } from './view';

function report(e: unknown) {
	app.error = (e as Error).message;
}

export const rowContext: RowContext = {
	get selfId() {
		return app.s?.self?.id ?? '';
	},
	get selfHandle() {
		return app.s?.self?.handle ?? '';
	},
	// Reading app.s makes the caller depend on the snapshot; the session
	// schedules a batched lookup for ids it does not know yet.
	user: (id) => app.s?.users[id] ?? app.session?.user(id),
	presence: (id) => app.s?.presence[id],
	react(m: Message, emoji: string, add: boolean) {
		const s = app.session;
		if (!s) return;
		(add ? s.react(m.id, emoji) : s.unreact(m.id, emoji)).catch(report);
	},
	openThread: (m) => void app.openThread(m.id),
	async edit(m, text) {
		try {
			await app.session?.editMessage(m.id, text);
		} catch (e) {
			report(e);
			throw e;
		}
	},
	async remove(m) {
		try {
			await app.session?.deleteMessage(m.id);
		} catch (e) {
			report(e);
		}
	},
	retry: (m: ViewMessage) => void app.session?.resend(m).catch(report),
	openProfile: (userId) => (app.panel = { kind: 'profile', userId }),
	pin(m: Message, pinned: boolean) {
		app.session?.pin(m.id, pinned).catch(report);
	},
	get canPin() {
		const id = app.s?.activeChannelId;
		return !!(id && app.s?.channelsById[id]?.is_member);
	},
	get readOnly() {
		const id = app.s?.activeChannelId;
		return !!(id && app.s?.channelsById[id]?.archived_at);
	},
	get now() {
		return clock.now;
	},
	get editRequest() {
		return app.editRequest;
	},
	takeEditRequest: () => (app.editRequest = null),
	copyLink: (m) => app.copyLink(m),
};
