import { describe, expect, it } from 'vitest';
import { fileSize } from './files';

describe('fileSize', () => {
	it('reads like people write sizes', () => {
		expect(fileSize(512)).toBe('512 B');
		expect(fileSize(14 * 1024)).toBe('14 KB');
		expect(fileSize(3.2 * (1 << 20))).toBe('3.2 MB');
		expect(fileSize(2 * (1 << 30))).toBe('2.0 GB');
	});
});
