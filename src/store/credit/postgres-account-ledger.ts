/**
 * An account's settled money off its row (sql/0018_account_ledger.sql): the part of a line's
 * charge that its batch's hold covers lowers balance and held credit alike, and goes to the
 * settling owner's row of `account_ledger` instead of the account's. The account's balance and
 * held credit are its row's minus its shards' drawn_usd; balance − held is its row's alone.
 *
 * Locks: settlements take the account row FOR KEY SHARE (they do not wait for each other);
 * whatever lowers the balance otherwise takes it FOR UPDATE, so the shards do not move under it;
 * whatever only compares balance − held with what it holds (admission, credit waits, live
 * reservations) takes it FOR NO KEY UPDATE, which settlements do not wait for.
 */
import type postgres from 'postgres'

type Db = postgres.ISql

/** What account `a`'s shards have drawn, in SQL (0 without any). */
export const drawn = (db: Db, alias = 'a') =>
  db`(SELECT coalesce(sum(al.drawn_usd), 0) FROM account_ledger al WHERE al.account_id = ${db(alias)}.id)`

/**
 * Folds these accounts' shards into their rows, which the caller has locked FOR UPDATE (no
 * settlement writes a shard of them until it commits).
 */
export async function foldLedger(tx: postgres.TransactionSql, accountIds: readonly string[]) {
  if (accountIds.length === 0) return
  await tx`
    WITH gone AS (
      DELETE FROM account_ledger WHERE account_id = ANY(${[...accountIds]}::text[])
      RETURNING account_id, drawn_usd),
    folded AS (SELECT account_id, sum(drawn_usd) AS drawn FROM gone GROUP BY account_id)
    UPDATE accounts a SET balance_usd = a.balance_usd - f.drawn, held_usd = a.held_usd - f.drawn
    FROM folded f WHERE a.id = f.account_id`
}
