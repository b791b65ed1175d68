/** The dispatch role's rows: runnable batches, claimed lines, a batch with its progress shards. */
import { moneyText, Money } from '../../money/decimal.ts'
import type { ClaimedLine, RunnableBatch } from './dispatch-store.ts'
import { PROGRESS_COUNTS, PROGRESS_MONEY } from './progress-shards.ts'

type Row = Record<string, unknown>

/**
 * A batch row with its progress shards added (docs/scale.md): the sums arrive beside the row as
 * `p_<column>` (null when it has none), `p_changes` adding to its version. Other rows pass as
 * they are.
 */
export function withProgress(row: Row): Row {
  if (row.p_changes === null || row.p_changes === undefined) return row
  const merged: Row = { ...row, version: Number(row.version ?? 0) + Number(row.p_changes) }
  delete merged.p_changes
  for (const column of PROGRESS_COUNTS) {
    merged[column] = Number(row[column] ?? 0) + Number(row[`p_${column}`] ?? 0)
    delete merged[`p_${column}`]
  }
  for (const column of PROGRESS_MONEY) {
    merged[column] = moneyText(
      new Money(String(row[column] ?? '0')).plus(String(row[`p_${column}`] ?? '0')),
    )
    delete merged[`p_${column}`]
  }
  // Added once: the result has no shard sums of its own.
  return merged
}

/** The terminal status a batch takes once no line is pending or running. */
export function terminalStatus(row: {
  cancel_requested_at: unknown
  expired: unknown
  succeeded: unknown
  cancelled: unknown
  line_count: unknown
}): 'cancelled' | 'expired' | 'failed' | 'completed' {
  if (row.cancel_requested_at !== null && row.cancel_requested_at !== undefined) return 'cancelled'
  if (Number(row.expired) > 0) return 'expired'
  // `failed` only when nothing could run: not one line succeeded. Lines cancelled in a batch no
  // one cancelled are its spend cap's, and a batch its cap stopped ends completed (docs/money-and-limits.md).
  if (Number(row.succeeded) === 0 && Number(row.cancelled) === 0 && Number(row.line_count) > 0)
    return 'failed'
  return 'completed'
}

export function rowToRunnable(row: Row): RunnableBatch {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    createdAt: Number(row.created_at),
    deadlineAt: Number(row.deadline_at),
    endpoint: row.endpoint as RunnableBatch['endpoint'],
    pending: Number(row.pending),
    running: Number(row.running),
    laneLines: Boolean(row.lane_lines),
  }
}

/**
 * A line a claim leased, from the line's row and its batch's (account_id, deadline_at; the same
 * row where the claim joined them). A line of a capped batch carries its ceiling_usd.
 */
export function rowToClaimedLine(batchId: string, row: Row, batch: Row): ClaimedLine {
  const line: ClaimedLine = {
    batchId,
    accountId: batch.account_id as string,
    lineNo: Number(row.line_no),
    customId: row.custom_id as string,
    input: row.input as string,
    attempts: Number(row.attempts),
    deadlineAt: Number(batch.deadline_at),
  }
  if (row.ceiling_usd !== null && row.ceiling_usd !== undefined)
    line.ceilingUsd = moneyText(row.ceiling_usd as string)
  if (row.batch_lane) line.batchLane = row.batch_lane as string
  return line
}
