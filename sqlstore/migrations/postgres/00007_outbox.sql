-- +goose Up
-- The outbox (docs/delivery.md): one row per channel whose latest durable
-- events are committed but not yet known to be on the bus. The transaction
-- that appends a channel's events upserts its row; the node that committed
-- them deletes it once the bus has taken them (a flush), and the relay of
-- any node publishes the rows that stay older than the grace period from
-- the event log. A published tail is enough: an earlier unpublished event
-- shows up to the gateways as a gap, which they fill from the log.
--   from_seq: the first seq not known to be published.
--   seq: the channel's last committed seq.
--   since: when from_seq was committed (or the row last acknowledged in
--   part), microseconds; the relay waits for it to age by the grace period.
CREATE TABLE channel_outbox (
    channel_id    TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    from_seq      BIGINT NOT NULL,
    seq           BIGINT NOT NULL,
    since         BIGINT NOT NULL
);

-- +goose Down
DROP TABLE channel_outbox;
