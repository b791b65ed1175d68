-- An account's settled money off its row: see sql/0018_account_ledger.sql. SQLite has one writer,
-- so its settlements update the account's row and never write here; the table is kept for the
-- two schemas' parity.
CREATE TABLE account_ledger (
  account_id TEXT NOT NULL,
  owner TEXT NOT NULL,
  drawn_usd TEXT NOT NULL DEFAULT '0',
  PRIMARY KEY (account_id, owner)
);
