-- Signed webhooks (docs/events-and-webhooks.md): an account's endpoints and the outbox of their deliveries. New
-- tables only (src/store/sqlite/migrations/0007_webhooks.sql is the twin).

-- `secret` (whsec_ + base64 of 32 random bytes) signs every delivery, so it is kept as it is:
-- the gateway has no operator key to encrypt it with. It is shown once, in the create's answer.
-- `events`: a JSON array of the event types asked for.
CREATE TABLE webhooks (
  id text COLLATE "C" PRIMARY KEY,
  account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
  url text NOT NULL,
  events jsonb NOT NULL,
  secret text NOT NULL,
  created_at bigint NOT NULL
);
CREATE INDEX webhooks_by_account ON webhooks (account_id, id);

-- One event for one webhook, written in the transaction that gave the batch its terminal status.
-- `next_attempt_at` (Unix ms) is when a pending delivery is due; an instance claims one by moving
-- it to the end of its lease and naming itself `lease_owner`, and only that owner records the
-- attempt, so one instance sends each attempt and a dead instance's claim runs out. No foreign
-- key to webhooks: deleting a webhook deletes its deliveries itself, and must not fail a batch's
-- finishing transaction that races with it (a row left so has no webhook and is never claimed).
-- Rows go with their batch's results at retention (by batch_id).
CREATE TABLE webhook_deliveries (
  webhook_id text COLLATE "C" NOT NULL,
  event_id text COLLATE "C" NOT NULL,
  event_type text NOT NULL,
  batch_id text COLLATE "C" NOT NULL,
  created_at bigint NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts int NOT NULL DEFAULT 0,
  next_attempt_at bigint,
  lease_owner text,
  last_attempt_at bigint,
  last_status_code int,
  last_error text,
  delivered_at bigint,
  PRIMARY KEY (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_batch ON webhook_deliveries (batch_id);
