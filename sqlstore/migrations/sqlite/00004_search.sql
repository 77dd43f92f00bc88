-- +goose Up
-- Full-text search over message text (search.go): an FTS5 index kept by
-- triggers on messages, so that no write path has to remember it.
--
-- FTS5 needs an integer rowid per document. messages has only an implicit
-- rowid, which VACUUM may renumber, so each indexed message gets a stable
-- document number here instead. Numbers are given in insertion order, which
-- on SQLite's single writer is the order messages were posted: walking the
-- index by descending number walks matches newest first and stops after a
-- page, however common the term. channel_id is kept beside the number so
-- that visibility is decided without reading the message row.
CREATE TABLE message_search_docs (
    doc         INTEGER PRIMARY KEY,
    message_id  TEXT NOT NULL UNIQUE,
    channel_id  TEXT NOT NULL
);

-- The index's external content: the live text of each document.
CREATE VIEW message_search_content (doc, text) AS
    SELECT d.doc, m.text FROM message_search_docs d JOIN messages m ON m.id = d.message_id;

-- unicode61 with diacritics removed: case- and accent-insensitive words of
-- any script, no stemming (no language is assumed). Prefix indexes for 2,
-- 3 and 4 characters: the last word of a query is a prefix while it is
-- typed, and short prefixes are the ones that match many words (without
-- them FTS5 merges every such word's list; the index is about 2.8 times
-- bigger, docs/benchmarks.md "Search").
CREATE VIRTUAL TABLE message_search USING fts5(
    text,
    content = 'message_search_content',
    content_rowid = 'doc',
    tokenize = 'unicode61 remove_diacritics 2',
    prefix = '2 3 4'
);

-- +goose StatementBegin
CREATE TRIGGER message_search_insert AFTER INSERT ON messages
WHEN new.deleted_at IS NULL
BEGIN
    INSERT INTO message_search_docs (message_id, channel_id) VALUES (new.id, new.channel_id);
    INSERT INTO message_search (rowid, text) VALUES (last_insert_rowid(), new.text);
END;
-- +goose StatementEnd

-- An edit re-indexes the text under the same number (the message keeps its
-- place in the newest-first order); a delete (deleted_at set, text cleared)
-- drops the document. External content: the old text must be handed back
-- for the delete.
-- +goose StatementBegin
CREATE TRIGGER message_search_update AFTER UPDATE OF text, deleted_at ON messages
BEGIN
    INSERT INTO message_search (message_search, rowid, text)
        SELECT 'delete', doc, old.text FROM message_search_docs WHERE message_id = old.id;
    INSERT INTO message_search (rowid, text)
        SELECT doc, new.text FROM message_search_docs WHERE message_id = new.id AND new.deleted_at IS NULL;
    DELETE FROM message_search_docs WHERE message_id = new.id AND new.deleted_at IS NOT NULL;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER message_search_delete AFTER DELETE ON messages
BEGIN
    INSERT INTO message_search (message_search, rowid, text)
        SELECT 'delete', doc, old.text FROM message_search_docs WHERE message_id = old.id;
    DELETE FROM message_search_docs WHERE message_id = old.id;
END;
-- +goose StatementEnd

-- Existing messages, oldest first.
INSERT INTO message_search_docs (message_id, channel_id)
    SELECT id, channel_id FROM messages WHERE deleted_at IS NULL ORDER BY created_at, channel_id, seq;
INSERT INTO message_search (message_search) VALUES ('rebuild');

-- +goose Down
DROP TRIGGER message_search_delete;
DROP TRIGGER message_search_update;
DROP TRIGGER message_search_insert;
DROP TABLE message_search;
DROP VIEW message_search_content;
DROP TABLE message_search_docs;
