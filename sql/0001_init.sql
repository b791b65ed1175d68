-- The shared store: the same tables and columns as the embedded one (src/store/sqlite/migrations/,
-- same numbers; test/store/schema-parity.test.ts), so src/store/rows.ts maps rows of both. Several gateway instances share these tables.
-- Money is `numeric` with no scale (exact, any precision); times are bigint: *_at in Unix
-- seconds, lease_until and not_before in Unix milliseconds; counters are int.
--
-- Ids compare bytewise (COLLATE "C"), as in SQLite: batch pages follow id order whatever the
-- database's locale, and key comparisons skip the locale's rules.
--
-- Lock order, kept by every transaction in src/store/postgres so two instances never deadlock:
-- batches (by id) → their lines (by line_no) → accounts (by id). Admission locks only its account.

CREATE TABLE accounts (
  id text COLLATE "C" PRIMARY KEY,
  name text NOT NULL,
  balance_usd numeric NOT NULL CHECK (balance_usd >= 0),
  held_usd numeric NOT NULL DEFAULT 0 CHECK (held_usd >= 0),
  max_open_batches int NOT NULL,
  rate_limit_per_minute int NOT NULL,
  created_at bigint NOT NULL
);

CREATE TABLE api_keys (
  id text COLLATE "C" PRIMARY KEY,
  account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
  hash text COLLATE "C" NOT NULL UNIQUE,
  prefix text NOT NULL,
  name text,
  -- comma-separated, as in SQLite: rows.ts splits it
  scopes text NOT NULL,
  rate_limit_per_minute int,
  created_at bigint NOT NULL,
  revoked_at bigint
);
CREATE INDEX api_keys_by_account ON api_keys (account_id);

CREATE TABLE batches (
  id text COLLATE "C" PRIMARY KEY,
  account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
  name text,
  endpoint text NOT NULL,
  status text NOT NULL CHECK (status IN ('validating', 'in_progress', 'finalizing', 'completed',
    'failed', 'cancelling', 'cancelled', 'expired')),
  completion_window_hours int NOT NULL,
  created_at bigint NOT NULL,
  deadline_at bigint NOT NULL,
  started_at bigint,
  finalizing_at bigint,
  finished_at bigint,
  cancel_requested_at bigint,
  line_count int NOT NULL,
  pending int NOT NULL CHECK (pending >= 0),
  running int NOT NULL DEFAULT 0 CHECK (running >= 0),
  succeeded int NOT NULL DEFAULT 0,
  failed int NOT NULL DEFAULT 0,
  cancelled int NOT NULL DEFAULT 0,
  expired int NOT NULL DEFAULT 0,
  cost_ceiling_usd numeric NOT NULL,
  cost_usd numeric NOT NULL DEFAULT 0,
  held_usd numeric NOT NULL CHECK (held_usd >= 0),
  source text NOT NULL,
  metadata jsonb,
  input_file_id text,
  errors jsonb,
  idempotency_key text COLLATE "C"
);
-- Listing newest first (ids are time-ordered) and counting an account's open batches.
CREATE INDEX batches_by_account ON batches (account_id, id);
CREATE UNIQUE INDEX batches_idempotency
  ON batches (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- The dispatcher's and the advancer's working set: open batches, earliest deadline first.
CREATE INDEX batches_open ON batches (status, deadline_at, id)
  WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- No foreign key to batches: it would cost a trigger call per row on a 50,000-line admission,
-- and lines are only ever written in the transaction that writes (or locks) their batch.
CREATE TABLE lines (
  batch_id text COLLATE "C" NOT NULL,
  line_no int NOT NULL,
  custom_id text NOT NULL,
  input text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'succeeded',
    'failed', 'cancelled', 'expired')),
  attempts int NOT NULL DEFAULT 0,
  lease_owner text COLLATE "C",
  lease_until bigint,
  not_before bigint NOT NULL DEFAULT 0,
  response_status int,
  response text,
  error_code text,
  error_message text,
  -- text, not jsonb: the upstream's error body is kept verbatim, like `response`
  error_upstream text,
  cost_usd numeric,
  provider text,
  latency_ms int,
  finished_at bigint,
  PRIMARY KEY (batch_id, line_no)
);
-- Claiming: the next pending lines of one batch in line order (FOR UPDATE SKIP LOCKED).
CREATE INDEX lines_pending ON lines (batch_id, line_no) WHERE status = 'pending';
-- Reaping expired leases.
CREATE INDEX lines_running ON lines (lease_until) WHERE status = 'running';
-- Renewing and releasing one instance's leases.
CREATE INDEX lines_leased ON lines (lease_owner) WHERE status = 'running';

-- Uploaded files (content in the blob store) and the output and error files rendered from a
-- batch's results on request (no content stored; visible once the batch has finished).
CREATE TABLE files (
  id text COLLATE "C" PRIMARY KEY,
  account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
  purpose text NOT NULL,
  filename text NOT NULL,
  bytes bigint,
  created_at bigint NOT NULL,
  last_used_at bigint NOT NULL,
  batch_id text COLLATE "C",
  kind text NOT NULL CHECK (kind IN ('upload', 'output', 'error'))
);
CREATE INDEX files_by_account ON files (account_id, id);
