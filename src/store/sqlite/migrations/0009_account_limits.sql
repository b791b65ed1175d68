-- Daily spend limit (sql/0009_account_limits.sql says why).
ALTER TABLE accounts ADD COLUMN daily_spend_limit_usd TEXT;
ALTER TABLE accounts ADD COLUMN live_spend_day INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN live_spent_usd TEXT NOT NULL DEFAULT '0';
CREATE INDEX IF NOT EXISTS batches_by_account_created ON batches (account_id, created_at);
