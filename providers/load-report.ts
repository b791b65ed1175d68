/**
 * vLLM's load signals, read for adaptive concurrency (adaptive-limit.ts): how many requests wait
 * in a replica's queue.
 *
 * - The `endpoint-load-metrics` response header, an ORCA load report that vLLM adds to a
 *   non-streamed answer when the request asked for it with `endpoint-load-metrics-format: text`
 *   (or `json`): `TEXT named_metrics.kv_cache_usage_perc=0.4, named_metrics.num_requests_waiting=3.0`
 *   or `JSON {"named_metrics": {"kv_cache_usage_perc": 0.4, "num_requests_waiting": 3.0}}`
 *   (vllm/entrypoints/openai/orca_metrics.py).
 * - The `vllm:num_requests_waiting` gauge on GET /metrics (Prometheus text), one sample per engine.
 */

/** The request header that asks vLLM for the load report, and the format asked for. */
export const LOAD_REPORT_REQUEST_HEADER = 'endpoint-load-metrics-format'
export const LOAD_REPORT_HEADER = 'endpoint-load-metrics'

const WAITING = 'num_requests_waiting'

/** `num_requests_waiting` from an `endpoint-load-metrics` header; null when absent or unreadable. */
export function waitingFromLoadHeader(value: string | null): number | null {
  if (value === null) return null
  const trimmed = value.trim()
  const space = trimmed.indexOf(' ')
  if (space < 0) return null
  const format = trimmed.slice(0, space).toUpperCase()
  const rest = trimmed.slice(space + 1)
  if (format === 'TEXT') {
    for (const pair of rest.split(',')) {
      const [key, number] = pair.split('=')
      if (key?.trim() === `named_metrics.${WAITING}`) return count(Number(number))
    }
    return null
  }
  if (format === 'JSON') {
    try {
      const report = JSON.parse(rest) as { named_metrics?: Record<string, unknown> }
      const number = report.named_metrics?.[WAITING]
      return typeof number === 'number' ? count(number) : null
    } catch {
      return null
    }
  }
  return null
}

/** The sum of `vllm:num_requests_waiting` over its samples in a /metrics page; null when absent. */
export function waitingFromMetrics(text: string): number | null {
  let total: number | null = null
  for (const line of text.split('\n')) {
    if (!line.startsWith('vllm:num_requests_waiting')) continue
    const rest = line.slice('vllm:num_requests_waiting'.length)
    // The gauge itself, labelled or not: not a longer name that shares the prefix.
    if (rest[0] !== '{' && rest[0] !== ' ') continue
    const labelsEnd = rest[0] === '{' ? rest.lastIndexOf('}') : 0
    const fields = rest
      .slice(labelsEnd + 1)
      .trim()
      .split(/\s+/)
    const value = count(Number(fields[0]))
    if (value !== null) total = (total ?? 0) + value
  }
  return total
}

function count(value: number): number | null {
  return Number.isFinite(value) && value >= 0 ? value : null
}
