-- Spend caps and why a batch waits: the columns of sql/0006_spend_caps_waiting.sql (what each
-- holds is said there). Money is canonical decimal TEXT.
ALTER TABLE batches ADD COLUMN max_cost_usd TEXT;
ALTER TABLE batches ADD COLUMN reserved_usd TEXT NOT NULL DEFAULT '0';
ALTER TABLE lines ADD COLUMN ceiling_usd TEXT;

ALTER TABLE batches ADD COLUMN waiting_code TEXT;
ALTER TABLE batches ADD COLUMN waiting_message TEXT;
ALTER TABLE batches ADD COLUMN waiting_until INTEGER;

CREATE TABLE batch_providers (
  batch_id TEXT NOT NULL,
  provider TEXT NOT NULL,
  owner TEXT NOT NULL,
  succeeded INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  running INTEGER NOT NULL DEFAULT 0,
  cost_usd TEXT NOT NULL DEFAULT '0',
  PRIMARY KEY (batch_id, provider, owner)
);
