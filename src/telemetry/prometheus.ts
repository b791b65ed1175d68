/**
 * `GET /metrics` (docs/operations.md): this instance's counters in Prometheus' text format, version 0.0.4.
 * Everything is counted in memory as it happens (a line recorded, an upstream call answered, a
 * webhook attempt), so a scrape reads counters and two gauges, never the store's tables. Each
 * instance reports its own; Prometheus adds a fleet up (sum by …). Spend is summed in decimal and
 * shown as a float, as the format has no other number.
 */
import Decimal from 'decimal.js'
import type { Telemetry, UpstreamResult } from './telemetry.ts'

/** Upper bounds of the upstream latency buckets, in seconds (a 50 ms simulator to a 60 s timeout). */
const LATENCY_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

export interface PrometheusMetrics {
  /** A batch line reached `status` on `provider` (null: it never reached one), costing `costUsd`. */
  lineFinished(status: 'succeeded' | 'failed', provider: string | null, costUsd: string): void
  /** `count` batch lines ended without running (a cancel, a deadline, a cap, no credit or capacity in time). */
  linesEnded(status: 'cancelled' | 'expired' | 'failed', count: number): void
  /** A live call was charged `costUnits` (10⁻¹⁸ USD, money/fixed-point.ts) on `provider`. */
  liveCharged(provider: string, costUnits: bigint): void
  upstreamLatency(provider: string, seconds: number): void
  /** An upstream call failed on `provider`, classified as `kind` (rate_limited, timeout, …). */
  upstreamError(provider: string, kind: string): void
  webhookAttempt(result: 'delivered' | 'retry' | 'failed'): void
  /**
   * The text of one scrape; the gauges are read by the caller (queue depth, lines in flight,
   * replicas). A queue depth of null (the store out of reach) is left out, not shown as 0.
   */
  render(gauges: {
    queueDepth: number | null
    inFlight: number
    replicas?: Record<string, { healthy: number; total: number }>
  }): string
}

interface Histogram {
  buckets: number[]
  count: number
  sum: number
}

