/**
 * The gateway process killed with SIGKILL five times at random moments while a 5,000-line batch
 * runs, and restarted each time: every line ends in exactly one final state, the results have one
 * line per input line in order, the account is charged exactly the sum of the recorded line costs,
 * and no line went upstream more than twice. On SQLite, and on PostgreSQL when configured.
 */
import { describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import {
  chatLine,
  dropTestSchema,
  freshSchemaUrl,
  STORES,
  TEST_DATABASE_URL,
} from '../helpers/gateway.ts'
import { processEnv, restartableGateway, type BatchView } from '../helpers/process-gateway.ts'

const LINES = 5_000
const KILLS = 5
const CREDIT = '10'
/**
 * 16 in flight at 60 ms each: at most ~270 lines/s, so the batch needs ≥ 18 s of uptime and all
 * five kills (each 1.2–2 s after the last restart) land while it runs. After the last restart
 * the simulator speeds up, so the rest of the batch does not keep the suite waiting.
 */
const CONCURRENCY = 16
const LATENCY_MS = 60

interface Row {
  custom_id: string
  line: number
  status: string
  cost_usd?: string
  attempts?: number
}

for (const storeKind of STORES) {
  describe(`SIGKILL five times (${storeKind})`, () => {
    test(`a ${LINES}-line batch survives ${KILLS} kills: every line once, billed exactly`, async () => {
      const sim = await startSimulator({ latencyMs: LATENCY_MS })
      const env = processEnv(
        'mg-kill-',
        testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: CONCURRENCY }),
        // A dead instance's lines are claimed again a second after its last heartbeat.
        { MULTIGRID_LEASE_SECONDS: '1' },
      )
      if (storeKind === 'postgres') env.DATABASE_URL = freshSchemaUrl(TEST_DATABASE_URL!).url
      const gateway = await restartableGateway(env)
      try {
        const { accountId, headers } = await gateway.account('crash', CREDIT)
        const batchOf = async (id: string) =>
          (await (await fetch(`${gateway.url}/v1/batches/${id}`, { headers })).json()) as BatchView
        const lines = Array.from({ length: LINES }, (_, i) => chatLine(`k-${i}`, `crash line ${i}`))
        const id = await gateway.submit(lines, headers)

        const kills: { afterMs: number; succeeded: number; restartMs: number }[] = []
        for (let kill = 0; kill < KILLS; kill++) {
          // Random, but never sooner than the previous instance's leases can have run out and its
          // lines been sent again: a line is in flight at two kills only if it is slow to return.
          const afterMs = 1_200 + Math.floor(Math.random() * 800)
          await Bun.sleep(afterMs)
          const before = await batchOf(id)
          expect(before.status).toBe('in_progress')
          expect(await gateway.kill('SIGKILL')).not.toBe(0)
          const restarted = Date.now()
          await gateway.restart()
          kills.push({
            afterMs,
            succeeded: before.request_counts.succeeded,
            restartMs: Date.now() - restarted,
          })
        }
        // Each restart found the batch further along.
        for (let i = 1; i < kills.length; i++)
          expect(kills[i].succeeded).toBeGreaterThan(kills[i - 1].succeeded)
        sim.configure({ latencyMs: 5 })

        const batch = await gateway.batchEnd(id, headers)
        expect(batch.status).toBe('completed')
        expect(batch.request_counts).toMatchObject({
          total: LINES,
          succeeded: LINES,
          pending: 0,
          running: 0,
          failed: 0,
        })

        // Charged exactly the sum of what was recorded, to the last digit; nothing still held.
        const rows = await gateway.chargedResults<Row>(batch, {
          accountId,
          headers,
          credit: CREDIT,
        })
        // One result per input line, in order, each in one final state.
        expect(rows).toHaveLength(LINES)
        expect(rows.map((row) => row.custom_id)).toEqual(lines.map((line) => line.custom_id))
        expect(rows.map((row) => row.line)).toEqual(lines.map((_, i) => i + 1))
        expect(rows.every((row) => row.status === 'succeeded')).toBe(true)

        const sum = rows.reduce((total, row) => total.plus(row.cost_usd!), new Decimal(0))

        // Only lines in flight (or answered and not yet recorded) at a kill went upstream again,
        // each once more for every kill it was caught at. A line sent again after one kill can
        // still be in flight at the next when the machine is slow (a 1 s lease, kills 1.2-2 s
        // apart), so a third send is possible; more sends than kills allow is not.
        const stats = sim.stats()
        const counts = Object.values(stats.promptCounts)
        const twice = counts.filter((count) => count === 2).length
        const resent = counts.reduce((sum, count) => sum + count - 1, 0)
        expect(Object.keys(stats.promptCounts)).toHaveLength(LINES)
        expect(stats.maxPromptCount).toBeLessThanOrEqual(1 + KILLS)
        console.log(
          `SIGKILL ×${KILLS} (${storeKind}): kills after ${kills.map((k) => k.afterMs).join('/')} ms at ` +
            `${kills.map((k) => k.succeeded).join('/')} lines done; restarts took ` +
            `${kills.map((k) => k.restartMs).join('/')} ms; ${twice} lines sent twice, ${resent} sends again in all; ` +
            `charged $${sum.toFixed()} = sum of ${LINES} line costs`,
        )
      } finally {
        await gateway.kill('SIGTERM')
        await sim.stop()
        if (env.DATABASE_URL) await dropTestSchema(env.DATABASE_URL)
      }
    }, 120_000)
  })
}
