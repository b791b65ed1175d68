-- Events and retries (SPEC §15). src/store/sqlite/migrations/0009_batch_events.sql is the twin.

-- A retry's child names the batch whose unsuccessful lines it runs again; the parent lists its
-- children (a JSON array of ids, in the order they were made; null until the first), written in
-- the transaction that admits the child, so reading a batch never needs a join.
ALTER TABLE batches ADD COLUMN parent_batch_id text COLLATE "C";
ALTER TABLE batches ADD COLUMN retried_by jsonb;

-- A per-batch version, one more on every change of the row, whoever makes it (admission,
-- dispatch, maintenance, cancel, retention): the progress stream's event id. It only grows, so
-- a stream resumed with Last-Event-ID sends a state only when the row has moved past the one
-- the client saw, and never an older one.
ALTER TABLE batches ADD COLUMN version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION batches_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.version := OLD.version + 1;
  RETURN NEW;
END
$$;
CREATE TRIGGER batches_version BEFORE UPDATE ON batches
  FOR EACH ROW EXECUTE FUNCTION batches_next_version();
