-- Batch lanes (docs/batch-lanes.md): a chunk is a group of a batch's lines sent as one provider batch.
-- src/store/sqlite/migrations/0016_batch_chunks.sql is the twin.
--
-- The intent is written before the upload (state 'intent'), so an instance that dies between
-- its upload and its create leaves a row another instance resumes from: with the provider
-- batch id once known, or by looking for the chunk id in the provider's list (OpenAI's
-- metadata.mg_chunk). One instance at a time follows a chunk: lease_owner / lease_until (ms),
-- taken only when free or run out; next_poll_at (ms) is when it is next looked at.
-- States: intent → submitted → (cancelling →) ended; abandoned when it never got upstream.
CREATE TABLE batch_chunks (
  id text COLLATE "C" PRIMARY KEY,
  batch_id text COLLATE "C" NOT NULL,
  offering text NOT NULL,
  provider text NOT NULL,
  upstream_model text NOT NULL,
  endpoint text NOT NULL,
  state text NOT NULL DEFAULT 'intent',
  input_file_id text,
  provider_batch_id text,
  line_count integer NOT NULL,
  -- deadline_at − fallback_hours of its batch (ms): not ended by then, it is cancelled upstream.
  fallback_at bigint NOT NULL,
  lease_owner text,
  lease_until bigint,
  next_poll_at bigint NOT NULL,
  poll_failures integer NOT NULL DEFAULT 0,
  error text,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);
CREATE INDEX batch_chunks_due ON batch_chunks (next_poll_at) WHERE state NOT IN ('ended', 'abandoned');
CREATE INDEX batch_chunks_batch ON batch_chunks (batch_id);

-- The lines of a chunk: its position n is the line's upstream id, mg-<n>, never the custom_id.
CREATE TABLE batch_chunk_lines (
  chunk_id text COLLATE "C" NOT NULL,
  position integer NOT NULL,
  line_no integer NOT NULL,
  -- The line's attempts with this chunk's, for the retry rules of an errored line.
  attempts integer NOT NULL DEFAULT 1,
  PRIMARY KEY (chunk_id, position)
);
