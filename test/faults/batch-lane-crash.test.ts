/**
 * The gateway process killed with SIGKILL while its batch lane forms and follows provider batches
 * (docs/batch-lanes.md), and restarted on the same store: no chunk is created twice upstream (each
 * `metadata.mg_chunk` once), no line is sent in two provider batches, and the batch completes with
 * one result per line, billed exactly the sum of its lines at the lane's prices.
 */
import { describe, expect, test } from 'bun:test'
import { startSimulator } from '../../src/simulator/server.ts'
import { dropTestSchema, freshSchemaUrl, STORES, TEST_DATABASE_URL } from '../helpers/gateway.ts'
import { processEnv, restartableGateway } from '../helpers/process-gateway.ts'
import { laneCatalog } from '../helpers/lane-catalog.ts'

const LINES = 40
const KILLS = 3

for (const storeKind of STORES) {
  describe(`SIGKILL while provider batches run (${storeKind})`, () => {
    test(`${KILLS} kills: no chunk created twice, every line once, billed exactly`, async () => {
      const sim = await startSimulator({ latencyMs: 2, batchTurnaroundMs: 1_500 })
      const env = processEnv('mg-lane-kill-', laneCatalog(sim.url, 'http://127.0.0.1:9'), {
        MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
        // A dead instance's chunks are looked at again a second after its last look.
        MULTIGRID_LEASE_SECONDS: '1',
      })
      if (storeKind === 'postgres') env.DATABASE_URL = freshSchemaUrl(TEST_DATABASE_URL!).url
      const gateway = await restartableGateway(env)
      try {
        const account = { ...(await gateway.account('k', '10')), credit: '10' }
        const { headers } = account
        const lines = Array.from({ length: LINES }, (_, i) => ({
          custom_id: `kill-${i}`,
          method: 'POST',
          url: '/v1/chat/completions',
          body: {
            model: 'lane/chat',
            max_tokens: 16,
            messages: [{ role: 'user', content: `q ${i}` }],
          },
        }))
        const id = await gateway.submit(lines, headers)

        for (let kill = 0; kill < KILLS; kill++) {
          // Random moments while chunks are formed and followed.
          await Bun.sleep(150 + Math.floor(Math.random() * 600))
          expect(await gateway.kill('SIGKILL')).not.toBe(0)
          await gateway.restart()
        }
        const batch = await gateway.batchEnd(id, headers)
        expect(batch.status).toBe('completed')
        expect(batch.request_counts.succeeded).toBe(LINES)

        const jobs = sim.batches().jobs
        const chunkIds = jobs.map((job) => job.metadata?.mg_chunk)
        expect(new Set(chunkIds).size).toBe(chunkIds.length)
        // Every line in exactly one provider batch: their sizes add up to the file.
        expect(jobs.reduce((sum, job) => sum + job.customIds.length, 0)).toBe(LINES)
        expect(sim.stats().byPath['/v1/chat/completions'] ?? 0).toBe(0)

        // Billed exactly the sum of its lines at the lane's prices, nothing held.
        const rows = await gateway.chargedResults<{
          line: number
          provider: string
          cost_usd: string
        }>(batch, account)
        expect(rows.map((row) => row.line)).toEqual(Array.from({ length: LINES }, (_, i) => i + 1))
        for (const row of rows) expect(row.provider).toBe('sim:batch')
      } finally {
        await gateway.kill('SIGKILL')
        await sim.stop()
        if (env.DATABASE_URL) await dropTestSchema(env.DATABASE_URL)
      }
    }, 120_000)
  })
}
