// Gateway events applied to the session: one handler per event type, each
// handing the event to the owners of the parts it changes. Event types not
// in the table change nothing (they still reach the app's 'event' listeners).

import { applyReaction, mentions } from './messages';
import type { EventType, ParleyEvent } from './types';
import { typingKey, type Typing } from './typing';
import type { Channels } from './channels';
import type { Notifier } from './notifier';
import type { Presence } from './presence';
import type { Core } from './state';
import type { Threads } from './threads';
import type { Users } from './users';
import type { Windows } from './windows';

/** The owners an event can touch. */
export interface Parts {
	core: Core;
	users: Users;
	channels: Channels;
	windows: Windows;
	threads: Threads;
	typing: Typing;
	presence: Presence;
	notifier: Notifier;
	/** The channels the session has in focus (last sent). */
	focused(): readonly string[];
}

/**
 * Handles one event type. prevLast is the channel's last seq before the
 * event: a boot's counts already include events up to it (a catch-up may
 * deliver them again).
 */
export type EventHandler = (ev: ParleyEvent, prevLast: number) => void;

/** The dispatch table: event type → handler. */
export function eventHandlers(p: Parts): Record<string, EventHandler> {
	const state = () => p.core.store.s;
	const selfId = () => state().self?.id;

	const reaction: EventHandler = ({ t, d }) => {
		if (d.message_id && d.emoji) {
			const add = t === 'reaction.added';
			const mine = d.user_id === selfId();
			p.windows.map(d.message_id, (m) => applyReaction(m, d.emoji!, add, mine));
		}
	};
	const pin: EventHandler = ({ t, d }) => {
		if (d.message_id) p.windows.map(d.message_id, (m) => ({ ...m, pinned: t === 'pin.added' }));
	};
	const channelChanged: EventHandler = ({ d }) => {
		const ch = d.channel_id;
		if (ch && d.channel && state().channelsById[ch]) {
			p.channels.patch(ch, {
				name: d.channel.name,
				topic: d.channel.topic,
				purpose: d.channel.purpose,
				archived_at: d.channel.archived_at,
				member_count: d.channel.member_count,
			});
		}
	};
	const userChanged: EventHandler = ({ d }) => {
		if (d.user) p.users.add([d.user]);
	};

	return {
		'message.created': ({ d, source }, prevLast) => {
			const m = d.message;
			if (!m) return;
			const counted = typeof d.seq === 'number' && d.seq <= prevLast;
			p.typing.clear(typingKey(m.channel_id, m.thread_root_id), m.user_id);
			if (m.thread_root_id) {
				p.windows.mergeReply(m);
				p.windows.countReply(m);
			} else {
				p.windows.upsert(m);
			}
			if (!state().channelsById[m.channel_id]) return;
			p.channels.messageCreated(m, counted);
			if (m.user_id !== selfId() && source === 'live') p.notifier.maybeNotify(m, false);
		},
		'message.updated': ({ d }) => {
			if (d.message) p.windows.upsert(d.message);
		},
		'message.deleted': ({ d }) => {
			if (d.message_id) p.windows.deleted(d.message_id, d.thread_root_id);
		},
		'reaction.added': reaction,
		'reaction.removed': reaction,
		'pin.added': pin,
		'pin.removed': pin,
		'channel.created': ({ d }) => {
			const self = selfId();
			if (d.channel && (d.channel.kind !== 'public' || d.user_id === self)) {
				p.channels.add({ ...d.channel, last_read_seq: d.user_id === self ? d.channel.last_seq : 0 }, true);
			}
		},
		'channel.updated': channelChanged,
		'channel.archived': channelChanged,
		'member.joined': ({ d }) => {
			const ch = d.channel_id;
			if (!ch) return;
			if (d.user_id === selfId() && !state().channelsById[ch]?.is_member) {
				p.core.api.getChannel(ch).then(
					(c) => p.channels.add({ ...c, last_read_seq: c.last_seq }, true),
					(e) => p.core.fail(e),
				);
			} else if (typeof d.member_count === 'number') {
				p.channels.patch(ch, { member_count: d.member_count });
			}
		},
		'member.left': ({ d }) => {
			const ch = d.channel_id;
			if (!ch) return;
			if (d.user_id === selfId()) p.channels.remove(ch);
			else if (typeof d.member_count === 'number') p.channels.patch(ch, { member_count: d.member_count });
		},
		'channel.read': ({ d }) => {
			const ch = d.channel_id;
			if (ch && typeof d.last_read_seq === 'number') {
				const c = state().channelsById[ch];
				if (c && d.last_read_seq >= c.last_read_seq) {
					const all = d.last_read_seq >= c.last_seq;
					p.channels.patch(ch, all ? { last_read_seq: d.last_read_seq, unread_count: 0, mention_count: 0 } : { last_read_seq: d.last_read_seq });
				}
			}
		},
		'channel.summary': ({ d }) => {
			const ch = d.channel_id;
			const upTo = d.last_seq;
			if (!ch || typeof upTo !== 'number' || !state().channelsById[ch]) return;
			p.channels.summarized(ch, upTo, d.unread ?? 0, d.mentions ?? 0);
			// The loaded messages end before the summarized ones: the list on
			// screen gets the newest page now, others when they are opened.
			const stale = p.windows.summarized(ch, upTo);
			if (stale && state().activeChannelId === ch && !p.windows.loadingLatest(ch)) {
				p.windows.loadLatest(ch).catch((e) => p.core.fail(e));
			}
		},
		'channel.hot': ({ d }) => {
			const ch = d.channel_id;
			if (!ch) return;
			const hot = state().hotChannels;
			// A late word for a channel that left focus meanwhile: it would
			// never be cleared (channel.hot goes only to channels in focus).
			if (d.on === true && !hot[ch] && p.focused().includes(ch)) {
				p.core.store.set({ hotChannels: { ...hot, [ch]: true } });
			} else if (d.on === false && hot[ch]) {
				const next = { ...hot };
				delete next[ch];
				p.core.store.set({ hotChannels: next });
			}
		},
		'dm.opened': ({ d }) => {
			if (d.channel) p.channels.add(d.channel, true);
		},
		'user.updated': userChanged,
		'user.deactivated': userChanged,
		'user.status': userChanged,
		'workspace.member_joined': userChanged,
		'presence.changed': ({ d }) => {
			if (d.user_id && d.presence) p.presence.changed(d.user_id, d.presence);
		},
		'typing.started': ({ d }) => {
			const ch = d.channel_id;
			if (ch && d.user_id && d.user_id !== selfId()) p.typing.add(typingKey(ch, d.thread_root_id), d.user_id);
		},
		'thread.updated': ({ d, source }) => {
			if (d.thread) p.threads.apply(d.thread, 'updated', d.message);
			if (d.message?.thread_root_id) {
				// A follower who is not in the channel gets no message.created: the reply comes here.
				const r = d.message;
				p.windows.mergeReply(r);
				if (source === 'live' && d.thread?.unread_mentions) p.notifier.maybeNotify(r, mentions(r.text, state().self?.handle));
			}
		},
		'thread.read': ({ d }) => {
			if (d.thread) p.threads.apply(d.thread, 'read');
		},
		'thread.followed': ({ d }) => {
			if (d.thread) p.threads.apply(d.thread, 'followed');
		},
		'thread.unfollowed': ({ d }) => {
			if (d.thread) p.threads.apply(d.thread, 'unfollowed');
		},
		mention: ({ d, source }) => {
			if (!d.message || source !== 'live') return;
			p.channels.hereMentioned(d.message);
			p.notifier.maybeNotify(d.message, true);
		},
	} satisfies Partial<Record<EventType, EventHandler>>;
}
