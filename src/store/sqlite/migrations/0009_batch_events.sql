-- Events and retries (SPEC §15): see sql/0009_batch_events.sql for what each column holds.
ALTER TABLE batches ADD COLUMN parent_batch_id TEXT;
ALTER TABLE batches ADD COLUMN retried_by TEXT;
ALTER TABLE batches ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
-- SQLite's triggers cannot change NEW: a second UPDATE bumps the version (recursive triggers are
-- off, and the WHEN clause would stop a loop anyway).
CREATE TRIGGER batches_version AFTER UPDATE ON batches FOR EACH ROW
  WHEN NEW.version = OLD.version
BEGIN
  UPDATE batches SET version = OLD.version + 1 WHERE id = NEW.id;
END;
