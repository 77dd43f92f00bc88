-- +goose Up
-- Files (docs/files.md). The bytes live in the file storage (a directory or
-- an S3 bucket) under storage_key; these rows say whose they are and where
-- they are attached. A file is uploaded to a workspace by user_id, then
-- attached to at most one message (message_id, channel_id), which copies
-- its public fields into messages.files (JSON) so that history reads need
-- no join. deleted_at marks a file whose bytes the sweeper is to remove
-- (its message or its uploader deleted it); the row goes once they are.
CREATE TABLE files (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    name           TEXT NOT NULL,
    size           BIGINT NOT NULL,
    content_type   TEXT NOT NULL,
    width          BIGINT NOT NULL DEFAULT 0,
    height         BIGINT NOT NULL DEFAULT 0,
    storage_key    TEXT NOT NULL,
    thumbnail_key  TEXT,
    channel_id     TEXT,
    message_id     TEXT,
    created_at     BIGINT NOT NULL,
    deleted_at     BIGINT
);
CREATE INDEX files_workspace ON files(workspace_id);
CREATE INDEX files_message ON files(message_id) WHERE message_id IS NOT NULL;
CREATE INDEX files_channel ON files(channel_id, id) WHERE channel_id IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX files_swept ON files(deleted_at) WHERE deleted_at IS NOT NULL;

-- Bytes of live files per workspace, kept in the transaction that changes
-- them (never a SUM on the upload path); the quota is checked against it.
CREATE TABLE workspace_file_usage (
    workspace_id  TEXT PRIMARY KEY,
    bytes         BIGINT NOT NULL
);

-- Resumable uploads in progress: offset is how many bytes the storage
-- holds (whole chunks of chunk_size); backend_id is the storage's own
-- multipart upload id.
CREATE TABLE file_uploads (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    file_id       TEXT NOT NULL,
    name          TEXT NOT NULL,
    size          BIGINT NOT NULL,
    chunk_size    BIGINT NOT NULL,
    received      BIGINT NOT NULL DEFAULT 0,
    storage_key   TEXT NOT NULL,
    backend_id    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX file_uploads_expiry ON file_uploads(expires_at);
CREATE INDEX file_uploads_workspace ON file_uploads(workspace_id);

-- The key that signs download URLs, shared by every node of the cluster.
CREATE TABLE file_signing_key (
    id   INTEGER PRIMARY KEY,
    key  TEXT NOT NULL
);

-- The attachments a message carries (JSON array of files, public fields).
ALTER TABLE messages ADD COLUMN files TEXT;

-- +goose Down
ALTER TABLE messages DROP COLUMN files;
DROP TABLE file_signing_key;
DROP TABLE file_uploads;
DROP TABLE workspace_file_usage;
DROP TABLE files;
