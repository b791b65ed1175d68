/**
 * docs/operations.md's pictures for programs: GET /v1/usage (a read key; the caller's account) and
 * GET /metrics (Prometheus text; open, or behind MULTIGRID_METRICS_TOKEN when it is set).
 */
import { Elysia } from 'elysia'
import type { Authenticator } from '../auth/authenticate.ts'
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

export function metricsRoutes(deps: MetricsRouteDeps) {
  return new Elysia({ name: 'metrics' }).get('/metrics', async ({ request }) => {
    if (deps.token !== null && request.headers.get('authorization') !== `Bearer ${deps.token}`)
      throw refuse(
        'invalid_api_key',
        'GET /metrics needs "Authorization: Bearer <MULTIGRID_METRICS_TOKEN>" on this gateway',
      )
    const text = deps.metrics.render({
      queueDepth: await deps.queueDepth(),
      inFlight: deps.inFlight(),
      replicas: deps.replicas(),
    })
    return new Response(text, {
      headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' },
    })
  })
}
