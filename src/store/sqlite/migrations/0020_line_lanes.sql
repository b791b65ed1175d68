-- The batch lane a line is marked for, and the index of pending marked lines: see
-- sql/0020_line_lanes.sql.
ALTER TABLE lines ADD COLUMN batch_lane TEXT;
CREATE INDEX IF NOT EXISTS lines_lane_pending ON lines (batch_id, batch_lane, line_no)
  WHERE status = 'pending' AND batch_lane IS NOT NULL;
