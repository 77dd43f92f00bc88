-- +goose Up
-- Full-text search over message text (search.go): a generated tsvector
-- column, so that no write path has to remember it; edits re-index it and a
-- delete (text cleared) empties it.
--
-- The 'simple' configuration lower-cases words and does nothing else: no
-- stemming and no stop words, so it works the same for every language a
-- team writes in, and matches what SQLite's unicode61 tokenizer does.
-- ASCII punctuation is turned into spaces first (one for one, so offsets
-- are kept for highlighting): PostgreSQL's parser would otherwise keep
-- e-mail addresses, host names, URLs and numbers such as 3.14 as single
-- tokens, and "example" would not find "alice@example.com".
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('simple'::regconfig, translate(text,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~',
        '                                '))
) STORED;

-- Rare terms: the inverted index finds every match, then the few are sorted.
-- Common terms need no index of their own: message ids are time-ordered
-- (ULIDs), so the primary key (workspace_id, id) read backwards walks a
-- workspace's messages newest first, and the search stops after a page.
-- The planner picks between the two from the terms' frequencies.
CREATE INDEX messages_search ON messages USING gin (search) WHERE deleted_at IS NULL;

-- +goose Down
DROP INDEX messages_search;
ALTER TABLE messages DROP COLUMN search;
