-- The embedded store: the tables and columns of sql/0001_init.sql (what each holds is said there).
-- Money is canonical decimal TEXT, handled with decimal.js in code. Times: *_at in Unix seconds;
-- lease_until and not_before in Unix milliseconds.
--
-- IF NOT EXISTS throughout, unlike PostgreSQL's: a data dir made before migrations were recorded
-- (see ../migrate.ts) may have some of these tables already (the first release had no `files`),
-- and this file is applied to it again to create the rest.
CREATE TABLE IF NOT EXISTS accounts (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  balance_usd TEXT NOT NULL,
  held_usd TEXT NOT NULL DEFAULT '0',
  max_open_batches INTEGER NOT NULL,
  rate_limit_per_minute INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  name TEXT,
  scopes TEXT NOT NULL,
  rate_limit_per_minute INTEGER,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);

CREATE TABLE IF NOT EXISTS batches (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  name TEXT,
  endpoint TEXT NOT NULL,
  status TEXT NOT NULL,
  completion_window_hours INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  deadline_at INTEGER NOT NULL,
  started_at INTEGER,
  finalizing_at INTEGER,
  finished_at INTEGER,
  cancel_requested_at INTEGER,
  line_count INTEGER NOT NULL,
  pending INTEGER NOT NULL,
  running INTEGER NOT NULL DEFAULT 0,
  succeeded INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  cancelled INTEGER NOT NULL DEFAULT 0,
  expired INTEGER NOT NULL DEFAULT 0,
  cost_ceiling_usd TEXT NOT NULL,
  cost_usd TEXT NOT NULL DEFAULT '0',
  held_usd TEXT NOT NULL,
  source TEXT NOT NULL,
  metadata TEXT,
  input_file_id TEXT,
  errors TEXT,
  idempotency_key TEXT
);
CREATE INDEX IF NOT EXISTS batches_by_account ON batches (account_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS batches_idempotency
  ON batches (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS batches_open
  ON batches (deadline_at) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

CREATE TABLE IF NOT EXISTS lines (
  batch_id TEXT NOT NULL,
  line_no INTEGER NOT NULL,
  custom_id TEXT NOT NULL,
  input TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  lease_owner TEXT,
  lease_until INTEGER,
  not_before INTEGER NOT NULL DEFAULT 0,
  response_status INTEGER,
  response TEXT,
  error_code TEXT,
  error_message TEXT,
  error_upstream TEXT,
  cost_usd TEXT,
  provider TEXT,
  latency_ms INTEGER,
  finished_at INTEGER,
  PRIMARY KEY (batch_id, line_no)
);
CREATE INDEX IF NOT EXISTS lines_pending ON lines (batch_id, line_no) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS lines_running ON lines (lease_until) WHERE status = 'running';

-- Uploaded files (content on disk under <data dir>/files) and the output and error files that
-- are rendered from a batch's results on request (no content stored).
CREATE TABLE IF NOT EXISTS files (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  purpose TEXT NOT NULL,
  filename TEXT NOT NULL,
  bytes INTEGER,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL,
  batch_id TEXT,
  kind TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS files_by_account ON files (account_id, id);
