-- Content of uploaded files, in 1 MiB chunks, so every instance can read every upload.
CREATE TABLE file_chunks (
  file_id text NOT NULL,
  seq int NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (file_id, seq)
);
