/**
 * OpenAI's output and error files → one result a line (docs/batch-lanes.md): a 200 response succeeds (a
 * Response object kept as it came); any
 * other status is `errored`, classified as the live call's answer would be (a 400 is
 * invalid_request, final; a 5xx retryable); `batch_expired` / `batch_cancelled` lines did not run.
 */
import { classifyStatus, upstreamError } from '../classify-error.ts'
import { mapOpenAIUsage } from '../openai/map-openai-usage.ts'
import { mapResponsesUsage } from '../openai/responses-calls.ts'
import { parseJsonl, positionOf } from './batch-http.ts'
import type { ChunkLineResult } from './types.ts'

const noHeaders = () => null

/** One file's rows (output or error, either may hold either kind) → results by position. */
export function mapOpenAIBatchOutput(text: string, apiKey: string | null): ChunkLineResult[] {
  const results: ChunkLineResult[] = []
  for (const row of parseJsonl(text).rows) {
    const position = positionOf(row.custom_id)
    if (position === null) continue
    const response = row.response as { status_code?: unknown; body?: unknown } | null
    if (response === null || response === undefined) {
      const code = (row.error as { code?: unknown } | null)?.code
      if (code === 'batch_expired') results.push({ position, type: 'expired' })
      else if (code === 'batch_cancelled') results.push({ position, type: 'canceled' })
      else {
        const message = `the batch API did not run the line: ${JSON.stringify(row.error).slice(0, 200)}`
        results.push({ position, type: 'errored', error: upstreamError('server_error', message) })
      }
      continue
    }
    const status = Number(response.status_code)
    const body = response.body as Record<string, unknown> | null
    if (status >= 200 && status < 300 && body?.object === 'response') {
      // A Responses line's answer: kept as it came, its usage in the Responses API's names.
      const usage = mapResponsesUsage(body.usage)
      results.push({ position, type: 'succeeded', body, native: body, usage })
      continue
    }
    if (
      status >= 200 &&
      status < 300 &&
      body &&
      (Array.isArray(body.choices) || Array.isArray(body.data))
    ) {
      results.push({ position, type: 'succeeded', body, usage: mapOpenAIUsage(body.usage) })
      continue
    }
    const error =
      status >= 200 && status < 300
        ? upstreamError('malformed_response', `the batch line answered ${status} without choices`, {
            status,
          })
        : classifyStatus(status, noHeaders, JSON.stringify(body ?? null), apiKey)
    results.push({ position, type: 'errored', error })
  }
  return results
}
