-- Live credit leases and charge groups (sql/0004_live_credit.sql says why).
CREATE TABLE IF NOT EXISTS credit_leases (
  account_id TEXT NOT NULL REFERENCES accounts(id),
  instance_id TEXT NOT NULL,
  amount_usd TEXT NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  PRIMARY KEY (account_id, instance_id)
);
CREATE INDEX IF NOT EXISTS credit_leases_by_instance ON credit_leases (instance_id);
CREATE TABLE IF NOT EXISTS live_charge_groups (
  id TEXT PRIMARY KEY,
  instance_id TEXT NOT NULL,
  charged_usd TEXT NOT NULL,
  written_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS live_charge_groups_by_time ON live_charge_groups (written_at_ms);
