// The emoji the client knows by shortcode. Reactions travel as shortcodes
// (PROTOCOL.md: "Reaction emoji in URLs are shortcodes"); this table turns
// them into characters for display and feeds the small reaction picker.

export const EMOJI: Readonly<Record<string, string>> = {
	thumbsup: '👍',
	thumbsdown: '👎',
	heart: '❤️',
	joy: '😂',
	smile: '😄',
	tada: '🎉',
	eyes: '👀',
	rocket: '🚀',
	fire: '🔥',
	pray: '🙏',
	clap: '👏',
	thinking_face: '🤔',
	white_check_mark: '✅',
	x: '❌',
	'100': '💯',
	wave: '👋',
	ok_hand: '👌',
	sweat_smile: '😅',
	slightly_smiling_face: '🙂',
	cry: '😢',
	'+1': '👍',
	'-1': '👎',
};

/** The shortcodes offered in the reaction picker, in display order. */
export const PICKER: readonly string[] = [
	'thumbsup',
	'heart',
	'joy',
	'tada',
	'eyes',
	'rocket',
	'fire',
	'pray',
	'clap',
	'thinking_face',
	'white_check_mark',
	'100',
];

/** The character for a shortcode, or the shortcode between colons. */
export function emojiChar(code: string): string {
	return EMOJI[code] ?? `:${code}:`;
}
