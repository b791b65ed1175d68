-- When the provider refused a chunk as a whole (ms): see sql/0024_chunk_refused.sql.
ALTER TABLE batch_chunks ADD COLUMN refused_at INTEGER;
