import { describe, expect, it } from 'vitest';
import { displayName, iconSrc, sameSender, shownProfile } from './botprofile';

describe('bot profiles', () => {
	it("show only on a bot user's message", () => {
		const p = { name: 'Alice' };
		expect(shownProfile(p, true)).toBe(p);
		expect(shownProfile(p, false)).toBeUndefined();
		expect(shownProfile(p, undefined)).toBeUndefined();
		expect(shownProfile(undefined, true)).toBeUndefined();
	});

	it('take the profile name, else the user name', () => {
		expect(displayName({ name: 'Jenkins' }, 'CI')).toBe('Jenkins');
		expect(displayName({ name: '   ' }, 'CI')).toBe('CI');
		expect(displayName({ icon_emoji: 'x' }, 'CI')).toBe('CI');
		expect(displayName(undefined, undefined)).toBe('Unknown user');
	});

	it('admit only http(s) icon URLs without credentials', () => {
		expect(iconSrc('https://ci.example/j.png')).toBe('https://ci.example/j.png');
		expect(iconSrc('http://ci.example/j.png')).toBe('http://ci.example/j.png');
		for (const bad of [
			'javascript:alert(1)',
			'JaVaScRiPt:alert(1)',
			'data:image/svg+xml,<svg onload=alert(1)>',
			'blob:https://x/y',
			'//evil.example/x.png',
			'/relative.png',
			'https://user:pw@evil.example/x.png',
			'https://evil.example/' + 'a'.repeat(2100),
			'',
			undefined,
		]) {
			expect(iconSrc(bad), String(bad)).toBeUndefined();
		}
	});

	it('group rows only under the same user and the same profile', () => {
		expect(sameSender({ user_id: 'U1' }, { user_id: 'U1' })).toBe(true);
		expect(sameSender({ user_id: 'U1' }, { user_id: 'U2' })).toBe(false);
		expect(sameSender({ user_id: 'B', bot_profile: { name: 'Jenkins' } }, { user_id: 'B', bot_profile: { name: 'Jenkins' } })).toBe(true);
		expect(sameSender({ user_id: 'B', bot_profile: { name: 'Jenkins' } }, { user_id: 'B', bot_profile: { name: 'Grafana' } })).toBe(false);
		expect(sameSender({ user_id: 'B', bot_profile: { name: 'Jenkins' } }, { user_id: 'B' })).toBe(false);
		expect(sameSender({ user_id: 'B', bot_profile: { icon_url: 'https://a/1' } }, { user_id: 'B', bot_profile: { icon_url: 'https://a/2' } })).toBe(false);
	});
});
