-- Batch lanes (docs/batch-lanes.md): the catalog model a chunk's lines name, whose batch offering
-- prices them (two models may list one provider's upstream model, each at its own price), and
-- its batch's account, which the usage report counts the lines for.
-- src/store/sqlite/migrations/0019_chunk_model.sql is the twin. Null in chunks made before.
ALTER TABLE batch_chunks ADD COLUMN model text;
ALTER TABLE batch_chunks ADD COLUMN account_id text;
