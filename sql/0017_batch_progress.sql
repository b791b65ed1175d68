-- A batch's progress off its row (docs/scale.md). src/store/sqlite/migrations/0017_batch_progress.sql
-- is the twin.
--
-- Claiming and settling lines does not update the batch's row: each writes what it moved into a
-- row of its own shard (a dispatcher instance's claims, its settlements), in the transaction that
-- moves the lines, so instances never wait for each other there. A batch's counters are its row
-- plus the sum of its shards; when it ends, the shards are folded into the row and deleted, so an
-- ended batch is its row alone. Every column is a change from the row's value (pending and
-- held_usd go down, reserved_usd up and down); `changes` counts the writes, and the batch's
-- progress version (0011) is its row's plus that count, so it still grows with every change.
CREATE TABLE batch_progress (
  batch_id text COLLATE "C" NOT NULL,
  shard text COLLATE "C" NOT NULL,
  pending int NOT NULL DEFAULT 0,
  running int NOT NULL DEFAULT 0,
  succeeded int NOT NULL DEFAULT 0,
  failed int NOT NULL DEFAULT 0,
  cost_usd numeric NOT NULL DEFAULT 0,
  held_usd numeric NOT NULL DEFAULT 0,
  reserved_usd numeric NOT NULL DEFAULT 0,
  usage_input_tokens bigint NOT NULL DEFAULT 0,
  usage_cached_input_tokens bigint NOT NULL DEFAULT 0,
  usage_cache_write_tokens bigint NOT NULL DEFAULT 0,
  usage_output_tokens bigint NOT NULL DEFAULT 0,
  usage_uncached_cost_usd numeric NOT NULL DEFAULT 0,
  changes bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, shard)
);

-- The fold sets the version to the row's plus the shards' changes: the trigger keeps a version
-- given that way, then adds one as before.
CREATE OR REPLACE FUNCTION batches_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.pending, NEW.running, NEW.succeeded, NEW.failed, NEW.cancelled, NEW.expired,
      NEW.cost_usd, NEW.status, NEW.waiting_code, NEW.waiting_message, NEW.waiting_until)
     IS DISTINCT FROM
     (OLD.pending, OLD.running, OLD.succeeded, OLD.failed, OLD.cancelled, OLD.expired,
      OLD.cost_usd, OLD.status, OLD.waiting_code, OLD.waiting_message, OLD.waiting_until) THEN
    NEW.version := GREATEST(NEW.version, OLD.version) + 1;
  END IF;
  RETURN NEW;
END
$$;
