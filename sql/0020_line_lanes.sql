-- Batch lanes (docs/batch-lanes.md) per line, not per batch: the catalog model of a line that goes
-- to a batch lane (its own planner order puts one first; null for every other line), so the lane
-- engine claims a mixed batch's lane lines wherever they stand and the live lanes leave them to
-- it. The partial index holds only pending lane lines: a batch without any costs it nothing.
-- src/store/sqlite/migrations/0020_line_lanes.sql is the twin.
ALTER TABLE lines ADD COLUMN lane_model text;
-- The open batches' lines stored before are marked with the model they name: the engine looks at
-- each line of a model with an open lane on its own and unmarks those it does not take, and a
-- line of any other model is never looked for, so they run as lines stored after do.
UPDATE lines SET lane_model = (input::json) -> 'body' ->> 'model'
WHERE status IN ('pending', 'running')
  AND batch_id IN (SELECT id FROM batches WHERE status IN ('validating', 'in_progress'));
CREATE INDEX lines_lane_pending ON lines (batch_id, lane_model, line_no)
  WHERE status = 'pending' AND lane_model IS NOT NULL;