export function createPrometheusMetrics(): PrometheusMetrics {
  const lines = new Map<string, number>()
  const liveCalls = new Map<string, number>()
  const spend = new Map<string, Decimal>()
  // Live calls' spend in units, summed as integers on the call's path, added to `spend` when shown.
  const liveSpend = new Map<string, bigint>()
  const latency = new Map<string, Histogram>()
  const webhooks = new Map<string, number>()
  const upstreamErrors = new Map<string, number>()
  const bump = (map: Map<string, number>, key: string, by = 1) =>
    map.set(key, (map.get(key) ?? 0) + by)
  const addSpend = (provider: string, costUsd: string) => {
    if (costUsd === '0') return void spend.set(provider, spend.get(provider) ?? new Decimal(0))
    spend.set(provider, (spend.get(provider) ?? new Decimal(0)).plus(costUsd))
  }

  return {
    lineFinished(status, provider, costUsd) {
      const name = provider ?? 'none'
      bump(lines, `${status}\u0000${name}`)
      addSpend(name, costUsd)
    },
    linesEnded(status, count) {
      if (count > 0) bump(lines, `${status}\u0000none`, count)
    },
    liveCharged(provider, costUnits) {
      bump(liveCalls, provider)
      liveSpend.set(provider, (liveSpend.get(provider) ?? 0n) + costUnits)
    },
    upstreamLatency(provider, seconds) {
      let h = latency.get(provider)
      if (!h)
        latency.set(provider, (h = { buckets: LATENCY_BUCKETS.map(() => 0), count: 0, sum: 0 }))
      for (let i = 0; i < LATENCY_BUCKETS.length; i++)
        if (seconds <= LATENCY_BUCKETS[i]) h.buckets[i]++
      h.count++
      h.sum += seconds
    },
    upstreamError(provider, kind) {
      bump(upstreamErrors, `${provider}\u0000${kind}`)
    },
    webhookAttempt(result) {
      bump(webhooks, result)
    },
    render({ queueDepth, inFlight, replicas = {} }) {
      const out: string[] = []
      const family = (name: string, type: string, help: string) =>
        out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
      // A counter kept by two labels, its keys `first\u0000second`.
      const byTwo = (name: string, counts: Map<string, number>, first: string, second: string) => {
        for (const [key, n] of counts) {
          const [a, b] = key.split('\u0000')
          out.push(`${name}{${first}="${label(a!)}",${second}="${label(b!)}"} ${n}`)
        }
      }
      family(
        'multigrid_lines_total',
        'counter',
        'Batch lines that reached a final state, by status and provider.',
      )
      byTwo('multigrid_lines_total', lines, 'status', 'provider')
      family('multigrid_live_calls_total', 'counter', 'Live calls charged, by provider.')
      for (const [provider, n] of liveCalls)
        out.push(`multigrid_live_calls_total{provider="${label(provider)}"} ${n}`)
      family(
        'multigrid_spend_usd_total',
        'counter',
        'USD charged for batch lines and live calls, by provider.',
      )
      for (const [provider, usd] of spendByProvider(spend, liveSpend))
        out.push(`multigrid_spend_usd_total{provider="${label(provider)}"} ${usd.toNumber()}`)
      family('multigrid_queue_depth', 'gauge', 'Batch lines waiting to be dispatched (pending).')
      if (queueDepth !== null) out.push(`multigrid_queue_depth ${queueDepth}`)
      family(
        'multigrid_lines_in_flight',
        'gauge',
        "Batch lines this instance has taken on: upstream now, or waiting at a provider's gate for a slot.",
      )
      out.push(`multigrid_lines_in_flight ${inFlight}`)
      family(
        'multigrid_upstream_replicas_healthy',
        'gauge',
        "A provider's replicas taking calls now (out: refused a connection or failed 3 calls in a row, until a probe answers).",
      )
      for (const [provider, { healthy }] of Object.entries(replicas))
        out.push(`multigrid_upstream_replicas_healthy{provider="${label(provider)}"} ${healthy}`)
      family('multigrid_upstream_replicas', 'gauge', "A provider's replicas (its base URLs).")
      for (const [provider, { total }] of Object.entries(replicas))
        out.push(`multigrid_upstream_replicas{provider="${label(provider)}"} ${total}`)
      family(
        'multigrid_upstream_latency_seconds',
        'histogram',
        'Seconds per upstream call (batch and live), by provider.',
      )
      for (const [provider, h] of latency) {
        const p = label(provider)
        LATENCY_BUCKETS.forEach((le, i) =>
          out.push(
            `multigrid_upstream_latency_seconds_bucket{provider="${p}",le="${le}"} ${h.buckets[i]}`,
          ),
        )
        out.push(`multigrid_upstream_latency_seconds_bucket{provider="${p}",le="+Inf"} ${h.count}`)
        out.push(`multigrid_upstream_latency_seconds_sum{provider="${p}"} ${h.sum}`)
        out.push(`multigrid_upstream_latency_seconds_count{provider="${p}"} ${h.count}`)
      }
      family(
        'multigrid_upstream_errors_total',
        'counter',
        'Failed upstream calls (batch and live), by provider and kind.',
      )
      byTwo('multigrid_upstream_errors_total', upstreamErrors, 'provider', 'kind')
      family(
        'multigrid_webhook_attempts_total',
        'counter',
        'Webhook delivery attempts, by result (delivered, retry, failed).',
      )
      for (const [result, n] of webhooks)
        out.push(`multigrid_webhook_attempts_total{result="${result}"} ${n}`)
      return out.join('\n') + '\n'
    },
  }
}

/** Batch lines' spend and live calls' spend together, by provider, in the order first seen. */
function spendByProvider(spend: Map<string, Decimal>, live: Map<string, bigint>) {
  const all = new Map(spend)
  for (const [provider, units] of live)
    all.set(provider, (all.get(provider) ?? new Decimal(0)).plus(new Decimal(`${units}e-18`)))
  return all
}

/** A label value as the format escapes it: backslash, double quote and newline. */
const label = (value: string) =>
  value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n')

/**
 * The telemetry with every upstream call's time and failure also counted in `metrics`
 * (OpenTelemetry on or off), and each failure told to `failed` (a caller's abort is none). A
 * stream's failure is known at its end: counted then.
 */
export function timeUpstreamCalls(
  telemetry: Telemetry,
  metrics: PrometheusMetrics,
  failed: (provider: string, kind: string) => void = () => {},
): Telemetry {
  return {
    ...telemetry,
    async upstream(call, run, describe) {
      const started = performance.now()
      const counted = (result: Parameters<typeof describe>[0]) => {
        const described = describe(result)
        const count = (done: UpstreamResult) => {
          if (!done.errorKind || done.callerAborted) return
          metrics.upstreamError(call.provider, done.errorKind)
          failed(call.provider, done.errorKind)
        }
        if (described instanceof Promise) described.then(count, () => {})
        else count(described)
        return described
      }
      try {
        if (telemetry.enabled) return await telemetry.upstream(call, run, counted)
        const result = await run()
        counted(result)
        return result
      } finally {
        metrics.upstreamLatency(call.provider, (performance.now() - started) / 1000)
      }
    },
  }
}
