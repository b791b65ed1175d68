-- The catalog model and the account of a chunk: see sql/0019_chunk_model.sql.
ALTER TABLE batch_chunks ADD COLUMN model TEXT;
ALTER TABLE batch_chunks ADD COLUMN account_id TEXT;
