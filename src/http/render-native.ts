/** The native batch object (docs/native-api.md) and its result lines, rendered from stored records. */
import {
  currentWaiting,
  isOpenBatch,
  nowSeconds,
  type BatchRecord,
  type LineRecord,
  type ProviderShare,
} from '../domain.ts'
import { Money, moneyText, usd } from '../money/decimal.ts'
import type { BatchObject, RoutingView } from '../schemas/native-objects.ts'

/**
 * The planner's projected finish of a batch (docs/routing.md `routing.eta`, Unix seconds), or null
 * before it can tell. The one place every surface (API, dashboard) reads it from.
 */
export function batchEta(batch: BatchRecord): number | null {
  // The dispatcher writes it as the batch runs (the planner's projection); an ended batch has none.
  return isOpenBatch(batch.status) ? batch.eta : null
}

/** `routing.providers`: per provider, what ended there, what it cost and what runs there now. */
export function renderProviders(shares: Record<string, ProviderShare> | undefined) {
  const providers: RoutingView['providers'] = {}
  for (const [name, share] of Object.entries(shares ?? {})) {
    providers[name] = {
      succeeded: share.succeeded,
      failed: share.failed,
      running: share.running,
      // A free pool's share reads "0", as docs/routing.md shows it; others are in micro-dollars.
      cost_usd: new Money(share.costUsd).isZero() ? '0' : usd(share.costUsd),
    }
    // A batch lane (docs/batch-lanes.md): the provider batches its running lines wait in, and
    // when the live lanes take over those not ended by then.
    if (share.providerBatches) {
      providers[name].provider_batches = share.providerBatches.count
      providers[name].fallback_at = share.providerBatches.fallbackAt
    }
  }
  return providers
}

/** `shares`: the batch's providerShares entry (none yet: an empty breakdown). */
export function renderBatch(
  batch: BatchRecord,
  shares?: Record<string, ProviderShare>,
): BatchObject {
  return {
    id: batch.id,
    object: 'batch',
    name: batch.name,
    endpoint: batch.endpoint,
    status: batch.status,
    completion_window_hours: batch.completionWindowHours,
    created_at: batch.createdAt,
    deadline_at: batch.deadlineAt,
    started_at: batch.startedAt,
    finished_at: batch.finishedAt,
    line_count: batch.counts.total,
    request_counts: batch.counts,
    cost_ceiling_usd: usd(batch.costCeilingUsd),
    cost_usd: usd(batch.costUsd),
    // docs/pricing.md: every prompt token in input_tokens, the cache figures parts of it.
    usage: {
      input_tokens: batch.usage.inputTokens,
      cached_input_tokens: batch.usage.cachedInputTokens,
      cache_write_tokens: batch.usage.cacheWriteTokens,
      output_tokens: batch.usage.outputTokens,
    },
    // As the caller wrote it (docs/money-and-limits.md "5"), canonical: no trailing zeros.
    max_cost_usd: batch.maxCostUsd === null ? null : moneyText(batch.maxCostUsd),
    routing: { providers: renderProviders(shares), eta: batchEta(batch) },
    waiting: currentWaiting(batch.waiting, nowSeconds()),
    errors: batch.errors,
    results_url: `/v1/batches/${batch.id}/results`,
    // docs/events-and-webhooks.md: a retry's child names its parent; a parent lists its children, oldest first.
    parent_batch_id: batch.parentBatchId,
    retried_by: batch.retriedBy,
  }
}

/** One results line as JSON text. The stored response body is spliced in verbatim, never re-parsed. */
export function renderResultLine(line: LineRecord): string {
  const head = `{"custom_id":${JSON.stringify(line.customId)},"line":${line.lineNo},"status":"${line.status}"`
  if (line.status === 'pending' || line.status === 'running') {
    return `${head},"response":null,"error":null}`
  }
  const response =
    line.response === null
      ? 'null'
      : `{"status_code":${line.responseStatus ?? 200},"body":${line.response}}`
  const error = line.error === null ? 'null' : JSON.stringify(line.error)
  // docs/open-models.md names the cost of an answer refused as not the JSON asked for: exactly "0".
  const cost = line.error?.code === 'structured_output_invalid' ? '0' : usd(line.costUsd ?? '0')
  return (
    `${head},"response":${response},"error":${error},"cost_usd":"${cost}"` +
    `,"provider":${JSON.stringify(line.provider)},"attempts":${line.attempts},"latency_ms":${line.latencyMs ?? 'null'}}`
  )
}
