-- +goose Up
-- Per-message overrides of a bot's name and icon (docs/integrations.md):
-- an incoming webhook's or a command answer's username, icon_emoji and
-- icon_url, as the JSON of parley.BotProfile; NULL on every other message.
ALTER TABLE messages ADD COLUMN bot_profile TEXT;

-- The thread a slash command was typed in: its delayed answers at
-- response_url go there too.
ALTER TABLE command_responses ADD COLUMN thread_root_id TEXT;

-- +goose Down
ALTER TABLE command_responses DROP COLUMN thread_root_id;
ALTER TABLE messages DROP COLUMN bot_profile;
