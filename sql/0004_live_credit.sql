-- Live calls are held before they are sent (docs/live.md). An instance serves reservations from a
-- block of an account's credit that it leases here: a hold like a batch's, counted against the
-- account's available credit until `expires_at_ms` (Unix ms), renewed while the instance is
-- alive and in use. An expired lease counts for nothing and may be deleted by any instance, so a
-- killed instance's block comes back by itself. Lock order: the account row first, then these.
CREATE TABLE credit_leases (
  account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
  instance_id text COLLATE "C" NOT NULL,
  amount_usd numeric NOT NULL CHECK (amount_usd >= 0),
  expires_at_ms bigint NOT NULL,
  PRIMARY KEY (account_id, instance_id)
);
CREATE INDEX credit_leases_by_instance ON credit_leases (instance_id);

-- Live charges are written in groups; a group's id is stored in the transaction that debits the
-- balance, so a write retried after a lost answer never charges twice. Kept for a day.
CREATE TABLE live_charge_groups (
  id text COLLATE "C" PRIMARY KEY,
  instance_id text COLLATE "C" NOT NULL,
  charged_usd numeric NOT NULL,
  written_at_ms bigint NOT NULL
);
CREATE INDEX live_charge_groups_by_time ON live_charge_groups (written_at_ms);
