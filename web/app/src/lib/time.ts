// Dates as a chat shows them: day separators, short times, relative ages.

const dayFmt = new Intl.DateTimeFormat(undefined, { weekday: 'long', month: 'long', day: 'numeric' });
const dayYearFmt = new Intl.DateTimeFormat(undefined, { weekday: 'long', month: 'long', day: 'numeric', year: 'numeric' });
const timeFmt = new Intl.DateTimeFormat(undefined, { hour: 'numeric', minute: '2-digit' });
const fullFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** A key that is equal for two times on the same local calendar day. */
export function dayKey(iso: string): string {
	const d = new Date(iso);
	return `${d.getFullYear()}-${d.getMonth()}-${d.getDate()}`;
}

/** "Today", "Yesterday", or the weekday and date. */
export function dayLabel(iso: string, now = new Date()): string {
	const d = new Date(iso);
	const k = dayKey(iso);
	if (k === dayKey(now.toISOString())) return 'Today';
	const y = new Date(now);
	y.setDate(y.getDate() - 1);
	if (k === dayKey(y.toISOString())) return 'Yesterday';
	return d.getFullYear() === now.getFullYear() ? dayFmt.format(d) : dayYearFmt.format(d);
}

export const shortTime = (iso: string) => timeFmt.format(new Date(iso));
export const fullTime = (iso: string) => fullFmt.format(new Date(iso));

/** "just now", "5 minutes ago", "3 hours ago", or a date. */
export function ago(iso: string, now = Date.now()): string {
	const s = Math.round((now - new Date(iso).getTime()) / 1000);
	if (s < 45) return 'just now';
	const m = Math.round(s / 60);
	if (m < 60) return m === 1 ? '1 minute ago' : `${m} minutes ago`;
	const h = Math.round(m / 60);
	if (h < 24) return h === 1 ? '1 hour ago' : `${h} hours ago`;
	return fullTime(iso);
}
