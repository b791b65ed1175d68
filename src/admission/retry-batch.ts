/**
 * Retry as a child batch (docs/events-and-webhooks.md): the lines of an ended batch that did not succeed (failed,
 * cancelled, expired), with the same custom_ids and bodies — their input lines as stored, byte
 * for byte — admitted like any submit: validated against today's catalog, held, counted against
 * the limits, idempotent by key. The child names its parent; the parent lists the child.
 */
import { isOpenBatch } from '../domain.ts'
import { notFound, refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import type { BatchStore } from '../store/store.ts'
import { requestHash } from './request-hash.ts'
import {
  sameRequest,
  waitsForCredit,
  type Admission,
  type SubmitOptions,
  type SubmitResult,
} from './submit-batch.ts'

/** The line statuses a retry runs again: every one that did not succeed. */
export const UNSUCCESSFUL = ['failed', 'cancelled', 'expired'] as const

const PAGE = 1000
const encoder = new TextEncoder()

export interface RetryOptions {
  accountId: string
  /** Default: the parent's window. */
  completionWindowHours: number | null
  /** The child's spend cap (docs/money-and-limits.md), canonical decimal text; null for none. */
  maxCostUsd: string | null
  idempotencyKey: string | null
  /**
   * A hold the credit does not cover waits for a deposit (docs/open-models.md) instead of a 402.
   * Absent: as a submit's default (submit-batch.ts).
   */
  waitForCredit?: boolean
}

/**
 * Makes the child batch of `parentId`, or refuses: 404 for a batch the account does not have,
 * 409 while it runs, 410 once its lines were deleted by retention, 400 when every line
 * succeeded. A file the catalog no longer accepts is `invalid`, its issues on the parent's lines.
 */
export async function retryBatch(
  store: BatchStore,
  admission: Admission,
  parentId: string,
  options: RetryOptions,
): Promise<SubmitResult> {
  const parent = await store.getBatch(options.accountId, parentId)
  if (options.idempotencyKey) {
    const existing = await store.findByIdempotencyKey(options.accountId, options.idempotencyKey)
    if (existing) {
      // A parent deleted since: the window the child was made with is the one it stood for.
      const window = parent?.completionWindowHours ?? existing.completionWindowHours
      return sameRequest(existing, retryHash(parentId, options, window))
    }
  }
  if (!parent) throw notFound(`batch ${excerpt(parentId)}`)
  if (isOpenBatch(parent.status)) {
    throw refuse(
      'batch_not_ended',
      `batch ${parent.id} is ${parent.status}; a retry takes the lines that did not succeed once it has ended: wait for it to end (GET /v1/batches/${parent.id}/events)${parent.status === 'cancelling' ? ', which it does once its lines in flight finish' : ', or cancel it first'}`,
      { detail: { status: parent.status } },
    )
  }
  const c = parent.counts
  if (c.failed + c.cancelled + c.expired === 0) {
    throw refuse(
      'nothing_to_retry',
      `every line of batch ${parent.id} succeeded (or it had none); there is nothing to retry`,
    )
  }
  if (parent.purgedAt !== null) {
    throw refuse(
      'results_expired',
      `the lines of batch ${parent.id} were deleted when its retention period ended; there is nothing left to retry from`,
    )
  }
  const { bytes, lineNos } = await unsuccessfulInput(store, parent.id)
  const hours = options.completionWindowHours ?? parent.completionWindowHours
  const submit: SubmitOptions = {
    accountId: options.accountId,
    name: parent.name,
    completionWindowHours: hours,
    waitForCredit: options.waitForCredit,
    idempotencyKey: options.idempotencyKey,
    requestHash: retryHash(parentId, options, parent.completionWindowHours),
    source: 'native',
    metadata: null,
    inputFileId: null,
    endpoint: parent.endpoint,
    maxCostUsd: options.maxCostUsd,
    parentBatchId: parent.id,
  }
  const result = await admission.submit(bytes, submit)
  if (result.kind === 'invalid') {
    // The child's file is the parent's lines, renumbered: say which of the parent's lines it is.
    const issues = result.issues.map((issue) => ({
      ...issue,
      line: lineNos[issue.line - 1] ?? issue.line,
    }))
    return { ...result, issues }
  }
  return result
}

/** The parent's unsuccessful input lines as one JSONL file, and each one's line in the parent. */
async function unsuccessfulInput(store: BatchStore, batchId: string) {
  const parts: string[] = []
  const lineNos: number[] = []
  let after = 0
  for (;;) {
    const lines = await store.readLines(batchId, {
      afterLineNo: after,
      limit: PAGE,
      statuses: UNSUCCESSFUL,
    })
    for (const line of lines) {
      parts.push(line.input)
      lineNos.push(line.lineNo)
    }
    if (lines.length < PAGE) break
    after = lines[lines.length - 1]!.lineNo
  }
  return { bytes: encoder.encode(parts.join('\n') + '\n'), lineNos }
}

/**
 * A retry's request, as request-hash.ts hashes it: the parent and the options, no body; a
 * default as what it stands for (the parent's window left out or sent is one request).
 */
function retryHash(parentId: string, options: RetryOptions, parentWindow: number) {
  const hours = options.completionWindowHours ?? parentWindow
  return requestHash(null, {
    retry_of: parentId,
    completion_window_hours: hours,
    max_cost_usd: options.maxCostUsd,
    wait_for_credit: waitsForCredit(options.waitForCredit, hours),
  })
}
