-- An uploaded file's own expiry (Unix seconds), set by the OpenAI files.create `expires_after`
-- ({"anchor": "created_at", "seconds": N}): the file is gone for its account from then on, and
-- the janitor deletes it. Null: kept as uploads are (docs/operations.md, retention).
-- src/store/sqlite/migrations/0023_file_expiry.sql is the twin.
ALTER TABLE files ADD COLUMN expires_at bigint;
