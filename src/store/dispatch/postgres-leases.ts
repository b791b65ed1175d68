/**
 * Leases on PostgreSQL: renewed by their owner, given back untouched by an owner that stops, and
 * reaped back to pending once they ran out (postgres-return-to-pending.ts).
 */
import type postgres from 'postgres'
import type { LineKey } from './dispatch-store.ts'
import { returnToPending } from './postgres-return-to-pending.ts'

// Stored deadlines round up, so no lease runs out sooner than asked.
const later = Math.ceil

export async function renewLeases(sql: postgres.Sql, owner: string, leaseUntilMs: number) {
  // Rows are locked in key order, as recordOutcomes locks them, so the two cannot deadlock. A
  // line locked meanwhile is being recorded (it is about to end) or reaped, and needs no
  // renewal: it is skipped rather than waited for, as the heartbeat otherwise queued behind
  // every settlement in flight (sampled lock waits with three instances, docs/scale.md).
  const result = await sql`
    WITH leased AS (
      SELECT batch_id, line_no FROM lines WHERE lease_owner = ${owner} AND status = 'running'
      ORDER BY batch_id, line_no FOR UPDATE SKIP LOCKED)
    UPDATE lines l SET lease_until = ${later(leaseUntilMs)}
    FROM leased WHERE l.batch_id = leased.batch_id AND l.line_no = leased.line_no`
  return result.count
}

export async function releaseLeases(
  sql: postgres.Sql,
  owner: string,
  unsent: readonly LineKey[] = [],
) {
  return sql.begin(async (tx) => {
    // Still this owner's and never sent: the claim's attempt was not used (as a retry unsent).
    // Its own leased lines only, which nothing else writes while it holds them.
    if (unsent.length > 0)
      await tx`
        UPDATE lines l SET attempts = l.attempts - 1
        FROM unnest(${unsent.map((line) => line.batchId)}::text[],
                    ${unsent.map((line) => line.lineNo)}::int[]) AS u (batch_id, line_no)
        WHERE l.batch_id = u.batch_id AND l.line_no = u.line_no
          AND l.status = 'running' AND l.lease_owner = ${owner} AND l.attempts > 0`
    return returnToPending(tx, tx`lease_owner = ${owner}`)
  })
}

export async function reapExpiredLeases(sql: postgres.Sql, nowMs: number) {
  return sql.begin((tx) => returnToPending(tx, tx`lease_until < ${later(nowMs)}`))
}
