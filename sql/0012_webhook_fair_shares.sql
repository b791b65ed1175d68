-- Fair webhook shares (docs/webhooks-and-streams.md). New columns and an index only
-- (src/store/sqlite/migrations/0012_webhook_fair_shares.sql is the twin).

-- `last_claimed_at` (Unix ms): when a delivery of this webhook was last claimed; claims go to the
-- webhooks claimed longest ago first, so they go round-robin across webhooks.
-- `failing_since` (Unix ms): the first failed attempt since the last delivered one; null while
-- the last attempt was delivered (or none failed yet).
-- `disabled_at` (Unix s): set when a failure is recorded and every attempt since `failing_since`,
-- 24 h or more ago, has failed; a disabled webhook gets no new deliveries and none are claimed,
-- until POST /v1/webhooks/{id}/enable clears it (and `failing_since`).
ALTER TABLE webhooks ADD COLUMN last_claimed_at bigint;
ALTER TABLE webhooks ADD COLUMN failing_since bigint;
ALTER TABLE webhooks ADD COLUMN disabled_at bigint;

-- A claim counts each webhook's attempts in flight and takes its two earliest due deliveries.
CREATE INDEX webhook_deliveries_due_by_webhook ON webhook_deliveries (webhook_id, next_attempt_at)
  WHERE status = 'pending';
