-- A batch's tokens by class, summed over its succeeded lines as each is recorded, in the same
-- transaction as its cost (docs/pricing.md: the batch object's `usage`). Input counts every prompt
-- token; cached and written are parts of it. (src/store/sqlite/migrations/0013_batch_usage.sql
-- is the twin.)
ALTER TABLE batches ADD COLUMN usage_input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN usage_cached_input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN usage_cache_write_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN usage_output_tokens bigint NOT NULL DEFAULT 0;
-- What the same lines would have cost with every prompt token uncached, at each line's own
-- offering and tier: the dashboard shows what caching saved against it.
ALTER TABLE batches ADD COLUMN usage_uncached_cost_usd numeric NOT NULL DEFAULT 0;
