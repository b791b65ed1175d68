-- The hash of the request that made a batch under an idempotency key: see
-- sql/0022_batch_request_hash.sql.
ALTER TABLE batches ADD COLUMN request_hash TEXT;
