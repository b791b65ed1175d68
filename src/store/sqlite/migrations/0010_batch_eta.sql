-- The planner's projected finish of a batch: see sql/0010_batch_eta.sql.
ALTER TABLE batches ADD COLUMN eta INTEGER;
