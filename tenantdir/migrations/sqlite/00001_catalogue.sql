-- +goose Up
CREATE TABLE tenantdir_shards (
    id         TEXT PRIMARY KEY,
    region     TEXT NOT NULL,
    dsn        TEXT NOT NULL DEFAULT '',
    capacity   INTEGER NOT NULL CHECK (capacity > 0),
    state      TEXT NOT NULL CHECK (state IN ('active', 'draining')),
    version    INTEGER NOT NULL DEFAULT 0,
    changed_at TEXT NOT NULL
);

CREATE TABLE tenantdir_workspaces (
    id              TEXT PRIMARY KEY,
    shard_id        TEXT NOT NULL REFERENCES tenantdir_shards (id),
    target_shard_id TEXT REFERENCES tenantdir_shards (id),
    region          TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('active', 'moving', 'read_only')),
    limits          TEXT NOT NULL DEFAULT '{}',
    features        TEXT NOT NULL DEFAULT '{}',
    version         INTEGER NOT NULL DEFAULT 0,
    changed_at      TEXT NOT NULL
);
CREATE INDEX tenantdir_workspaces_shard ON tenantdir_workspaces (shard_id);
CREATE INDEX tenantdir_workspaces_target ON tenantdir_workspaces (target_shard_id);

-- The outbox: every catalogue change, in commit order, with the full new
-- state of what changed; published_at is set once the relay has it in
-- every audience's stream.
CREATE TABLE tenantdir_changes (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT NOT NULL CHECK (kind IN ('shard', 'workspace')),
    key          TEXT NOT NULL,
    payload      TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    published_at TEXT
);
CREATE INDEX tenantdir_changes_pending ON tenantdir_changes (seq) WHERE published_at IS NULL;

-- +goose Down
DROP TABLE tenantdir_changes;
DROP TABLE tenantdir_workspaces;
DROP TABLE tenantdir_shards;
