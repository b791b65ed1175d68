/**
 * Anthropic's Message Batch object and result lines (docs/clients/anthropic-sdk.md), rendered from the native batch
 * underneath. The ids name each other: `msgbatch_<x>` is the native `batch_<x>`.
 */
import { isOpenBatch, type BatchRecord, type LineRecord } from '../../domain.ts'
import type { MessageBatchObject } from '../../schemas/facade-objects.ts'
import { convertChatToMessage } from '../../../providers/anthropic/convert-chat-to-message.ts'

const NATIVE_PREFIX = 'batch_'
const ANTHROPIC_PREFIX = 'msgbatch_'

export const messageBatchId = (nativeId: string) =>
  ANTHROPIC_PREFIX + nativeId.slice(NATIVE_PREFIX.length)

/** The native id a `msgbatch_` id names; null for anything else (answered 404). */
export function nativeBatchId(id: string): string | null {
  return id.startsWith(ANTHROPIC_PREFIX) ? NATIVE_PREFIX + id.slice(ANTHROPIC_PREFIX.length) : null
}

/** Anthropic writes times as RFC 3339 strings; the store keeps Unix seconds. */
function rfc3339(seconds: number): string
function rfc3339(seconds: number | null): string | null
function rfc3339(seconds: number | null) {
  return seconds === null ? null : new Date(seconds * 1000).toISOString()
}

export function processingStatus(batch: BatchRecord): 'in_progress' | 'canceling' | 'ended' {
  if (!isOpenBatch(batch.status)) return 'ended'
  return batch.status === 'cancelling' ? 'canceling' : 'in_progress'
}

/** `origin` is the gateway's address as the caller reached it: results_url is absolute. */
export function renderMessageBatch(batch: BatchRecord, origin: string): MessageBatchObject {
  const counts = batch.counts
  const id = messageBatchId(batch.id)
  const ended = processingStatus(batch) === 'ended'
  return {
    id,
    type: 'message_batch' as const,
    processing_status: processingStatus(batch),
    request_counts: {
      processing: ended ? 0 : counts.pending + counts.running,
      succeeded: counts.succeeded,
      errored: counts.failed,
      canceled: counts.cancelled,
      expired: counts.expired,
    },
    created_at: rfc3339(batch.createdAt),
    expires_at: rfc3339(batch.deadlineAt),
    ended_at: ended ? rfc3339(batch.finishedAt ?? batch.createdAt) : null,
    cancel_initiated_at: rfc3339(batch.cancelRequestedAt),
    archived_at: null,
    // The SDK reads the results from here once the batch has ended (and only then).
    results_url: ended ? `${origin}/anthropic/v1/messages/batches/${id}/results` : null,
  }
}

/** The native line error codes → Anthropic's error types for an `errored` result. */
function errorType(code: string): string {
  switch (code) {
    case 'invalid_request':
    case 'context_length_exceeded':
    case 'structured_output_invalid':
      return 'invalid_request_error'
    case 'max_cost_reached':
    case 'insufficient_quota':
      return 'billing_error'
    default:
      return 'api_error'
  }
}

/** The line statuses a results file holds: the ended ones. */
export const ENDED_LINES = ['succeeded', 'failed', 'cancelled', 'expired'] as const

/** One line of the results file: `{"custom_id", "result"}`, for a line in ENDED_LINES. */
export function renderMessageResultLine(line: LineRecord): string {
  let result: Record<string, unknown>
  switch (line.status) {
    case 'succeeded':
      result = { type: 'succeeded', message: messageOf(line) }
      break
    case 'failed':
      result = {
        type: 'errored',
        error: {
          type: 'error',
          error: {
            type: errorType(line.error?.code ?? ''),
            message: line.error?.message ?? 'the request failed',
          },
          // Anthropic's ErrorResponse names the request; a line's has none of its own to name.
          request_id: null,
        },
      }
      break
    case 'cancelled':
      result = { type: 'canceled' }
      break
    default:
      result = { type: 'expired' }
  }
  return JSON.stringify({ custom_id: line.customId, result })
}

/**
 * A succeeded line's message: as it was kept (a Messages line's answer, docs/clients/anthropic-sdk.md), or
 * translated from the chat completion a create of an earlier version kept.
 */
function messageOf(line: LineRecord): Record<string, unknown> {
  const response = JSON.parse(line.response ?? '{}') as Record<string, unknown>
  return response.type === 'message'
    ? response
    : convertChatToMessage(response, modelOf(line.input))
}

/** The model the request named (the chat line's body.model): Anthropic's answers echo it. */
function modelOf(input: string): string | undefined {
  try {
    const model = (JSON.parse(input) as { body?: { model?: unknown } }).body?.model
    return typeof model === 'string' ? model : undefined
  } catch {
    return undefined
  }
}
