-- Events and retries (docs/events-and-webhooks.md). src/store/sqlite/migrations/0011_batch_events.sql is the twin.

-- A retry's child names the batch whose unsuccessful lines it runs again; the parent lists its
-- children (a JSON array of ids, in the order they were made; null until the first), written in
-- the transaction that admits the child, so reading a batch never needs a join.
ALTER TABLE batches ADD COLUMN parent_batch_id text COLLATE "C";
ALTER TABLE batches ADD COLUMN retried_by jsonb;

-- The batch's progress version: one more on every change of what the progress stream reports
-- (counts, cost, status, waiting), whoever makes it (admission, dispatch, maintenance, cancel,
-- a deposit), and on nothing else (the planner rewrites eta every pass). It is the stream's
-- event id: it only grows, so a stream resumed with Last-Event-ID sends a state only when the
-- batch has moved past the one the client saw, and never an older one. A field the stream
-- reports from now on is added to the list below.
ALTER TABLE batches ADD COLUMN version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION batches_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.pending, NEW.running, NEW.succeeded, NEW.failed, NEW.cancelled, NEW.expired,
      NEW.cost_usd, NEW.status, NEW.waiting_code, NEW.waiting_message, NEW.waiting_until)
     IS DISTINCT FROM
     (OLD.pending, OLD.running, OLD.succeeded, OLD.failed, OLD.cancelled, OLD.expired,
      OLD.cost_usd, OLD.status, OLD.waiting_code, OLD.waiting_message, OLD.waiting_until) THEN
    NEW.version := OLD.version + 1;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER batches_version BEFORE UPDATE ON batches
  FOR EACH ROW EXECUTE FUNCTION batches_next_version();
