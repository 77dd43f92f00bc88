// Channels: the channels and DMs the session knows, their unread and mention
// counts, and the read marker of the channel on screen (moved only while
// the page is visible).

import type { BootChannel, Channel, Message } from './types';
import { mentions } from './messages';
import { requireWorkspace, type ChannelView, type Core } from './state';
import type { Users } from './users';

/** A channel as the session holds it. */
export function toView(c: BootChannel | Channel, isMember: boolean): ChannelView {
	return {
		id: c.id,
		name: c.name,
		kind: c.kind,
		topic: c.topic,
		purpose: (c as Channel).purpose,
		member_count: c.member_count,
		last_seq: c.last_seq,
		last_read_seq: c.last_read_seq,
		unread_count: c.unread_count ?? 0,
		mention_count: c.mention_count ?? 0,
		updated_at: c.updated_at,
		archived_at: c.archived_at,
		dm_user_ids: c.dm_user_ids,
		is_member: isMember,
	};
}

export class Channels {
	/** The page is visible: messages on screen count as read only then. */
	visible = true;
	private readTimers = new Map<string, ReturnType<typeof setTimeout>>();

	constructor(
		private readonly core: Core,
		private readonly users: Users,
	) {}

	/** The user sees the channel (it is on screen and the page is visible). */
	looking(channelId: string): boolean {
		return this.core.store.s.activeChannelId === channelId && this.visible;
	}

	/** The page became visible or hidden. */
	setVisible(visible: boolean): void {
		this.visible = visible;
		const active = this.core.store.s.activeChannelId;
		if (visible && active) this.scheduleRead(active, 0);
	}

	/**
	 * Make sure the session knows the channel (a public channel the user is
	 * not in is previewed). A previewed channel is read again: nothing of it
	 * came while it was out of focus.
	 */
	async ensure(channelId: string): Promise<void> {
		const store = this.core.store;
		const known = store.s.channelsById[channelId];
		if (known?.is_member) return;
		const c = await this.core.api.getChannel(channelId);
		const now = store.s.channelsById[channelId];
		if (now?.is_member) return; // joined meanwhile: the join's copy is newer
		store.set({ channelsById: { ...store.s.channelsById, [c.id]: toView(c, c.is_member) } });
	}

	/** Move the read marker to the channel's last seq (no call if already there). */
	async markRead(channelId: string): Promise<void> {
		const c = this.core.store.s.channelsById[channelId];
		if (!c || !c.is_member) return;
		const seq = c.last_seq;
		if (c.last_read_seq >= seq && !c.unread_count && !c.mention_count) return;
		this.patch(channelId, { last_read_seq: Math.max(seq, c.last_read_seq), unread_count: 0, mention_count: 0 });
		try {
			await this.core.api.markRead(channelId, seq);
		} catch (e) {
			this.core.fail(e);
		}
	}

	/** Mark the channel read after delayMs if it is still on screen and visible then. */
	scheduleRead(channelId: string, delayMs: number): void {
		if (!this.visible) return;
		clearTimeout(this.readTimers.get(channelId));
		this.readTimers.set(
			channelId,
			setTimeout(() => {
				this.readTimers.delete(channelId);
				if (this.looking(channelId)) void this.markRead(channelId);
			}, delayMs),
		);
	}

	stop(): void {
		for (const t of this.readTimers.values()) clearTimeout(t);
		this.readTimers.clear();
	}

	patch(id: string, patch: Partial<ChannelView>): void {
		const store = this.core.store;
		const c = store.s.channelsById[id];
		if (!c) return;
		store.set({ channelsById: { ...store.s.channelsById, [id]: { ...c, ...patch } } });
	}

	/** The user left (or lost) a channel: a public one stays previewable, others go. */
	remove(id: string): void {
		const store = this.core.store;
		const c = store.s.channelsById[id];
		if (!c) return;
		const byId = { ...store.s.channelsById };
		if (c.kind === 'public') byId[id] = { ...c, is_member: false };
		else delete byId[id];
		store.set({ channelsById: byId });
	}

	add(c: Channel | BootChannel, isMember: boolean): void {
		const store = this.core.store;
		const old = store.s.channelsById[c.id];
		const v = toView(c, isMember);
		if (old) {
			// Event copies of a channel carry no caller-relative state.
			v.last_read_seq = Math.max(old.last_read_seq, v.last_read_seq);
			v.unread_count = old.unread_count;
			v.mention_count = old.mention_count;
			v.last_seq = Math.max(old.last_seq, v.last_seq);
		}
		store.set({ channelsById: { ...store.s.channelsById, [c.id]: v } });
		this.core.gw()?.trackChannel(c.id, v.last_seq);
		if (v.dm_user_ids?.length) void this.users.ensure(v.dm_user_ids);
	}

