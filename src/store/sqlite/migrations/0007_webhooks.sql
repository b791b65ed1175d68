-- Signed webhooks and the outbox of their deliveries: see sql/0007_webhooks.sql for what each
-- column holds.
CREATE TABLE IF NOT EXISTS webhooks (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id),
  url TEXT NOT NULL,
  events TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhooks_by_account ON webhooks (account_id, id);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  webhook_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  batch_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  lease_owner TEXT,
  last_attempt_at INTEGER,
  last_status_code INTEGER,
  last_error TEXT,
  delivered_at INTEGER,
  PRIMARY KEY (webhook_id, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
  WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_by_batch ON webhook_deliveries (batch_id);
