/**
 * OpenAI's Batch and File objects and result-line format, rendered from stored records, field
 * for field (contracts/openai-batch-files.schema.json). Unset optional fields are null.
 */
import {
  currentWaiting,
  nowSeconds,
  type BatchRecord,
  type LineRecord,
  type ProviderShare,
} from '../../domain.ts'
import { usd } from '../../money/decimal.ts'
import type { FileView } from '../../store/store.ts'
import { batchEta, renderProviders } from '../render-native.ts'
import { errorFileId, outputFileId } from '../../admission/result-files.ts'
import type { BatchSummary } from './batch-usage.ts'
import type { OpenAiBatchObject, OpenAiFileObject } from '../../schemas/facade-objects.ts'

/** What the facade adds to OpenAI's batch object (docs/openai-facade.md): read from the lines and shares. */
export interface FacadeExtras {
  summary: BatchSummary
  shares?: Record<string, ProviderShare>
}

const FINAL = new Set(['completed', 'failed', 'cancelled', 'expired'])

/**
 * The status in OpenAI's terms: there a batch is `failed` only when it could not run (its file
 * failed validation; here also no credit, no capacity in time), each reason in `errors`. One that
 * ran and whose every request failed is `completed`, its answers in the error file, where the
 * native API calls it `failed` (not one line succeeded).
 */
export const openAiStatus = (batch: BatchRecord) =>
  batch.status === 'failed' && !batch.errors ? 'completed' : batch.status

export function renderOpenAiBatch(batch: BatchRecord, extras?: FacadeExtras): OpenAiBatchObject {
  const counts = batch.counts
  const unsuccessful = counts.failed + counts.cancelled + counts.expired
  const status = openAiStatus(batch)
  const final = FINAL.has(status)
  const at = (when: string) => (status === when ? batch.finishedAt : null)
  return {
    id: batch.id,
    object: 'batch' as const,
    endpoint: batch.endpoint,
    errors: batch.errors ? { object: 'list', data: batch.errors } : null,
    input_file_id: batch.inputFileId ?? '',
    completion_window: `${batch.completionWindowHours}h`,
    status,
    output_file_id: final && counts.succeeded > 0 ? outputFileId(batch.id) : null,
    error_file_id: final && unsuccessful > 0 ? errorFileId(batch.id) : null,
    created_at: batch.createdAt,
    // A batch waiting for credit (docs/open-models.md) is not in progress yet.
    in_progress_at:
      batch.errors || batch.status === 'validating' ? null : (batch.startedAt ?? batch.createdAt),
    expires_at: batch.deadlineAt,
    finalizing_at: batch.finalizingAt,
    completed_at: at('completed'),
    failed_at: at('failed'),
    expired_at: at('expired'),
    cancelling_at: batch.cancelRequestedAt,
    cancelled_at: at('cancelled'),
    request_counts: { total: counts.total, completed: counts.succeeded, failed: unsuccessful },
    metadata: batch.metadata,
    ...(extras ? renderExtras(batch, extras) : {}),
  }
}

/**
 * OpenAI's `usage` and `model`, and Multigrid's own view under `multigrid`: why the batch waits,
 * where its lines went, what it cost and may cost (docs/openai-facade.md). The SDKs keep unknown fields.
 */
function renderExtras(
  batch: BatchRecord,
  { summary, shares }: FacadeExtras,
): Pick<OpenAiBatchObject, 'usage' | 'model' | 'multigrid'> {
  return {
    usage: summary.usage,
    model: summary.model,
    multigrid: {
      waiting: currentWaiting(batch.waiting, nowSeconds()),
      routing: { providers: renderProviders(shares), eta: batchEta(batch) },
      cost_usd: usd(batch.costUsd),
      cost_ceiling_usd: usd(batch.costCeilingUsd),
    },
  }
}

export function renderOpenAiFile(file: FileView): OpenAiFileObject {
  return {
    id: file.id,
    object: 'file' as const,
    bytes: file.bytes ?? 0,
    created_at: file.createdAt,
    expires_at: file.expiresAt ?? null,
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed',
    status_details: null,
  }
}

/** One line of an output or error file: `{"id", "custom_id", "response", "error"}`. */
export function renderOpenAiResultLine(batchId: string, line: LineRecord): string {
  const id = `batch_req_${batchId.slice('batch_'.length)}_${line.lineNo}`
  const requestId = `req_${batchId.slice(-12)}_${line.lineNo}`
  const head = `{"id":"${id}","custom_id":${JSON.stringify(line.customId)}`
  if (line.status === 'succeeded') {
    return `${head},"response":{"status_code":${line.responseStatus ?? 200},"request_id":"${requestId}","body":${line.response}},"error":null}`
  }
  const upstream = line.error?.upstream
  const response =
    line.responseStatus !== null && upstream !== undefined
      ? `{"status_code":${line.responseStatus},"request_id":"${requestId}","body":${JSON.stringify(upstream)}}`
      : 'null'
  const error = line.error
    ? JSON.stringify({ code: line.error.code, message: line.error.message })
    : 'null'
  return `${head},"response":${response},"error":${error}}`
}
