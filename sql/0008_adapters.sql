-- Fine-tuned adapters (LoRA) of an account (docs/open-models.md). New table only
-- (src/store/sqlite/migrations/0008_adapters.sql is the twin).

-- One registered adapter. `id` is its `ft:` model id (base model, account tag, name), so the same
-- name registered twice for one base model is refused by the key. Deactivating sets `status` to
-- 'inactive' and keeps the row: lines already admitted still name it.
CREATE TABLE adapters (
  id text COLLATE "C" PRIMARY KEY,
  account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
  base_model text NOT NULL,
  name text NOT NULL,
  rank int NOT NULL CHECK (rank > 0),
  size_mib int NOT NULL CHECK (size_mib > 0),
  source text NOT NULL,
  status text NOT NULL CHECK (status IN ('active', 'inactive')),
  created_at bigint NOT NULL,
  deactivated_at bigint
);
CREATE INDEX adapters_by_account ON adapters (account_id, created_at);
