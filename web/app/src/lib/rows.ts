// The rows of a message list: a day separator before the first message of
// each local day, and messages grouped under one header while the same
// person keeps writing (within five minutes, and not after a thread root).
import { dayKey, dayLabel } from './time';
import type { Row, ViewMessage } from './view';

export const GROUP_MS = 5 * 60 * 1000;

export function buildRows(messages: readonly ViewMessage[], now = new Date()): Row[] {
  const out: Row[] = [];
  let prev: ViewMessage | undefined;
  for (const m of messages) {
    const day = dayKey(m.created_at);
    const newDay = !prev || dayKey(prev.created_at) !== day;
    if (newDay) out.push({ kind: 'day', key: 'day-' + day, label: dayLabel(m.created_at, now) });
    const grouped =
      !newDay &&
      !!prev &&
      prev.user_id === m.user_id &&
      !prev.reply_count &&
      new Date(m.created_at).getTime() - new Date(prev.created_at).getTime() < GROUP_MS;
    out.push({ kind: 'msg', key: m.id, m, grouped });
    prev = m;
  }
  return out;
}
