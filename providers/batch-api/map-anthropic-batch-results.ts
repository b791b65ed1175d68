/**
 * Anthropic's batch results → one result a line (docs/batch-lanes.md): `succeeded` converts the message as
 * the live adapter does, and keeps it as it came; `errored` is classified from its error type as a live answer would be
 * (`invalid_request_error` final, `api_error` / `overloaded_error` retryable); `canceled` and
 * `expired` did not run.
 */
import { convertAnthropicResponse } from '../anthropic/convert-anthropic-response.ts'
import { classifyStatus, upstreamError } from '../classify-error.ts'
import { parseJsonl, positionOf } from './batch-http.ts'
import type { ChunkLineResult } from './types.ts'

// The status a live call answers with each error type (docs.anthropic.com, errors).
const statusOfType: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
}

export function mapAnthropicBatchResults(
  text: string,
  apiKey: string | null,
  created: number,
): ChunkLineResult[] {
  const results: ChunkLineResult[] = []
  for (const row of parseJsonl(text).rows) {
    const position = positionOf(row.custom_id)
    if (position === null) continue
    const result = (row.result ?? {}) as { type?: unknown; message?: unknown; error?: unknown }
    if (result.type === 'canceled' || result.type === 'expired') {
      results.push({ position, type: result.type })
      continue
    }
    if (result.type === 'succeeded') {
      const message = (result.message ?? {}) as Record<string, unknown>
      const converted = convertAnthropicResponse(message, created)
      if (converted.ok) {
        const { body, usage } = converted
        results.push({ position, type: 'succeeded', body, native: message, usage })
      } else {
        const error = upstreamError('malformed_response', converted.message)
        results.push({ position, type: 'errored', error })
      }
      continue
    }
    // errored: `error` is the live error envelope {type: 'error', error: {type, message}}.
    const envelope = result.error as { error?: { type?: unknown } } | undefined
    const type = String(envelope?.error?.type ?? 'api_error')
    const status = statusOfType[type] ?? 500
    const error = classifyStatus(status, () => null, JSON.stringify(envelope ?? null), apiKey)
    results.push({ position, type: 'errored', error })
  }
  return results
}
