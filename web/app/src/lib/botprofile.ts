// How a bot message presents itself (docs/integrations.md, "Names and icons
// of bot messages"): the name and icon its webhook or command answer asked
// for, shown only on a bot user's message and always beside the BOT badge,
// so that a webhook calling itself "Alice" never passes for Alice.

import type { BotProfile } from '@parley/client';

/** The profile to show for a message, or undefined (no profile, or not a bot's message). */
export function shownProfile(p: BotProfile | undefined, authorIsBot: boolean | undefined): BotProfile | undefined {
	if (!p || !authorIsBot) return undefined;
	return p;
}

/**
 * An icon URL fit for <img src>: absolute http(s) with a host and no
 * credentials, else undefined. The server checked it already; this is the
 * client's own guard (an old or foreign server, a hand-made event).
 */
export function iconSrc(url: string | undefined): string | undefined {
	if (!url || url.length > 2048) return undefined;
	let u: URL;
	try {
		u = new URL(url);
	} catch {
		return undefined;
	}
	if ((u.protocol !== 'https:' && u.protocol !== 'http:') || !u.host || u.username || u.password) return undefined;
	return u.href;
}

/** The display name: the profile's, else the user's. */
export function displayName(p: BotProfile | undefined, userName: string | undefined): string {
	const n = p?.name?.trim();
	return n || userName || 'Unknown user';
}

/** Whether two messages show the same sender (for grouping rows under one header). */
export function sameSender(a: { user_id: string; bot_profile?: BotProfile }, b: { user_id: string; bot_profile?: BotProfile }): boolean {
	if (a.user_id !== b.user_id) return false;
	const x = a.bot_profile ?? {};
	const y = b.bot_profile ?? {};
	return (x.name ?? '') === (y.name ?? '') && (x.icon_emoji ?? '') === (y.icon_emoji ?? '') && (x.icon_url ?? '') === (y.icon_url ?? '');
}
