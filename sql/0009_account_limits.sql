-- Per-account daily spend limit (docs/money-and-limits.md). Columns and one index only
-- (src/store/sqlite/migrations/0009_account_limits.sql is the twin). Batches waiting for a
-- top-up (docs/open-models.md) need nothing new: they are `validating` with waiting_code
-- 'insufficient_credit' (0006), holding nothing, until waiting_until.

-- null: no daily limit. What counts against it is worked out from the rows themselves (the
-- day's batches and live leases) plus the live charges written today, kept here per account:
-- `live_spend_day` is the UTC day (Unix days) `live_spent_usd` belongs to; another day's is 0.
ALTER TABLE accounts ADD COLUMN daily_spend_limit_usd numeric CHECK (daily_spend_limit_usd >= 0);
ALTER TABLE accounts ADD COLUMN live_spend_day bigint NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN live_spent_usd numeric NOT NULL DEFAULT 0;

-- The day's batches of an account, for the daily limit.
CREATE INDEX batches_by_account_created ON batches (account_id, created_at);
