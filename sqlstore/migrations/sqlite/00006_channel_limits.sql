-- +goose Up
-- Slow mode and per-channel post limits (docs/join-limits.md), set by the
-- channel's managers; 0 is off.
--   slow_mode_seconds: a member posts at most once per this many seconds.
--   post_limit_per_minute: the channel takes at most this many posts a
--   minute, counted in a window that opens with its first post
--   (post_window_start, microseconds) and holds post_window_count posts.
-- channel_members.last_post_at is the member's last post under slow mode
-- (microseconds), written only while the channel has slow mode on.
-- The state is in the store, in the post's own transaction, so every node
-- enforces the same limits at once.
ALTER TABLE channels ADD COLUMN slow_mode_seconds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channels ADD COLUMN post_limit_per_minute INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channels ADD COLUMN post_window_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE channels ADD COLUMN post_window_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE channel_members ADD COLUMN last_post_at BIGINT;

-- +goose Down
ALTER TABLE channel_members DROP COLUMN last_post_at;
ALTER TABLE channels DROP COLUMN post_window_count;
ALTER TABLE channels DROP COLUMN post_window_start;
ALTER TABLE channels DROP COLUMN post_limit_per_minute;
ALTER TABLE channels DROP COLUMN slow_mode_seconds;
