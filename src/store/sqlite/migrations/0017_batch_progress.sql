-- A batch's progress off its row: see sql/0017_batch_progress.sql for what each column holds.
-- Money is canonical decimal TEXT, summed with decimal.js when read.
CREATE TABLE batch_progress (
  batch_id TEXT NOT NULL,
  shard TEXT NOT NULL,
  pending INTEGER NOT NULL DEFAULT 0,
  running INTEGER NOT NULL DEFAULT 0,
  succeeded INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  cost_usd TEXT NOT NULL DEFAULT '0',
  held_usd TEXT NOT NULL DEFAULT '0',
  reserved_usd TEXT NOT NULL DEFAULT '0',
  usage_input_tokens INTEGER NOT NULL DEFAULT 0,
  usage_cached_input_tokens INTEGER NOT NULL DEFAULT 0,
  usage_cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  usage_output_tokens INTEGER NOT NULL DEFAULT 0,
  usage_uncached_cost_usd TEXT NOT NULL DEFAULT '0',
  changes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, shard)
) WITHOUT ROWID;

-- The fold at the end sets the version to the row's plus the shards' changes: the bump keeps it.
DROP TRIGGER batches_version;
CREATE TRIGGER batches_version AFTER UPDATE OF pending, running, succeeded, failed, cancelled,
  expired, cost_usd, status, waiting_code, waiting_message, waiting_until ON batches FOR EACH ROW
  WHEN NEW.pending IS NOT OLD.pending OR NEW.running IS NOT OLD.running
    OR NEW.succeeded IS NOT OLD.succeeded OR NEW.failed IS NOT OLD.failed
    OR NEW.cancelled IS NOT OLD.cancelled OR NEW.expired IS NOT OLD.expired
    OR NEW.cost_usd IS NOT OLD.cost_usd OR NEW.status IS NOT OLD.status
    OR NEW.waiting_code IS NOT OLD.waiting_code OR NEW.waiting_message IS NOT OLD.waiting_message
    OR NEW.waiting_until IS NOT OLD.waiting_until
BEGIN
  UPDATE batches SET version = max(NEW.version, OLD.version) + 1 WHERE id = NEW.id;
END;
