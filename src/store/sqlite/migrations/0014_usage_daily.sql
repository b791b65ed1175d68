-- Usage per account, UTC day, model and provider: see sql/0014_usage_daily.sql. `day` is the
-- date as text (YYYY-MM-DD, which sorts as it reads); money as canonical decimal text.
CREATE TABLE usage_daily (
  account_id TEXT NOT NULL,
  day TEXT NOT NULL,
  model TEXT NOT NULL,
  provider TEXT NOT NULL,
  lines INTEGER NOT NULL DEFAULT 0,
  live_calls INTEGER NOT NULL DEFAULT 0,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  cached_input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd TEXT NOT NULL DEFAULT '0',
  first_offering_cost_usd TEXT NOT NULL DEFAULT '0',
  PRIMARY KEY (account_id, day, model, provider)
) WITHOUT ROWID;
