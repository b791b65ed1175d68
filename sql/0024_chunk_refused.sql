-- Batch lanes (docs/batch-lanes.md): when the provider refused a chunk as a whole (ms): its
-- provider batch `failed` (e.g. token_limit_exceeded), or an answer to its upload or create that
-- gave it up (not a busy one). Null when it did not, or gave no answer (unreachable). Such a
-- chunk reached the provider: its batch has started (docs/open-models.md, starting in time;
-- src/store/batches/start-in-time.ts), though its lines wait for the lane again.
-- src/store/sqlite/migrations/0024_chunk_refused.sql is the twin.
ALTER TABLE batch_chunks ADD COLUMN refused_at bigint;
