// Display preferences: colour theme (light, dark, or the system's) and message
// density, kept in localStorage and applied as data-theme / data-density on
// <html>, which styles/app.css keys on. public/theme.js applies the stored
// ones before the first paint with the same keys and values.

export type ThemeChoice = 'light' | 'dark' | 'system';
export type Density = 'comfortable' | 'compact';

export const THEME_KEY = 'parley.theme';
export const DENSITY_KEY = 'parley.density';
const DARK_QUERY = '(prefers-color-scheme: dark)';

/** A stored theme value, or 'system' for anything else (nothing stored, junk). */
export function parseTheme(v: string | null): ThemeChoice {
	return v === 'light' || v === 'dark' ? v : 'system';
}

export function parseDensity(v: string | null): Density {
	return v === 'compact' ? 'compact' : 'comfortable';
}

/** The theme to show for a choice, given whether the system prefers dark. */
export function resolveTheme(choice: ThemeChoice, systemDark: boolean): 'light' | 'dark' {
	return choice === 'system' ? (systemDark ? 'dark' : 'light') : choice;
}

function read(key: string): string | null {
	try {
		return localStorage.getItem(key);
	} catch {
		return null;
	}
}

function write(key: string, value: string | null) {
	try {
		if (value === null) localStorage.removeItem(key);
		else localStorage.setItem(key, value);
	} catch {
		// Storage blocked: the choice lasts for this page only.
	}
}

export const storedTheme = (): ThemeChoice => parseTheme(read(THEME_KEY));
export const storedDensity = (): Density => parseDensity(read(DENSITY_KEY));

const systemDark = () => typeof matchMedia !== 'undefined' && matchMedia(DARK_QUERY).matches;

/** Show and remember a theme ('system' is stored as no choice). */
export function setTheme(choice: ThemeChoice): void {
	write(THEME_KEY, choice === 'system' ? null : choice);
	document.documentElement.dataset.theme = resolveTheme(choice, systemDark());
}

export function setDensity(d: Density): void {
	write(DENSITY_KEY, d === 'comfortable' ? null : d);
	document.documentElement.dataset.density = d;
}

/** While the choice is 'system', follow the system's changes; returns the stop function. */
export function followSystemTheme(): () => void {
	if (typeof matchMedia === 'undefined') return () => {};
	const mq = matchMedia(DARK_QUERY);
	const change = () => {
		if (storedTheme() === 'system') document.documentElement.dataset.theme = resolveTheme('system', mq.matches);
	};
	mq.addEventListener('change', change);
	return () => mq.removeEventListener('change', change);
}
