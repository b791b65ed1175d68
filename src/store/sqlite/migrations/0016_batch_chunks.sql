-- Batch lanes (docs/batch-lanes.md): see sql/0016_batch_chunks.sql for what each column holds.
CREATE TABLE batch_chunks (
  id TEXT PRIMARY KEY,
  batch_id TEXT NOT NULL,
  offering TEXT NOT NULL,
  provider TEXT NOT NULL,
  upstream_model TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'intent',
  input_file_id TEXT,
  provider_batch_id TEXT,
  line_count INTEGER NOT NULL,
  fallback_at INTEGER NOT NULL,
  lease_owner TEXT,
  lease_until INTEGER,
  next_poll_at INTEGER NOT NULL,
  poll_failures INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX batch_chunks_due ON batch_chunks (next_poll_at) WHERE state NOT IN ('ended', 'abandoned');
CREATE INDEX batch_chunks_batch ON batch_chunks (batch_id);
CREATE TABLE batch_chunk_lines (
  chunk_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  line_no INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (chunk_id, position)
);