	/**
	 * A message was created: the DM moves up, the user's own message moves
	 * the read marker, and others' top-level messages are read (on screen)
	 * or counted. counted: a boot's counts already include it.
	 */
	messageCreated(m: Message, counted: boolean): void {
		const s = this.core.store.s;
		const c = s.channelsById[m.channel_id];
		if (!c) return;
		const self = s.self;
		const mine = !!self && m.user_id === self.id;
		const patch: Partial<ChannelView> = {};
		if (c.kind === 'dm' || c.kind === 'group_dm') patch.updated_at = m.created_at;
		if (mine) {
			if (!m.thread_root_id && m.seq > c.last_read_seq && c.last_read_seq >= c.last_seq - 1) patch.last_read_seq = m.seq;
		} else if (!m.thread_root_id) {
			if (this.looking(m.channel_id)) {
				this.scheduleRead(m.channel_id, 500);
			} else if (m.seq > c.last_read_seq && !counted) {
				patch.unread_count = c.unread_count + 1;
				// @here counts only for members the server found active: their
				// mention event says so (hereMentioned).
				if (mentions(m.text, self?.handle, false)) patch.mention_count = c.mention_count + 1;
			}
		}
		if (Object.keys(patch).length) this.patch(m.channel_id, patch);
	}

	/**
	 * A live mention event for a top-level message that names the user only
	 * through @here: the server counted it because the user was active when
	 * it was posted, so the badge counts it too (messageCreated leaves @here
	 * to this, since the text alone cannot say who was active).
	 */
	hereMentioned(m: Message): void {
		const s = this.core.store.s;
		const c = s.channelsById[m.channel_id];
		if (!c || m.thread_root_id || (s.self && m.user_id === s.self.id)) return;
		if (mentions(m.text, s.self?.handle, false) || !mentions(m.text, s.self?.handle)) return;
		if (this.looking(m.channel_id) || m.seq <= c.last_read_seq) return;
		this.patch(m.channel_id, { mention_count: c.mention_count + 1 });
	}

	/**
	 * A channel.summary: the channel's events after the last one the session
	 * had, up to lastSeq, were summarized instead of sent. Its unread messages
	 * and mentions are added to the badges (or, when the user is looking at
	 * the channel, it is read soon instead), and the channel's last seq moves
	 * to lastSeq. A summary the channel is already past adds nothing: those
	 * events were counted (by a boot or one by one).
	 */
	summarized(channelId: string, lastSeq: number, unread: number, mentionCount: number): void {
		const c = this.core.store.s.channelsById[channelId];
		if (!c || lastSeq <= c.last_seq) return;
		const patch: Partial<ChannelView> = { last_seq: lastSeq };
		if (lastSeq > c.last_read_seq) {
			if (this.looking(channelId)) {
				this.scheduleRead(channelId, 500);
			} else {
				if (unread > 0) patch.unread_count = c.unread_count + unread;
				if (mentionCount > 0) patch.mention_count = c.mention_count + mentionCount;
			}
		}
		this.patch(channelId, patch);
	}

	/** Create a channel; the user is its first member. */
	async create(name: string, kind: 'public' | 'private' = 'public', topic?: string): Promise<ChannelView> {
		const c = await this.core.api.createChannel(requireWorkspace(this.core), { name, kind, topic });
		this.add({ ...c, last_read_seq: c.last_seq }, true);
		return this.core.store.s.channelsById[c.id];
	}

	/** Join a public channel. */
	async join(channelId: string): Promise<ChannelView> {
		const c = await this.core.api.joinChannel(channelId);
		this.add({ ...c, last_read_seq: c.last_seq, unread_count: 0, mention_count: 0 }, true);
		return this.core.store.s.channelsById[c.id];
	}

	async leave(channelId: string): Promise<void> {
		await this.core.api.leaveChannel(channelId);
		this.remove(channelId);
	}

	/** Open (or find) a DM with the given users (the caller is implied). */
	async openDM(userIds: string[]): Promise<ChannelView> {
		const c = await this.core.api.openDM(requireWorkspace(this.core), userIds);
		this.add(c, true);
		return this.core.store.s.channelsById[c.id];
	}
}
