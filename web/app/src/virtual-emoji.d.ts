// The module the parley-emoji plugin (vite.config.ts) makes from emojibase-data.
declare module 'virtual:parley-emoji' {
	/** [emoji, name (lower case), group index, shortcodes (space-separated), keywords (space-separated)] */
	const rows: [string, string, number, string, string][];
	export default rows;
	/** Group names by index. */
	export const groups: string[];
}
