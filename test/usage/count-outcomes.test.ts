/**
 * What a recorded line adds to the usage report and /metrics (src/dispatch/count-outcomes.ts), on a
 * real embedded store: the amount it was charged, and a first-offering price that leaves what
 * routing saved as the route's saving alone when the balance cut the charge short.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { countLineOutcomes } from '../../src/dispatch/count-outcomes.ts'
import { createUsageRecorder } from '../../src/dispatch/usage-recorder.ts'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import type { LineOutcome } from '../../src/store/store.ts'
import { createLogger } from '../../src/telemetry/logger.ts'
import { createPrometheusMetrics } from '../../src/telemetry/prometheus.ts'

const opened = createSqliteStore(null)
afterAll(() => opened.store.close())
const day = new Date().toISOString().slice(0, 10)

const succeeded = (costUsd: string, firstOfferingCostUsd: string): LineOutcome => ({
  batchId: 'batch_01',
  lineNo: 1,
  kind: 'succeeded',
  responseStatus: 200,
  response: '{}',
  costUsd,
  provider: 'pool',
  latencyMs: 5,
  accounting: {
    model: 'm',
    inputTokens: 10,
    cachedInputTokens: 0,
    outputTokens: 5,
    firstOfferingCostUsd,
  },
})

describe('a recorded line, counted', () => {
  test('at what it was charged; the first offering less the shortfall, so the saving is the route alone', async () => {
    const usage = createUsageRecorder(opened.store, {
      everyMs: 60_000,
      logger: createLogger('silent'),
    })
    const metrics = createPrometheusMetrics()
    const count = countLineOutcomes(usage, metrics)
    const line = { accountId: 'acct_1', model: () => 'm' }
    // In full: 0.3 on a route whose first offering would have cost 0.5 (saved 0.2).
    count(succeeded('0.3', '0.5'), line, '0.3')
    // Cut short by a zero balance: 0.3 listed, 0.1 charged; still 0.2 saved by the route.
    count(succeeded('0.3', '0.5'), line, '0.1')
    await usage.flush()
    expect(await opened.store.usageRows('acct_1', day, day)).toEqual([
      expect.objectContaining({ lines: 2, costUsd: '0.4', firstOfferingCostUsd: '0.8' }),
    ])
    expect(metrics.render({ queueDepth: 0, inFlight: 0 })).toContain(
      'multigrid_spend_usd_total{provider="pool"} 0.4',
    )
  })
})
