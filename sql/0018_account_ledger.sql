-- An account's settled money off its row (docs/scale.md). src/store/sqlite/migrations/0018_account_ledger.sql
-- is the twin (SQLite has one writer and does not use it).
--
-- A settled line's charge that its batch's hold covers lowers the account's balance and its held
-- credit by the same amount, so what the account may still spend (balance − held) does not move.
-- That part goes to a row of the settling owner's shard, never to the account's row: settlements
-- of one account from different instances take only a shared lock (FOR KEY SHARE) on the row
-- and do not wait for each other. The account's balance and held credit are its row's minus the
-- sum of its shards' drawn_usd; readers that use only balance − held read the row alone. Work
-- that lowers the balance otherwise (a negative deposit, live charges, a charge past a line's
-- ceiling) locks the row FOR UPDATE, which waits for those settlements and they for it; ending a
-- batch folds the account's shards into its row.
CREATE TABLE account_ledger (
  account_id text COLLATE "C" NOT NULL,
  owner text COLLATE "C" NOT NULL,
  drawn_usd numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, owner)
);
