/** Live credit leases as holds (sql/0004_live_credit.sql): what they hold of an account now. */
import type { Database } from 'bun:sqlite'
import { Money, ZERO } from '../../money/decimal.ts'

type Row = Record<string, any>
const q = (db: Database, sql: string) => db.query<Row, any[]>(sql)

/** What unexpired live leases hold of an account, on every instance. */
export function leasedUsd(db: Database, accountId: string, nowMs: number): Money {
  let total = ZERO
  for (const row of q(
    db,
    'SELECT amount_usd FROM credit_leases WHERE account_id = ? AND expires_at_ms > ?',
  ).all(accountId, nowMs)) {
    total = total.plus(row.amount_usd)
  }
  return total
}
