-- Per-account file quotas (docs/money-and-limits.md), uploads in progress, and dashboard sessions. New tables
-- only (src/store/sqlite/migrations/0005_file_quotas_sessions.sql is the twin).

-- An account's own file limits; no row (or a null) means the configured default.
CREATE TABLE account_file_quotas (
  account_id text COLLATE "C" PRIMARY KEY REFERENCES accounts (id),
  max_files int CHECK (max_files >= 0),
  max_stored_bytes bigint CHECK (max_stored_bytes >= 0)
);

-- An upload being received: it counts against the quotas from its first byte, so racing uploads
-- cannot together pass them. `bytes` is what it may still grow to without asking again. The row
-- is replaced by the file's record in one transaction when the upload is whole, or deleted with
-- its content when it fails; `renewed_at` (Unix ms) is touched while it streams, so the janitor
-- can tell an upload whose instance died from one still arriving on another instance.
CREATE TABLE upload_reservations (
  file_id text COLLATE "C" PRIMARY KEY,
  account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
  bytes bigint NOT NULL CHECK (bytes >= 0),
  renewed_at bigint NOT NULL
);
CREATE INDEX upload_reservations_by_account ON upload_reservations (account_id);
CREATE INDEX upload_reservations_by_renewal ON upload_reservations (renewed_at);

-- A dashboard sign-in: the cookie holds a random id, stored here only as its SHA-256. Signing
-- out deletes the row, revoking the key deletes its rows, and a row past `expires_at` (Unix
-- seconds) is refused and swept by the janitor.
CREATE TABLE dashboard_sessions (
  hash text COLLATE "C" PRIMARY KEY,
  key_id text COLLATE "C" NOT NULL REFERENCES api_keys (id),
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX dashboard_sessions_by_key ON dashboard_sessions (key_id);
CREATE INDEX dashboard_sessions_by_expiry ON dashboard_sessions (expires_at);
