/**
 * Leases on PostgreSQL: renewed by their owner, given back untouched by an owner that stops, and
 * reaped back to pending once they ran out (postgres-return-to-pending.ts).
 */
import type postgres from 'postgres'
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

export async function releaseLeases(sql: postgres.Sql, owner: string) {
  return sql.begin((tx) => returnToPending(tx, tx`lease_owner = ${owner}`))
}

export async function reapExpiredLeases(sql: postgres.Sql, nowMs: number) {
  return sql.begin((tx) => returnToPending(tx, tx`lease_until < ${later(nowMs)}`))
}
