-- Whether a batch has lines marked for a batch lane: see sql/0021_batch_lane_lines.sql.
ALTER TABLE batches ADD COLUMN lane_lines INTEGER NOT NULL DEFAULT 0;
UPDATE batches SET lane_lines = 1
  WHERE status IN ('validating', 'in_progress')
    AND EXISTS (SELECT 1 FROM lines l WHERE l.batch_id = batches.id AND l.batch_lane IS NOT NULL);
