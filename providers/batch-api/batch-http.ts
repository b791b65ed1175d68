/**
 * One HTTP call of a batch client, its failure classified at the edge like a live call's
 * (classify-error.ts): a 5xx or a lost connection is retryable, a 4xx is not.
 */
import { classifyException, classifyStatus, upstreamError } from '../classify-error.ts'
import type { HttpClient } from '../http-client.ts'
import type { BatchCall } from './types.ts'

export interface BatchHttpCall {
  method: 'GET' | 'POST'
  path: string
  headers: Record<string, string>
  body?: string
}

/** The body text of a 2xx answer, or the classified failure. */
export async function callText(
  client: HttpClient,
  call: BatchHttpCall,
  timeoutMs: number,
  apiKey: string | null,
): Promise<BatchCall<string>> {
  const signal = AbortSignal.timeout(timeoutMs)
  try {
    const response = await client.request({ ...call, signal })
    const text = await response.text()
    if (response.status >= 200 && response.status < 300) return { ok: true, value: text }
    return {
      ok: false,
      error: classifyStatus(response.status, (name) => response.header(name), text, apiKey),
    }
  } catch (error) {
    const cause = { timedOut: signal.aborted, callerAborted: false, timeoutMs }
    return { ok: false, error: classifyException(error, cause, apiKey) }
  }
}

/** A 2xx JSON object, or the failure (a 2xx that is not one is malformed). */
export async function callJson(
  client: HttpClient,
  call: BatchHttpCall,
  timeoutMs: number,
  apiKey: string | null,
): Promise<BatchCall<Record<string, unknown>>> {
  const result = await callText(client, call, timeoutMs, apiKey)
  if (!result.ok) return result
  try {
    const json = JSON.parse(result.value)
    if (typeof json === 'object' && json !== null && !Array.isArray(json))
      return { ok: true, value: json }
  } catch {}
  return {
    ok: false,
    error: upstreamError('malformed_response', 'the batch API answered a body that is not JSON'),
  }
}

/** JSONL text → parsed rows; a row that is not JSON is skipped and counted. */
export function parseJsonl(text: string): { rows: Record<string, unknown>[]; broken: number } {
  const rows: Record<string, unknown>[] = []
  let broken = 0
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    try {
      rows.push(JSON.parse(line))
    } catch {
      broken++
    }
  }
  return { rows, broken }
}

/** `mg-<n>` → n, or null for an id the gateway did not send. */
export function positionOf(upstreamId: unknown): number | null {
  if (typeof upstreamId !== 'string') return null
  const match = /^mg-(\d+)$/.exec(upstreamId)
  return match ? Number(match[1]) : null
}

export const upstreamIdOf = (position: number): string => `mg-${position}`

/**
 * One page of a provider's list of batches (both APIs answer `data`, `has_more`, `last_id`),
 * each item mapped by `toItem`; the last id falls back to the last item's.
 */
export function listPage<T extends { id: string }>(
  json: Record<string, unknown>,
  toItem: (item: Record<string, unknown>) => T,
): { batches: T[]; hasMore: boolean; lastId: string | null } {
  const data = Array.isArray(json.data) ? json.data : []
  const batches = data.map((item) => toItem(item as Record<string, unknown>))
  const lastId = typeof json.last_id === 'string' ? json.last_id : (batches.at(-1)?.id ?? null)
  return { batches, hasMore: json.has_more === true, lastId }
}
