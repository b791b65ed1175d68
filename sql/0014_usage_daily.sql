-- Usage per account, UTC day, model and provider (docs/operations.md GET /v1/usage, the dashboard's usage
-- page): batch lines and live calls added up as they are answered, so a report reads at most
-- days × models × providers rows, and outlives the lines' results (purged after 30 days).
-- `first_offering_cost_usd`: the same usage priced on the model's first listed offering, what the
-- planner's routing saved being the difference. Each instance adds its own figures (the primary
-- key takes the sums). src/store/sqlite/migrations/0014_usage_daily.sql is the twin.
CREATE TABLE usage_daily (
  account_id text COLLATE "C" NOT NULL,
  day text COLLATE "C" NOT NULL, -- YYYY-MM-DD (UTC), which sorts as it reads
  model text NOT NULL,
  provider text NOT NULL,
  lines bigint NOT NULL DEFAULT 0,
  live_calls bigint NOT NULL DEFAULT 0,
  input_tokens bigint NOT NULL DEFAULT 0,
  cached_input_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  cost_usd numeric NOT NULL DEFAULT 0,
  first_offering_cost_usd numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, day, model, provider)
);
