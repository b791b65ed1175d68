-- Whether a batch has lines marked for a batch lane (0020), written at admission: the live
-- dispatcher's filter and the lane engine look for a batch's lane lines only where there are some,
-- so an ordinary batch pays nothing while a batch lane is open. Open batches stored since 0020
-- are looked up along the lines' primary key. src/store/sqlite/migrations/0021_batch_lane_lines.sql
-- is the twin.
ALTER TABLE batches ADD COLUMN lane_lines boolean NOT NULL DEFAULT false;
UPDATE batches SET lane_lines = true
  WHERE status IN ('validating', 'in_progress')
    AND EXISTS (SELECT 1 FROM lines l WHERE l.batch_id = batches.id AND l.batch_lane IS NOT NULL);
