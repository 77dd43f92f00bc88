-- +goose Up
-- Unread and mention counts, maintained in the write paths so that boot
-- never counts messages (ARCHITECTURE §2, §5).
--
-- A message "counts in the channel" when it shows in the channel's own
-- history: today every top-level message (collapsed threads: replies count
-- in their thread instead). Counted messages are numbered 1, 2, 3… per
-- channel in messages.ord (NULL for the others); channels.msg_count is the
-- last number given. A membership keeps read_ord, the number of counted
-- messages at or before its read marker, so a member's unread count is
-- msg_count - read_ord, less the counted messages deleted after the marker
-- (messages_deleted_counted holds only those). Posting moves the poster's
-- marker to their post, so one's own posts are never unread.
--
-- mentions holds one row per (member, counted message that @mentions them
-- or @channel/@here/@everyone); a member's mention count is their rows
-- after the read marker, and moving the marker deletes the rows it passes,
-- so the table holds about the unread mentions only.

ALTER TABLE channels ADD COLUMN msg_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN ord INTEGER;
ALTER TABLE channel_members ADD COLUMN read_ord INTEGER NOT NULL DEFAULT 0;

CREATE INDEX messages_counted ON messages(channel_id, seq) WHERE ord IS NOT NULL;
CREATE INDEX messages_deleted_counted ON messages(channel_id, seq) WHERE ord IS NOT NULL AND deleted_at IS NOT NULL;

CREATE TABLE mentions (
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    channel_id    TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, user_id, channel_id, seq)
);
CREATE INDEX mentions_message ON mentions(workspace_id, channel_id, seq);

-- Existing data: number the top-level messages and set the counters from
-- them. Mentions of existing messages are not recovered (that needs the
-- text parsed); counts of those start at zero.
UPDATE messages SET ord = r.n
FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY channel_id ORDER BY seq) AS n
      FROM messages WHERE thread_root_id IS NULL) AS r
WHERE messages.id = r.id;
UPDATE channels SET msg_count = COALESCE(
    (SELECT MAX(m.ord) FROM messages m WHERE m.channel_id = channels.id AND m.ord IS NOT NULL), 0);
UPDATE channel_members SET read_ord = COALESCE(
    (SELECT m.ord FROM messages m
     WHERE m.channel_id = channel_members.channel_id AND m.ord IS NOT NULL
       AND m.seq <= channel_members.last_read_seq
     ORDER BY m.seq DESC LIMIT 1), 0);

-- +goose Down
DROP INDEX mentions_message;
DROP TABLE mentions;
DROP INDEX messages_deleted_counted;
DROP INDEX messages_counted;
ALTER TABLE channel_members DROP COLUMN read_ord;
ALTER TABLE messages DROP COLUMN ord;
ALTER TABLE channels DROP COLUMN msg_count;
