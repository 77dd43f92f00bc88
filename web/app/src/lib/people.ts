// Names of conversations made of people: DMs and group DMs are named after
// their other members, as other chat apps do.

/**
 * The other members of a DM or group DM: everyone but the user, or the
 * user alone for a DM with oneself.
 */
export function dmOthers(memberIds: readonly string[] | undefined, selfId: string): string[] {
	const others = (memberIds ?? []).filter((id) => id !== selfId);
	return others.length ? others : selfId ? [selfId] : [];
}

/**
 * A DM's or group DM's title from its other members' full names, sorted:
 * "Alice Moreau, Bob Okafor, Carol Lindqvist". Users not resolved yet read
 * "…"; the DM with oneself gets " (you)".
 */
export function dmTitle(memberIds: readonly string[] | undefined, selfId: string, nameOf: (id: string) => string | undefined): string {
	const others = dmOthers(memberIds, selfId);
	const names = others.map((id) => nameOf(id));
	if (others.length === 1 && others[0] === selfId) return `${names[0] ?? '…'} (you)`;
	// By name, so that every member's list reads in the same order (the
	// server lists members by id); those not resolved yet go last.
	const known = names.filter((n): n is string => n !== undefined).sort((a, b) => a.localeCompare(b));
	return [...known, ...names.filter((n) => n === undefined).map(() => '…')].join(', ');
}
