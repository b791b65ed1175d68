-- Fine-tuned adapters of an account: see sql/0008_adapters.sql for what each column holds.
CREATE TABLE IF NOT EXISTS adapters (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  base_model TEXT NOT NULL,
  name TEXT NOT NULL,
  rank INTEGER NOT NULL CHECK (rank > 0),
  size_mib INTEGER NOT NULL CHECK (size_mib > 0),
  source TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'inactive')),
  created_at INTEGER NOT NULL,
  deactivated_at INTEGER
);
CREATE INDEX IF NOT EXISTS adapters_by_account ON adapters (account_id, created_at);
