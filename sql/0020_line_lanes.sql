-- Batch lanes (docs/batch-lanes.md) per line, not per batch: the batch lane a line goes to while it
-- is open (its model and the lane's provider, for a line whose own planner order puts a batch lane
-- first; null for every other line), so the lane engine claims a mixed batch's lane lines wherever
-- they stand and the live lanes leave them to it. The partial index holds only pending marked
-- lines: a batch without any costs it nothing. Lines stored before have no mark and run live.
-- src/store/sqlite/migrations/0020_line_lanes.sql is the twin.
ALTER TABLE lines ADD COLUMN batch_lane text;
CREATE INDEX lines_lane_pending ON lines (batch_id, batch_lane, line_no)
  WHERE status = 'pending' AND batch_lane IS NOT NULL;
