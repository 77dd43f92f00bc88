import { describe, expect, it } from 'vitest';
import { typingKey } from '../src/typing';

describe('typingKey', () => {
	it('keys typing by channel and thread', () => {
		expect(typingKey('C1')).toBe('C1');
		expect(typingKey('C1', 'M1')).toBe('C1/M1');
	});
});
