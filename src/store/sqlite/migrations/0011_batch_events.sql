-- Events and retries (docs/events-and-webhooks.md): see sql/0011_batch_events.sql for what each column holds.
ALTER TABLE batches ADD COLUMN parent_batch_id TEXT;
ALTER TABLE batches ADD COLUMN retried_by TEXT;
ALTER TABLE batches ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
-- SQLite's triggers cannot change NEW: a second UPDATE bumps the version, only when what the
-- progress stream reports changed (recursive triggers are off, and the version itself is not in
-- the list, so it cannot loop).
CREATE TRIGGER batches_version AFTER UPDATE OF pending, running, succeeded, failed, cancelled,
  expired, cost_usd, status, waiting_code, waiting_message, waiting_until ON batches FOR EACH ROW
  WHEN NEW.pending IS NOT OLD.pending OR NEW.running IS NOT OLD.running
    OR NEW.succeeded IS NOT OLD.succeeded OR NEW.failed IS NOT OLD.failed
    OR NEW.cancelled IS NOT OLD.cancelled OR NEW.expired IS NOT OLD.expired
    OR NEW.cost_usd IS NOT OLD.cost_usd OR NEW.status IS NOT OLD.status
    OR NEW.waiting_code IS NOT OLD.waiting_code OR NEW.waiting_message IS NOT OLD.waiting_message
    OR NEW.waiting_until IS NOT OLD.waiting_until
BEGIN
  UPDATE batches SET version = OLD.version + 1 WHERE id = NEW.id;
END;
