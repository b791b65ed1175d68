-- Fair webhook shares (docs/webhooks-and-streams.md): see sql/0012_webhook_fair_shares.sql for what each column holds.
ALTER TABLE webhooks ADD COLUMN last_claimed_at INTEGER;
ALTER TABLE webhooks ADD COLUMN failing_since INTEGER;
ALTER TABLE webhooks ADD COLUMN disabled_at INTEGER;
CREATE INDEX IF NOT EXISTS webhook_deliveries_due_by_webhook
  ON webhook_deliveries (webhook_id, next_attempt_at) WHERE status = 'pending';
