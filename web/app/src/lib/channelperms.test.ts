import { describe, expect, it } from 'vitest';
import { channelActions } from './channelperms';

const base = { kind: 'public' as const, archived: false, isMember: true, role: 'member' as const, isCreator: false };

describe('channelActions', () => {
	it('lets a plain member edit the topic and leave, not rename or archive', () => {
		expect(channelActions(base)).toEqual({ rename: false, editTopic: true, leave: true, archive: false });
	});

	it('lets the creator and workspace admins rename and archive', () => {
		expect(channelActions({ ...base, isCreator: true })).toMatchObject({ rename: true, archive: true });
		expect(channelActions({ ...base, role: 'admin' })).toMatchObject({ rename: true, archive: true });
		expect(channelActions({ ...base, role: 'owner', kind: 'private' })).toMatchObject({ rename: true, archive: true });
		expect(channelActions({ ...base, role: 'guest' })).toMatchObject({ rename: false, archive: false });
	});

	it('leaves an archived channel read-only: only leaving', () => {
		expect(channelActions({ ...base, role: 'owner', archived: true })).toEqual({ rename: false, editTopic: false, leave: true, archive: false });
	});

	it('never renames, archives or leaves a one-to-one DM; a group DM can be left', () => {
		expect(channelActions({ ...base, kind: 'dm', role: 'owner' })).toEqual({ rename: false, editTopic: false, leave: false, archive: false });
		expect(channelActions({ ...base, kind: 'group_dm', role: 'owner' })).toEqual({ rename: false, editTopic: false, leave: true, archive: false });
	});

	it('offers nothing but the preview to a non-member', () => {
		expect(channelActions({ ...base, isMember: false, role: 'admin' })).toMatchObject({ rename: false, editTopic: false, leave: false });
	});
});
