/** A batch's rows ↔ records, for both dialects; their column names are the same. */
import type {
  AccountRecord,
  BatchRecord,
  BatchWaiting,
  KeyRecord,
  LineError,
  LineErrorCode,
  LineRecord,
  ProviderShare,
  Scope,
  WaitingCode,
} from '../../domain.ts'
import { Money, moneyText } from '../../money/decimal.ts'
import { num } from '../connection.ts'
import { withProgress } from '../dispatch/dispatch-rows.ts'

type Row = Record<string, unknown>

const json = <T>(value: unknown): T | null =>
  value === null || value === undefined
    ? null
    : typeof value === 'string'
      ? (JSON.parse(value) as T)
      : (value as T)

export function rowToBatch(stored: Row): BatchRecord {
  const row = withProgress(stored)
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    name: (row.name as string | null) ?? null,
    endpoint: row.endpoint as BatchRecord['endpoint'],
    status: row.status as BatchRecord['status'],
    completionWindowHours: Number(row.completion_window_hours),
    createdAt: Number(row.created_at),
    deadlineAt: Number(row.deadline_at),
    startedAt: num(row.started_at),
    finalizingAt: num(row.finalizing_at),
    finishedAt: num(row.finished_at),
    cancelRequestedAt: num(row.cancel_requested_at),
    counts: {
      total: Number(row.line_count),
      pending: Number(row.pending),
      running: Number(row.running),
      succeeded: Number(row.succeeded),
      failed: Number(row.failed),
      cancelled: Number(row.cancelled),
      expired: Number(row.expired),
    },
    costCeilingUsd: moneyText(row.cost_ceiling_usd as string),
    costUsd: moneyText(row.cost_usd as string),
    heldUsd: moneyText(row.held_usd as string),
    source: row.source as BatchRecord['source'],
    metadata: json<Record<string, string>>(row.metadata),
    inputFileId: (row.input_file_id as string | null) ?? null,
    idempotencyKey: (row.idempotency_key as string | null) ?? null,
    requestHash: (row.request_hash as string | null) ?? null,
    errors: json<BatchRecord['errors']>(row.errors),
    purgedAt: num(row.purged_at),
    parentBatchId: (row.parent_batch_id as string | null) ?? null,
    retriedBy: json<string[]>(row.retried_by) ?? [],
    version: Number(row.version ?? 0),
    maxCostUsd:
      row.max_cost_usd === null || row.max_cost_usd === undefined
        ? null
        : moneyText(row.max_cost_usd as string),
    waiting: rowToWaiting(row),
    eta: num(row.eta),
    usage: {
      inputTokens: Number(row.usage_input_tokens ?? 0),
      cachedInputTokens: Number(row.usage_cached_input_tokens ?? 0),
      cacheWriteTokens: Number(row.usage_cache_write_tokens ?? 0),
      outputTokens: Number(row.usage_output_tokens ?? 0),
      uncachedCostUsd: moneyText(String(row.usage_uncached_cost_usd ?? '0')),
    },
  }
}

function rowToWaiting(row: Row): BatchWaiting | null {
  const code = row.waiting_code as WaitingCode | null | undefined
  if (!code) return null
  const waiting: BatchWaiting = { code, message: (row.waiting_message as string | null) ?? code }
  const until = num(row.waiting_until)
  if (until !== null) waiting.until = until
  return waiting
}

const CANNED_MESSAGES: Partial<Record<LineErrorCode, string>> = {
  batch_cancelled: 'the batch was cancelled before this line ran',
  batch_expired: 'the completion window ended before this line ran',
  max_cost_reached:
    "the batch's max_cost_usd left no room for this line's cost ceiling; it was not run and costs nothing",
}

export function rowToLine(row: Row): LineRecord {
  const code = row.error_code as LineErrorCode | null
  let error: LineError | null = null
  if (code) {
    error = { code, message: (row.error_message as string | null) ?? CANNED_MESSAGES[code] ?? code }
    const upstream = json<unknown>(row.error_upstream)
    if (upstream !== null) error.upstream = upstream
  }
  return {
    lineNo: Number(row.line_no),
    customId: row.custom_id as string,
    status: row.status as LineRecord['status'],
    input: row.input as string,
    response: (row.response as string | null) ?? null,
    responseStatus: num(row.response_status),
    error,
    costUsd:
      row.cost_usd === null || row.cost_usd === undefined
        ? null
        : moneyText(row.cost_usd as string),
    provider: (row.provider as string | null) ?? null,
    attempts: Number(row.attempts),
    latencyMs: num(row.latency_ms),
    ...(row.ceiling_usd === null || row.ceiling_usd === undefined
      ? {}
      : { ceilingUsd: moneyText(row.ceiling_usd as string) }),
  }
}

/** batch_providers rows (one per batch, provider and instance) summed per batch and provider. */
export function rowsToShares(rows: readonly Row[]): Map<string, Record<string, ProviderShare>> {
  const sums = new Map<string, Map<string, { share: ProviderShare; cost: Money }>>()
  for (const row of rows) {
    const batchId = row.batch_id as string
    const provider = row.provider as string
    let perProvider = sums.get(batchId)
    if (!perProvider) sums.set(batchId, (perProvider = new Map()))
    let entry = perProvider.get(provider)
    if (!entry) {
      entry = { share: { succeeded: 0, failed: 0, running: 0, costUsd: '0' }, cost: new Money(0) }
      perProvider.set(provider, entry)
    }
    entry.share.succeeded += Number(row.succeeded)
    entry.share.failed += Number(row.failed)
    // An instance whose calls ended after its leases were reaped can be below zero for a while.
    entry.share.running += Math.max(0, Number(row.running))
    entry.cost = entry.cost.plus(row.cost_usd as string)
  }
  const shares = new Map<string, Record<string, ProviderShare>>()
  for (const [batchId, perProvider] of sums) {
    const record: Record<string, ProviderShare> = {}
    for (const [provider, { share, cost }] of [...perProvider].sort(([a], [b]) => (a < b ? -1 : 1)))
      record[provider] = { ...share, costUsd: moneyText(cost) }
    shares.set(batchId, record)
  }
  return shares
}

/** A capped batch's line must come with its own ceiling: the claim checks it against the cap. */
export function lineCeiling(line: { lineNo: number; ceilingUsd?: string }): string {
  if (line.ceilingUsd === undefined)
    throw new Error(`line ${line.lineNo} of a batch with max_cost_usd has no ceiling`)
  return line.ceilingUsd
}
