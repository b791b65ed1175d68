-- A line's batch-lane model, the open batches' lines stored before marked with the model they
-- name, and the index of pending lane lines: see sql/0020_line_lanes.sql.
ALTER TABLE lines ADD COLUMN lane_model TEXT;
UPDATE lines SET lane_model = json_extract(input, '$.body.model')
WHERE status IN ('pending', 'running')
  AND batch_id IN (SELECT id FROM batches WHERE status IN ('validating', 'in_progress'));
CREATE INDEX IF NOT EXISTS lines_lane_pending ON lines (batch_id, lane_model, line_no)
  WHERE status = 'pending' AND lane_model IS NOT NULL;
