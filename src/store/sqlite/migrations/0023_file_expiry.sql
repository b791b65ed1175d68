-- An uploaded file's own expiry (Unix seconds): see sql/0023_file_expiry.sql.
ALTER TABLE files ADD COLUMN expires_at INTEGER;
