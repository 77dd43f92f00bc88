import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { DENSITY_KEY, THEME_KEY, parseDensity, parseTheme, resolveTheme } from './prefs';

describe('display preferences', () => {
	it('reads stored values, anything unknown as the default', () => {
		expect(parseTheme('dark')).toBe('dark');
		expect(parseTheme('light')).toBe('light');
		expect(parseTheme(null)).toBe('system');
		expect(parseTheme('DARK')).toBe('system');
		expect(parseDensity('compact')).toBe('compact');
		expect(parseDensity('tiny')).toBe('comfortable');
	});

	it('resolves system to what the system prefers', () => {
		expect(resolveTheme('system', true)).toBe('dark');
		expect(resolveTheme('system', false)).toBe('light');
		expect(resolveTheme('light', true)).toBe('light');
		expect(resolveTheme('dark', false)).toBe('dark');
	});

	it('uses the same storage keys as the pre-paint script', () => {
		const script = readFileSync(new URL('../../public/theme.js', import.meta.url), 'utf8');
		expect(script).toContain(`'${THEME_KEY}'`);
		expect(script).toContain(`'${DENSITY_KEY}'`);
	});
});
