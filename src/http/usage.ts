/**
 * docs/operations.md's pictures for programs: GET /v1/usage (a read key; the caller's account) and
 * GET /metrics (Prometheus text; open, or behind MULTIGRID_METRICS_TOKEN when it is set).
 */
import { Elysia } from 'elysia'
import type { Authenticator } from '../auth/authenticate.ts'
import { bearerTokenMatches } from '../auth/bearer-token.ts'
import { refuse } from '../errors.ts'
import type { UsageStore } from '../store/store.ts'
import type { PrometheusMetrics } from '../telemetry/prometheus.ts'
import { readUsageQuery, renderUsage } from './usage-report.ts'
import { callerMacro } from './caller-macro.ts'
import { queryFields } from './parse-query.ts'

export interface UsageRouteDeps {
  auth: Authenticator
  store: UsageStore
  /** Writes this instance's buffered figures first, so its own answers are counted. */
  flush: () => Promise<void>
}

export function usageRoutes(deps: UsageRouteDeps) {
  return new Elysia({ name: 'usage' }).use(callerMacro(deps.auth)).get(
    '/v1/usage',
    async ({ request, caller }) => {
      const params = new URL(request.url).searchParams
      queryFields(params) // a parameter given twice is refused, as on every route
      const query = readUsageQuery(params)
      await deps.flush()
      const rows = await deps.store.usageRows(caller.account.id, query.from, query.to)
      return renderUsage(rows, query)
    },
    { caller: 'read' },
  )
}

export interface MetricsRouteDeps {
  metrics: PrometheusMetrics
  /** Pending lines (the open batches' counters: no scan of lines) and this instance's in flight. */
  queueDepth: () => Promise<number>
  inFlight: () => number
  /** Each provider's replicas, healthy and in all. */
  replicas: () => Record<string, { healthy: number; total: number }>
  /** When set, a scrape must send `Authorization: Bearer <token>`. */
  token: string | null
}

/** How long a scrape waits for the queue depth (as /readyz waits for the store) before leaving it out. */
const QUEUE_DEPTH_TIMEOUT_MS = 2_000

/**
 * The queue depth, or null when the store does not give it in time: the counters are in memory,
 * and a store outage, when they matter most, must not cost the scrape (a 500, or a wait past
 * Prometheus' scrape timeout).
 */
async function queueDepthOrNull(read: () => Promise<number>): Promise<number | null> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<null>((done) => (timer = setTimeout(done, QUEUE_DEPTH_TIMEOUT_MS, null)))
  try {
    return await Promise.race([read().catch(() => null), late])
  } finally {
    clearTimeout(timer)
  }
}

export function metricsRoutes(deps: MetricsRouteDeps) {
  const expected = deps.token === null ? null : Buffer.from(deps.token)
  return new Elysia({ name: 'metrics' }).get('/metrics', async ({ request }) => {
    if (expected !== null && !bearerTokenMatches(request.headers.get('authorization'), expected))
      throw refuse(
        'invalid_api_key',
        'GET /metrics needs "Authorization: Bearer <MULTIGRID_METRICS_TOKEN>" on this gateway',
      )
    const text = deps.metrics.render({
      queueDepth: await queueDepthOrNull(deps.queueDepth),
      inFlight: deps.inFlight(),
      replicas: deps.replicas(),
    })
    return new Response(text, {
      headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' },
    })
  })
}
