-- +goose Up
-- Collapsed reply threads (ARCHITECTURE §2, after Mattermost's CRT): a
-- thread row per root that has replies (or a follower), and one membership
-- row per (user, thread) the user follows or has followed. Counts are kept
-- by the writes that change them; nothing here is ever recounted from
-- messages.
--
-- participants is the comma-separated ids of the users who replied, in the
-- order of their first reply. following is 0 or 1 (one type for both
-- dialects). last_update_at is the thread's last_reply_at as this member
-- last heard of it: the threads list is ordered by it, and a reply sets it
-- on every follower in the one statement that counts their unread reply.

CREATE TABLE threads (
    workspace_id   TEXT NOT NULL,
    root_id        TEXT NOT NULL,
    channel_id     TEXT NOT NULL,
    reply_count    BIGINT NOT NULL DEFAULT 0,
    last_reply_at  BIGINT NOT NULL,
    participants   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workspace_id, root_id)
);

CREATE TABLE thread_memberships (
    workspace_id     TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    root_id          TEXT NOT NULL,
    channel_id       TEXT NOT NULL,
    following        INTEGER NOT NULL DEFAULT 1,
    last_viewed_at   BIGINT NOT NULL,
    unread_replies   BIGINT NOT NULL DEFAULT 0,
    unread_mentions  BIGINT NOT NULL DEFAULT 0,
    last_update_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, root_id, user_id)
);
-- The threads list: a user's followed threads, latest reply first.
CREATE INDEX thread_memberships_list ON thread_memberships(workspace_id, user_id, last_update_at, root_id) WHERE following = 1;
-- Marking a channel read finds only that user's memberships with something
-- unread in the channel: the index holds only those, so the read is as
-- small as the write.
CREATE INDEX thread_memberships_unread ON thread_memberships(user_id, channel_id) WHERE unread_replies > 0 OR unread_mentions > 0;

-- +goose Down
DROP INDEX thread_memberships_unread;
DROP INDEX thread_memberships_list;
DROP TABLE thread_memberships;
DROP TABLE threads;
