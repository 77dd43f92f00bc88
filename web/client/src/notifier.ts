// Notifier: decides which messages the user should be told about (mentions
// and DMs they are not looking at), once per message.

import type { Emitter } from './emitter';
import { mentions } from './messages';
import type { Message } from './types';
import type { Channels } from './channels';
import type { Core, SessionEvents } from './state';

export class Notifier {
	/** Messages already notified (a mention may come as message.created and as mention). */
	private notified = new Set<string>();

	constructor(
		private readonly core: Core,
		private readonly channels: Channels,
		private readonly emitter: Emitter<SessionEvents>,
	) {}

	/** Tell the app about a mention or a DM the user is not looking at (once per message). */
	maybeNotify(m: Message, mentioned: boolean): void {
		const s = this.core.store.s;
		const self = s.self;
		if (!self || m.user_id === self.id || this.notified.has(m.id)) return;
		const c = s.channelsById[m.channel_id];
		const dm = c?.kind === 'dm' || c?.kind === 'group_dm';
		const mention = mentioned || mentions(m.text, self.handle, false);
		if (!dm && !mention) return;
		const looking = this.channels.looking(m.channel_id) && (!m.thread_root_id || s.activeThreadId === m.thread_root_id);
		if (looking) return;
		this.notified.add(m.id);
		if (this.notified.size > 1000) this.notified.delete(this.notified.values().next().value!);
		this.emitter.emit('notify', { kind: mention ? 'mention' : 'dm', message: m, channel: c });
	}
}
