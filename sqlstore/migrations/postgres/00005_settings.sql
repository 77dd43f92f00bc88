-- +goose Up
-- Server-wide settings: the live configuration (ARCHITECTURE §7) is one
-- JSON document under the key 'live'. This table is the source of truth;
-- the bus only tells the nodes that it changed. Unknown fields are kept
-- as written and missing ones take the server's defaults on load, so a
-- newer or older binary reads the same row safely.
CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    version    BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE settings;
