/**
 * The gateway on the embedded store SIGKILLed with lines in flight at a slow provider, and
 * restarted with the default lease (30 s): the restarted gateway holds the data dir's lock, so
 * the lines the dead run held go back to pending at start-up and are sent again within seconds,
 * not once their lease runs out. The batch completes, each line billed once, the balance exact.
 * (The lines of a provider batch stay with it: test/faults/batch-lane-crash.test.ts.)
 */
import { describe, expect, test } from 'bun:test'
import { startSimulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { chatLine } from '../helpers/gateway.ts'
import { processEnv, restartableGateway } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

const LINES = 200
const CONCURRENCY = 32
const CREDIT = '10'
/** Slow enough that the kill finds a full provider's worth of lines upstream. */
const LATENCY_MS = 3_000
/** Far below the default 30 s lease: before the fix nothing was sent again for 30 s. */
const RESEND_WITHIN_MS = 10_000

describe('SIGKILL and restart on the embedded store (default lease)', () => {
  test('the dead run’s lines are sent again within seconds, each billed once', async () => {
    const sim = await startSimulator({ latencyMs: LATENCY_MS })
    // The default lease (MULTIGRID_LEASE_SECONDS unset): 30 s.
    const gateway = await restartableGateway(
      processEnv(
        'mg-restart-leases-',
        testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: CONCURRENCY }),
      ),
    )
    try {
      const { accountId, headers } = await gateway.account('restart', CREDIT)
      const lines = Array.from({ length: LINES }, (_, i) => chatLine(`r-${i}`, `restart line ${i}`))
      const id = await gateway.submit(lines, headers)

      await waitFor('a full provider of lines in flight', async () =>
        sim.stats().inFlight >= CONCURRENCY ? true : null,
      )
      const inFlight = sim.stats().inFlight
      expect(await gateway.kill('SIGKILL')).not.toBe(0)
      const restarted = Date.now()
      await gateway.restart()
      await waitFor(
        'a line of the dead run to be sent again',
        async () => (sim.stats().maxPromptCount >= 2 ? true : null),
        RESEND_WITHIN_MS,
      )
      const resentAfterMs = Date.now() - restarted
      sim.configure({ latencyMs: 5 })

      const batch = await gateway.batchEnd(id, headers)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({ total: LINES, succeeded: LINES, running: 0 })

      // One result per line, each billed once: the balance is the credit less their sum, exactly.
      const rows = await gateway.chargedResults<{ line: number; status: string; cost_usd: string }>(
        batch,
        {
          accountId,
          headers,
          credit: CREDIT,
        },
      )
      expect(rows.map((row) => row.line)).toEqual(lines.map((_, i) => i + 1))
      expect(rows.every((row) => row.status === 'succeeded')).toBe(true)

      // Only the lines upstream at the kill went again, each once more.
      const stats = sim.stats()
      const twice = Object.values(stats.promptCounts).filter((count) => count === 2).length
      expect(Object.keys(stats.promptCounts)).toHaveLength(LINES)
      expect(stats.maxPromptCount).toBe(2)
      expect(twice).toBeLessThanOrEqual(inFlight)
      console.log(
        `SIGKILL with ${inFlight} lines upstream at ${LATENCY_MS} ms: first sent again ` +
          `${resentAfterMs} ms after the restart began; ${twice} lines sent twice`,
      )
    } finally {
      await gateway.kill('SIGKILL')
      await sim.stop()
    }
  }, 120_000)
})
