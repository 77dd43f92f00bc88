-- +goose Up
-- Email for missed mentions and DMs (docs/email.md, package notify).
--
-- notify_prefs: a user's choice; no row means the default (on, every 15
-- minutes). mode is 'off' or 'on'; interval_seconds is the least time
-- between two emails and how long an unread item waits before it is sent.
CREATE TABLE notify_prefs (
    user_id           TEXT PRIMARY KEY,
    mode              TEXT NOT NULL,
    interval_seconds  BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);

-- notify_state: per user, when the last email went out and which node
-- holds the claim to send the next one (claimed_until, microseconds; a
-- claim past it is free again, so a node that died mid-send delays the
-- email but does not stop it).
CREATE TABLE notify_state (
    user_id        TEXT PRIMARY KEY,
    last_sent_at   BIGINT NOT NULL DEFAULT 0,
    claimed_by     TEXT NOT NULL DEFAULT '',
    claimed_until  BIGINT NOT NULL DEFAULT 0
);

-- notify_sent: per (user, channel), the last seq an email covered, so an
-- item is emailed once; items at or below the read marker are never sent.
CREATE TABLE notify_sent (
    user_id     TEXT NOT NULL,
    channel_id  TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    PRIMARY KEY (user_id, channel_id)
);

-- +goose Down
DROP TABLE notify_sent;
DROP TABLE notify_state;
DROP TABLE notify_prefs;
