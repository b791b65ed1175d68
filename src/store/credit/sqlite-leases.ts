/** Live credit leases as holds (sql/0004_live_credit.sql): what they hold of an account now. */
import { Money, ZERO } from '../../money/decimal.ts'
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'

/** What unexpired live leases hold of an account, on every instance. */
export function leasedUsd(db: SqliteConnection, accountId: string, nowMs: number): Money {
  let total = ZERO
  for (const row of q(
    db,
    'SELECT amount_usd FROM credit_leases WHERE account_id = ? AND expires_at_ms > ?',
  ).all(accountId, nowMs)) {
    total = total.plus(row.amount_usd)
  }
  return total
}
