-- +goose Up
-- Times are unix microseconds (UTC) in both dialects (BIGINT here), so that one set of
-- queries serves SQLite and PostgreSQL.

CREATE TABLE orgs (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE users (
    id                 TEXT PRIMARY KEY,
    email              TEXT NOT NULL UNIQUE,
    handle             TEXT NOT NULL UNIQUE,
    name               TEXT NOT NULL,
    title              TEXT NOT NULL DEFAULT '',
    avatar_hash        TEXT NOT NULL DEFAULT '',
    password_hash      TEXT NOT NULL,
    status_emoji       TEXT NOT NULL DEFAULT '',
    status_text        TEXT NOT NULL DEFAULT '',
    status_expires_at  BIGINT,
    deactivated_at     BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);

CREATE TABLE sessions (
    token_hash  TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES orgs(id),
    name        TEXT NOT NULL,
    slug        TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE workspace_members (
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    role          TEXT NOT NULL,
    joined_at     BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX workspace_members_user ON workspace_members(user_id);

CREATE TABLE invites (
    workspace_id  TEXT NOT NULL,
    code_hash     TEXT NOT NULL UNIQUE,
    created_by    TEXT NOT NULL,
    max_uses      BIGINT NOT NULL DEFAULT 0,
    uses          BIGINT NOT NULL DEFAULT 0,
    expires_at    BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, code_hash)
);

CREATE TABLE channels (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    topic         TEXT NOT NULL DEFAULT '',
    purpose       TEXT NOT NULL DEFAULT '',
    created_by    TEXT NOT NULL,
    dm_key        TEXT,
    last_seq      BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    archived_at   BIGINT,
    PRIMARY KEY (workspace_id, id)
);
CREATE UNIQUE INDEX channels_name ON channels(workspace_id, name) WHERE dm_key IS NULL;
CREATE UNIQUE INDEX channels_dm ON channels(workspace_id, dm_key) WHERE dm_key IS NOT NULL;

-- Member counts live in their own row, changed in the same transaction as
-- joins and leaves: never COUNT(*) on a request path.
CREATE TABLE channel_stats (
    workspace_id  TEXT NOT NULL,
    channel_id    TEXT NOT NULL,
    member_count  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, channel_id)
);

CREATE TABLE channel_members (
    workspace_id   TEXT NOT NULL,
    channel_id     TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    joined_at      BIGINT NOT NULL,
    last_read_seq  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, channel_id, user_id)
);
CREATE INDEX channel_members_user ON channel_members(user_id, workspace_id);

CREATE TABLE messages (
    workspace_id    TEXT NOT NULL,
    id              TEXT NOT NULL UNIQUE,
    channel_id      TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    user_id         TEXT NOT NULL,
    text            TEXT NOT NULL,
    client_msg_id   TEXT,
    thread_root_id  TEXT,
    reply_count     BIGINT NOT NULL DEFAULT 0,
    last_reply_at   BIGINT,
    created_at      BIGINT NOT NULL,
    edited_at       BIGINT,
    deleted_at      BIGINT,
    PRIMARY KEY (workspace_id, id)
);
CREATE UNIQUE INDEX messages_seq ON messages(channel_id, seq);
CREATE UNIQUE INDEX messages_client_id ON messages(channel_id, user_id, client_msg_id) WHERE client_msg_id IS NOT NULL;
CREATE INDEX messages_history ON messages(channel_id, seq) WHERE thread_root_id IS NULL AND deleted_at IS NULL;
CREATE INDEX messages_replies ON messages(thread_root_id, seq) WHERE thread_root_id IS NOT NULL;

CREATE TABLE reactions (
    workspace_id  TEXT NOT NULL,
    message_id    TEXT NOT NULL,
    emoji         TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, message_id, emoji, user_id)
);

CREATE TABLE pins (
    workspace_id  TEXT NOT NULL,
    channel_id    TEXT NOT NULL,
    message_id    TEXT NOT NULL,
    pinned_by     TEXT NOT NULL,
    pinned_at     BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, message_id)
);
CREATE INDEX pins_channel ON pins(channel_id, pinned_at);

-- The per-channel durable event log: gap-free seq per channel, written in the
-- same transaction as the change. It is the ordering, the outbox and the
-- replay source for catch-up.
CREATE TABLE events (
    workspace_id  TEXT NOT NULL,
    channel_id    TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    type          TEXT NOT NULL,
    data          TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, channel_id, seq)
);

-- +goose Down
DROP TABLE events;
DROP TABLE pins;
DROP TABLE reactions;
DROP TABLE messages;
DROP TABLE channel_members;
DROP TABLE channel_stats;
DROP TABLE channels;
DROP TABLE invites;
DROP TABLE workspace_members;
DROP TABLE workspaces;
DROP TABLE sessions;
DROP TABLE users;
DROP TABLE orgs;
