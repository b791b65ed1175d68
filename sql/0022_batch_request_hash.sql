-- What the request that made a batch under an idempotency key said, as a hash (its surface's
-- body and options; src/admission/request-hash.ts): the same key sent again with a different
-- request is refused (422 idempotency_key_reused) instead of answered with the first batch.
-- Null for a batch made without a key, and for one stored before: any request matches those.
-- src/store/sqlite/migrations/0022_batch_request_hash.sql is the twin.
ALTER TABLE batches ADD COLUMN request_hash text;
