-- Retention: a batch whose lines (inputs and results) were deleted keeps its row, marked here.
-- Only this column: a data dir made before migrations were recorded, and opened by a release that
-- had it, has it already, and then this file is not applied (see ../migrate.ts).
ALTER TABLE batches ADD COLUMN purged_at INTEGER;
