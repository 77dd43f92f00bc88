-- +goose Up
-- Integrations (docs/integrations.md): bot users and their scoped tokens,
-- incoming and outgoing webhooks, slash commands, and the audit of what
-- bots did. Times are microseconds.
--
-- A bot is a user row with is_bot set and a guest membership of the one
-- workspace that owns it (so it sees only the channels it is in). Its
-- tokens are sessions whose scopes column lists what they may do
-- (space-separated); a person's login has scopes NULL (everything).
ALTER TABLE users ADD COLUMN is_bot BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN scopes TEXT;

CREATE TABLE bots (
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL DEFAULT 'bot',
    created_by    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    PRIMARY KEY (workspace_id, user_id)
);

-- bot_tokens names a bot's sessions so that admins can list and revoke
-- them without ever seeing a token (the hash is the sessions row's key).
CREATE TABLE bot_tokens (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL UNIQUE,
    bot_id        TEXT NOT NULL,
    token_hash    TEXT NOT NULL UNIQUE,
    label         TEXT NOT NULL DEFAULT '',
    created_by    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);
CREATE INDEX bot_tokens_bot ON bot_tokens(bot_id);

-- Incoming webhooks post into one channel as their own bot. secret_hash is
-- the SHA-256 of the URL's secret part.
CREATE TABLE incoming_webhooks (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL UNIQUE,
    channel_id    TEXT NOT NULL,
    bot_id        TEXT NOT NULL,
    name          TEXT NOT NULL,
    secret_hash   TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);
CREATE INDEX incoming_webhooks_channel ON incoming_webhooks(channel_id);

-- Slash commands (kind 'command', unique name per workspace) and outgoing
-- webhooks (kind 'outgoing', a channel and trigger words) both POST a
-- signed request to url; signing_secret is the HMAC key, shown to admins.
CREATE TABLE integrations (
    workspace_id    TEXT NOT NULL,
    id              TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    name            TEXT NOT NULL,
    channel_id      TEXT NOT NULL DEFAULT '',
    trigger_words   TEXT NOT NULL DEFAULT '',
    url             TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    signing_secret  TEXT NOT NULL,
    bot_id          TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);
CREATE UNIQUE INDEX integrations_command ON integrations(workspace_id, name) WHERE kind = 'command';
CREATE INDEX integrations_channel ON integrations(channel_id) WHERE kind = 'outgoing';

-- response_url tokens of slash command invocations: a delayed answer may
-- come for a while (expires_at) and a few times (uses).
CREATE TABLE command_responses (
    token_hash      TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL,
    integration_id  TEXT NOT NULL,
    channel_id      TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    uses            INTEGER NOT NULL DEFAULT 0,
    expires_at      BIGINT NOT NULL
);

-- What bots did: every write a bot token made through the API, and every
-- post by a webhook or a command. Read by workspace admins.
CREATE TABLE bot_audit (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    bot_id        TEXT NOT NULL,
    at            BIGINT NOT NULL,
    action        TEXT NOT NULL,
    target        TEXT NOT NULL DEFAULT '',
    status        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, id)
);
CREATE INDEX bot_audit_bot ON bot_audit(workspace_id, bot_id, at);

-- +goose Down
DROP TABLE bot_audit;
DROP TABLE command_responses;
DROP TABLE integrations;
DROP TABLE incoming_webhooks;
DROP TABLE bot_tokens;
DROP TABLE bots;
ALTER TABLE sessions DROP COLUMN scopes;
ALTER TABLE users DROP COLUMN is_bot;
