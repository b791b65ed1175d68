-- Whether a batch has lines marked for a batch lane, true unless admission says otherwise: see
-- sql/0021_batch_lane_lines.sql.
ALTER TABLE batches ADD COLUMN lane_lines INTEGER NOT NULL DEFAULT 1;
