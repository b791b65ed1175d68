-- A batch's tokens by class: see sql/0013_batch_usage.sql.
ALTER TABLE batches ADD COLUMN usage_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN usage_cached_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN usage_cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN usage_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN usage_uncached_cost_usd TEXT NOT NULL DEFAULT '0';
