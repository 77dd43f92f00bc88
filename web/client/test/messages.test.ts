import { describe, expect, it } from 'vitest';
import { mentions } from '../src/messages';

describe('mentions', () => {
	it('finds @handle and the broadcast mentions, not lookalikes', () => {
		expect(mentions('hi @bob', 'bob')).toBe(true);
		expect(mentions('hi @Bob.', 'bob')).toBe(true);
		expect(mentions('@bob: look', 'bob')).toBe(true);
		expect(mentions('hi @bobby', 'bob')).toBe(false);
		expect(mentions('mail bob@bob.com', 'bob')).toBe(false);
		expect(mentions('@here standup', 'bob')).toBe(true);
		expect(mentions('@channel', undefined)).toBe(true);
		expect(mentions('nothing', 'bob')).toBe(false);
	});
});
