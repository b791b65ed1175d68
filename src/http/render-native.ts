/** The native batch object (SPEC §3) and its result lines, rendered from stored records. */
import type { BatchRecord, LineRecord } from '../domain.ts'
import { usd } from '../money/decimal.ts'

export function renderBatch(batch: BatchRecord) {
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
    results_url: `/v1/batches/${batch.id}/results`,
    // SPEC §15: a retry's child names its parent; a parent lists its children, oldest first.
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
  return (
    `${head},"response":${response},"error":${error},"cost_usd":"${usd(line.costUsd ?? '0')}"` +
    `,"provider":${JSON.stringify(line.provider)},"attempts":${line.attempts},"latency_ms":${line.latencyMs ?? 'null'}}`
  )
}
