-- Spend caps and why a batch waits (docs/money-and-limits.md, docs/routing.md). src/store/sqlite/migrations/ has the twin.
--
-- batches.max_cost_usd: the batch's cap, null for none. reserved_usd: the ceilings of its lines
-- in flight (claimed and not yet recorded or handed back), kept only while it has a cap; a line
-- is claimed only while cost_usd + reserved_usd + its ceiling <= max_cost_usd, checked under the
-- batch row's lock. lines.ceiling_usd: a line's own ceiling, stored only for a capped batch.
ALTER TABLE batches ADD COLUMN max_cost_usd numeric CHECK (max_cost_usd > 0);
ALTER TABLE batches ADD COLUMN reserved_usd numeric NOT NULL DEFAULT 0 CHECK (reserved_usd >= 0);
ALTER TABLE lines ADD COLUMN ceiling_usd numeric;

-- Why the batch is not moving, null while its lines progress: a code of docs/routing.md, a message
-- saying what (if anything) to do, and when the wait is known to end (Unix seconds, or null).
-- Stored with the batch so every instance serves what the one that saw it wrote.
ALTER TABLE batches ADD COLUMN waiting_code text;
ALTER TABLE batches ADD COLUMN waiting_message text;
ALTER TABLE batches ADD COLUMN waiting_until bigint;

-- Where a batch's lines went (routing.providers): per provider, the lines that ended there, what
-- they cost, and the calls one dispatcher instance (`owner`) has in flight to it now. Written
-- with the outcomes, a row per batch, provider and instance, summed when read; an instance's
-- `running` is zeroed when its leases are reaped or released (it died or stopped).
CREATE TABLE batch_providers (
  batch_id text COLLATE "C" NOT NULL,
  provider text NOT NULL,
  owner text COLLATE "C" NOT NULL,
  succeeded int NOT NULL DEFAULT 0,
  failed int NOT NULL DEFAULT 0,
  running int NOT NULL DEFAULT 0,
  cost_usd numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, provider, owner)
);
