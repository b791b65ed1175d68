-- Per-account file quotas, uploads in progress and dashboard sessions: see
-- sql/0005_file_quotas_sessions.sql for what each holds. IF NOT EXISTS: a data dir made before
-- migrations were recorded may have them already (see ../migrate.ts).
CREATE TABLE IF NOT EXISTS account_file_quotas (
  account_id TEXT PRIMARY KEY REFERENCES accounts(id),
  max_files INTEGER,
  max_stored_bytes INTEGER
);
CREATE TABLE IF NOT EXISTS upload_reservations (
  file_id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  bytes INTEGER NOT NULL,
  renewed_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS upload_reservations_by_account ON upload_reservations (account_id);
CREATE INDEX IF NOT EXISTS upload_reservations_by_renewal ON upload_reservations (renewed_at);
CREATE TABLE IF NOT EXISTS dashboard_sessions (
  hash TEXT PRIMARY KEY,
  key_id TEXT NOT NULL REFERENCES api_keys(id),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dashboard_sessions_by_key ON dashboard_sessions (key_id);
CREATE INDEX IF NOT EXISTS dashboard_sessions_by_expiry ON dashboard_sessions (expires_at);
