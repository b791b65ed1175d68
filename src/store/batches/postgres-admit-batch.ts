/**
 * Admission on PostgreSQL: in one transaction, the account's row locked first (`FOR UPDATE`), so
 * the open-batch limit and the credit hold hold across instances: the idempotency check, the
 * limits, the credit hold (or the wait for credit), the batch and all its lines (COPY,
 * postgres-copy-lines.ts). Either everything is stored or nothing is.
 */
import type postgres from 'postgres'
import { OPEN_BATCH_STATUSES } from '../../domain.ts'
import { batchHold, Money, moneyText, ZERO } from '../../money/decimal.ts'
import { creditWaitColumns } from '../credit/daily-spend.ts'
import { progressJoin } from '../dispatch/postgres-batch-progress.ts'
import { storableJson } from '../postgres/storable.ts'
import { rowToBatch } from './batch-rows.ts'
import type { AdmitResult, NewBatch } from './batch-store.ts'
import { copyLines } from './postgres-copy-lines.ts'
import * as creditWaits from './postgres-credit-waits.ts'

const OPEN_STATUSES = [...OPEN_BATCH_STATUSES]

export async function admitBatch(
  sql: postgres.Sql,
  batch: NewBatch,
  collectGarbage?: () => void,
): Promise<AdmitResult> {
  const ceiling = moneyText(batch.costCeilingUsd)
  const hold = batchHold(ceiling, batch.maxCostUsd)
  const cap = batch.maxCostUsd ? moneyText(batch.maxCostUsd) : null
  return sql.begin(async (tx): Promise<AdmitResult> => {
    // The account lock comes first: the checks below then see every batch another instance
    // admitted before us, and no other admission for this account runs until we commit.
    const [account] =
      await tx`SELECT * FROM accounts WHERE id = ${batch.accountId} FOR NO KEY UPDATE`
    if (!account) throw new Error(`account ${batch.accountId} vanished during admission`)
    if (batch.idempotencyKey) {
      const [existing] = await tx`
        SELECT b.*, p.* FROM batches b ${progressJoin(tx)}
        WHERE account_id = ${batch.accountId} AND idempotency_key = ${batch.idempotencyKey}`
      if (existing) return { kind: 'duplicate', batch: rowToBatch(existing) }
    }
    const [open] = await tx`
      SELECT count(*) AS n FROM batches
      WHERE account_id = ${batch.accountId} AND status = ANY(${OPEN_STATUSES}::text[])`
    const inUse = Number(open!.n)
    const limit = Number(account.max_open_batches)
    if (inUse >= limit) return { kind: 'limit_exceeded', limit, inUse }
    // Live leases of every instance count as held; expired ones count for nothing.
    const [leased] = await tx`
      SELECT coalesce(sum(amount_usd), 0) AS total FROM credit_leases
      WHERE account_id = ${batch.accountId} AND expires_at_ms > ${Date.now()}`
    // The daily limit before the credit: a deposit does not raise it, so no wait helps.
    if (account.daily_spend_limit_usd !== null) {
      const used = await creditWaits.dailyUsed(tx, account, batch.createdAt * 1000)
      if (used.plus(hold).greaterThan(account.daily_spend_limit_usd)) {
        return {
          kind: 'daily_limit_exceeded',
          limitUsd: moneyText(account.daily_spend_limit_usd),
          usedUsd: moneyText(used),
        }
      }
    }
    const available = new Money(account.balance_usd).minus(account.held_usd).minus(leased!.total)
    const waitUntil = batch.creditWaitUntil ?? null
    // Waits only when its hold does not fit; the deposit it then asks for counts the batches
    // waiting before it, which a deposit reaches first.
    const waits = available.lessThan(hold)
    const ahead =
      waits && waitUntil !== null ? await creditWaits.waitingHolds(tx, batch.accountId) : []
    if (waits && waitUntil === null) {
      return { kind: 'insufficient_quota', availableUsd: moneyText(Money.max(available, ZERO)) }
    }
    if (!waits) {
      await tx`
        UPDATE accounts SET held_usd = held_usd + ${hold}::numeric WHERE id = ${batch.accountId}`
    }
    const wait = waits
      ? creditWaitColumns(hold, ahead, available, waitUntil!)
      : { code: null, message: null, until: null }
    const [row] = await tx`
      INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
        created_at, deadline_at, line_count, pending, cost_ceiling_usd, held_usd, source,
        metadata, input_file_id, idempotency_key, waiting_code, waiting_message, waiting_until,
        max_cost_usd, parent_batch_id, lane_lines, request_hash)
      VALUES (${batch.id}, ${batch.accountId}, ${batch.name}, ${batch.endpoint},
        ${waits ? 'validating' : 'in_progress'},
        ${batch.completionWindowHours}, ${batch.createdAt}, ${batch.deadlineAt},
        ${batch.lineCount}, ${batch.lineCount}, ${ceiling}::numeric,
        ${waits ? '0' : hold}::numeric,
        ${batch.source}, ${batch.metadata ? tx.json(storableJson(batch.metadata)) : null},
        ${batch.inputFileId}, ${batch.idempotencyKey}, ${wait.code}, ${wait.message},
        ${wait.until}, ${cap}::numeric, ${batch.parentBatchId ?? null}, false,
        ${batch.requestHash ?? null})
      RETURNING *`
    const { count, laneLines } = await copyLines(tx, {
      batchId: batch.id,
      lines: batch.lines,
      collectGarbage,
      withCeilings: cap !== null,
    })
    if (count !== batch.lineCount) {
      throw new Error(`batch ${batch.id}: ${count} lines given, ${batch.lineCount} declared`)
    }
    // Stored false above: true once a line is marked (the column's default is the safe side).
    if (laneLines) await tx`UPDATE batches SET lane_lines = true WHERE id = ${batch.id}`
    if (batch.parentBatchId) {
      // The parent has ended (the caller checked), so no dispatch transaction holds its row:
      // locking it after the account cannot close a cycle with one that locks batch, then account.
      const [parent] = await tx`
        UPDATE batches
        SET retried_by = coalesce(retried_by, '[]'::jsonb) || jsonb_build_array(${batch.id}::text)
        WHERE id = ${batch.parentBatchId} AND account_id = ${batch.accountId}
        RETURNING id`
      if (!parent) throw new Error(`batch ${batch.id}: parent ${batch.parentBatchId} not found`)
    }
    return { kind: 'created', batch: rowToBatch(row!) }
  })
}
