// Messages shown to this user only and never stored: slash commands' private
// answers and notices (docs/integrations.md). They come over the gateway as
// message.ephemeral (to every session of the user) and in the answer of the
// command itself; both carry the same id, so each shows once. They last
// until the page reloads. One with thread_root_id (the command was typed in
// that thread) shows in the thread's panel, the others in the channel.

import type { EphemeralMessage, ParleyEvent } from '@parley/client';

/** Most kept per channel: the oldest go first. */
const KEEP = 20;

export class Ephemerals {
	/** Per channel id, oldest first. */
	byChannel = $state.raw<Record<string, EphemeralMessage[]>>({});

	add(m: EphemeralMessage): void {
		const list = this.byChannel[m.channel_id] ?? [];
		if (list.some((x) => x.id === m.id)) return;
		this.byChannel = { ...this.byChannel, [m.channel_id]: [...list, m].slice(-KEEP) };
	}

	/** A notice made here (the command could not even be sent), in the channel or a thread of it. */
	notice(channelId: string, text: string, threadRootId?: string): void {
		this.add({
			id: `local-${Date.now()}-${Math.random().toString(36).slice(2)}`,
			channel_id: channelId,
			user_id: '',
			text,
			...(threadRootId ? { thread_root_id: threadRootId } : {}),
			created_at: new Date().toISOString(),
		});
	}

	dismiss(channelId: string, id: string): void {
		const list = this.byChannel[channelId];
		if (list) this.byChannel = { ...this.byChannel, [channelId]: list.filter((m) => m.id !== id) };
	}

	/** Take message.ephemeral events from the session. */
	apply(ev: ParleyEvent): void {
		if (ev.t !== 'message.ephemeral') return;
		const m = (ev.d as { message?: EphemeralMessage }).message;
		if (m?.id && m.channel_id) this.add(m);
	}
}

/** The messages of one place: a thread's (rootId) or the channel's own. */
export function forPlace(list: readonly EphemeralMessage[] | undefined, rootId?: string): EphemeralMessage[] {
	return (list ?? []).filter((m) => (m.thread_root_id || undefined) === (rootId || undefined));
}

/** "/name args" → the command, or null for text that is no command ("//" escapes a slash). */
export function parseCommand(text: string): { name: string; args: string } | null {
	const t = text.trimStart();
	const m = /^\/([A-Za-z0-9_-]{1,32})(?:\s+([\s\S]*))?$/.exec(t);
	if (!m) return null;
	return { name: m[1].toLowerCase(), args: (m[2] ?? '').trim() };
}
