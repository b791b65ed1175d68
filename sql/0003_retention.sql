-- Retention: a batch whose lines (inputs and results) were deleted keeps its row, marked here.
ALTER TABLE batches ADD COLUMN purged_at bigint;
CREATE INDEX batches_finished ON batches (finished_at) WHERE purged_at IS NULL AND finished_at IS NOT NULL;
CREATE INDEX files_uploads_by_use ON files (last_used_at) WHERE kind = 'upload';
