-- +goose Up
-- Imported history (docs/import.md). import_map keys every imported object
-- by its source's own id, written in the same transaction as the object,
-- so that an import run twice, or again after a crash, writes nothing
-- twice: kind is 'user', 'channel' or 'message'; a Slack message's ext_id
-- is its channel id and ts ("C123/1700000000.000100").
CREATE TABLE import_map (
    workspace_id  TEXT NOT NULL,
    source        TEXT NOT NULL,
    kind          TEXT NOT NULL,
    ext_id        TEXT NOT NULL,
    parley_id     TEXT NOT NULL,
    PRIMARY KEY (workspace_id, source, kind, ext_id)
);

-- The accounts an import created for people who had none here: they cannot
-- log in (deactivated, no password) until someone signs up with their
-- email and so claims them, history and all (claimed_at set then).
CREATE TABLE import_accounts (
    user_id       TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    source        TEXT NOT NULL,
    ext_id        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    claimed_at    INTEGER
);

-- The files of imported messages, metadata only, until their bytes are
-- fetched and attached (attached_at set then).
CREATE TABLE import_files (
    workspace_id  TEXT NOT NULL,
    message_id    TEXT NOT NULL,
    ext_id        TEXT NOT NULL,
    position      INTEGER NOT NULL,
    name          TEXT NOT NULL,
    title         TEXT NOT NULL DEFAULT '',
    mimetype      TEXT NOT NULL DEFAULT '',
    size          INTEGER NOT NULL DEFAULT 0,
    url           TEXT NOT NULL DEFAULT '',
    attached_at   INTEGER,
    PRIMARY KEY (workspace_id, message_id, ext_id)
);

-- +goose Down
DROP TABLE import_files;
DROP TABLE import_accounts;
DROP TABLE import_map;
