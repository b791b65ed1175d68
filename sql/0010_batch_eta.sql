-- The planner's projected finish of a batch (docs/routing.md routing.eta), Unix seconds; null before it
-- can tell. Written by the dispatcher as the batch runs (src/store/sqlite/migrations/0010_batch_eta.sql
-- is the twin).
ALTER TABLE batches ADD COLUMN eta bigint;
