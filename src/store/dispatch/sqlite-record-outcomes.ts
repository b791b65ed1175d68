/**
 * Recording outcomes on the embedded store: each line the owner still leases ends (or goes back
 * to pending for a retry), billed in the same IMMEDIATE transaction through the Ledger
 * (sqlite-ledger.ts), and counted for its provider (sqlite-provider-shares.ts).
 */
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'
import type { OutcomesRecord, RecordedOutcomes } from './dispatch-store.ts'
import { Ledger } from './sqlite-ledger.ts'
import { ShareTally } from './sqlite-provider-shares.ts'

const immediate = <T>(db: Database, fn: () => T): T => db.transaction(fn).immediate()

export async function recordOutcomes(
  db: Database,
  { owner, outcomes, nowMs, calls = [] }: OutcomesRecord,
): Promise<RecordedOutcomes> {
  if (outcomes.length === 0 && calls.length === 0) return { recorded: 0, charged: [] }
  const now = Math.floor(nowMs / 1000)
  // One statement per line, its lease check in the WHERE clause; money and counters are summed
  // in memory and written once per batch and account at the end of the transaction.
  // No RETURNING: it makes SQLite keep a statement journal, which past 64 KiB (four of our
  // 16 KiB pages) goes to a temp file, for every line; that doubled this call's time (7 µs a
  // line more on the dispatch thread). A capped batch's ceilings are read apart
  // (Ledger.unreserve).
  const retry = q(
    db,
    `UPDATE lines SET status = 'pending', lease_owner = NULL, lease_until = NULL, not_before = ?,
       attempts = attempts - ?
     WHERE batch_id = ? AND line_no = ? AND status = 'running' AND lease_owner = ?`,
  )
  const succeed = q(
    db,
    `UPDATE lines SET status = 'succeeded', lease_owner = NULL, lease_until = NULL,
       response_status = ?, response = ?, cost_usd = ?, provider = ?, latency_ms = ?, finished_at = ?
     WHERE batch_id = ? AND line_no = ? AND status = 'running' AND lease_owner = ?`,
  )
  const fail = q(
    db,
    `UPDATE lines SET status = 'failed', lease_owner = NULL, lease_until = NULL,
       response_status = ?, error_code = ?, error_message = ?, error_upstream = ?,
       cost_usd = ?, provider = ?, latency_ms = ?, finished_at = ?
     WHERE batch_id = ? AND line_no = ? AND status = 'running' AND lease_owner = ?`,
  )
  return immediate(db, () => {
    const ledger = new Ledger(db, owner)
    const shares = new ShareTally(db, owner)
    for (const change of calls) shares.add(change, 'running', change.delta)
    let recorded = 0
    const charged: (string | null)[] = []
    for (const outcome of outcomes) {
      const key = [outcome.batchId, outcome.lineNo, owner] as const
      charged.push(null)
      if (outcome.kind === 'retry') {
        const changed = retry.run(outcome.notBefore, outcome.unsent ? 1 : 0, ...key).changes
        if (changed === 0) continue // lease lost
        ledger.unreserve(outcome.batchId, outcome.lineNo)
        ledger.count(outcome.batchId, 'retry')
        charged[charged.length - 1] = '0'
        recorded++
        continue
      }
      // The charge is worked out first (it is what the line records), and only kept if the
      // line was still ours.
      const charge = ledger.charge(
        outcome.batchId,
        outcome.costUsd,
        outcome.kind === 'succeeded' ? outcome.ceilingUsd : undefined,
      )
      const changed =
        outcome.kind === 'succeeded'
          ? succeed.run(
              outcome.responseStatus,
              outcome.response,
              charge.text,
              outcome.provider,
              outcome.latencyMs,
              now,
              ...key,
            ).changes
          : fail.run(
              outcome.responseStatus,
              outcome.error.code,
              outcome.error.message,
              outcome.error.upstream === undefined ? null : JSON.stringify(outcome.error.upstream),
              charge.text,
              outcome.provider,
              outcome.latencyMs,
              now,
              ...key,
            ).changes
      if (changed === 0) {
        charge.undo() // lease lost: another instance owns this line now, and it bills it
        continue
      }
      ledger.unreserve(outcome.batchId, outcome.lineNo)
      ledger.count(outcome.batchId, outcome.kind)
      if (outcome.kind === 'succeeded' || outcome.kind === 'failed')
        ledger.addUsage(outcome.batchId, outcome.usage)
      if (outcome.provider !== null)
        shares.add(
          { batchId: outcome.batchId, provider: outcome.provider },
          outcome.kind,
          1,
          charge.text,
        )
      charged[charged.length - 1] = charge.text
      recorded++
    }
    ledger.write()
    shares.write()
    return { recorded, charged }
  })
}
