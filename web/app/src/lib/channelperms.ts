// What the channel menu offers, by the server's rules (sqlstore: channels.go,
// members.go, access.go): a member may change the topic and purpose of a
// live channel; renaming and archiving need channel management rights
// (workspace owners and admins, and the channel's creator); a one-to-one DM
// can be neither left, renamed nor archived; an archived channel can only be
// left. The server decides in the end: its refusal is shown as it says.

import type { ChannelKind, Role } from '@parley/client';

export interface ChannelActions {
	rename: boolean;
	editTopic: boolean;
	leave: boolean;
	archive: boolean;
}

export function channelActions(c: {
	kind: ChannelKind;
	archived: boolean;
	isMember: boolean;
	/** The user's workspace role. */
	role: Role | undefined;
	/** The user created the channel (unknown until the full channel is read: false). */
	isCreator: boolean;
}): ChannelActions {
	const named = c.kind === 'public' || c.kind === 'private';
	const manage = c.role === 'owner' || c.role === 'admin' || c.isCreator;
	const live = c.isMember && !c.archived;
	return {
		rename: named && live && manage,
		editTopic: named && live,
		leave: c.isMember && c.kind !== 'dm',
		archive: named && !c.archived && manage,
	};
}
