/**
 * The gateway process killed with SIGKILL while its batch lane forms and follows provider batches
 * (docs/batch-lanes.md), and restarted on the same store: no chunk is created twice upstream (each
 * `metadata.mg_chunk` once), no line is sent in two provider batches, and the batch completes with
 * one result per line, billed exactly the sum of its lines at the lane's prices.
 */
import { describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator } from '../../src/simulator/server.ts'
import { writeCatalog } from '../helpers/catalog.ts'
import {
  ADMIN_TOKEN,
  dropTestSchema,
  freshSchemaUrl,
  jsonl,
  STORES,
  TEST_DATABASE_URL,
} from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess, type GatewayProcess } from '../helpers/process-gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { laneCatalog } from '../helpers/lane-catalog.ts'

const LINES = 40
const KILLS = 3

interface Batch {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
}

for (const storeKind of STORES) {
  describe(`SIGKILL while provider batches run (${storeKind})`, () => {
    test(`${KILLS} kills: no chunk created twice, every line once, billed exactly`, async () => {
      const sim = await startSimulator({ latencyMs: 2, batchTurnaroundMs: 1_500 })
      const env: Record<string, string> = {
        PORT: String(freePort()),
        HOST: '127.0.0.1',
        MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-lane-kill-')),
        MULTIGRID_CONFIG: writeCatalog(laneCatalog(sim.url, 'http://127.0.0.1:9')),
        MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
        MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
        // A dead instance's chunks are looked at again a second after its last look.
        MULTIGRID_LEASE_SECONDS: '1',
        MULTIGRID_POLL_MS: '50',
        LOG_LEVEL: 'error',
      }
      if (storeKind === 'postgres') env.DATABASE_URL = freshSchemaUrl(TEST_DATABASE_URL!).url
      let gateway: GatewayProcess = await spawnGatewayProcess(env)
      try {
        const admin = (path: string, body: unknown) =>
          fetch(`${gateway.url}/admin/v1${path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          })
        const account = (await (
          await admin('/accounts', { name: 'k', credit_usd: '10' })
        ).json()) as {
          id: string
        }
        const { key } = (await (
          await admin(`/accounts/${account.id}/keys`, { rate_limit_per_minute: 100_000 })
        ).json()) as { key: string }
        const headers = { authorization: `Bearer ${key}` }
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
        const submitted = await fetch(`${gateway.url}/v1/batches`, {
          method: 'POST',
          headers,
          body: jsonl(lines),
        })
        expect(submitted.status).toBe(201)
        const { id } = (await submitted.json()) as Batch

        for (let kill = 0; kill < KILLS; kill++) {
          // Random moments while chunks are formed and followed.
          await Bun.sleep(150 + Math.floor(Math.random() * 600))
          expect(await gateway.kill('SIGKILL')).not.toBe(0)
          gateway = await spawnGatewayProcess(env)
        }
        const batch = await waitFor(
          'the batch to finish after the last restart',
          async () => {
            const view = (await (
              await fetch(`${gateway.url}/v1/batches/${id}`, { headers })
            ).json()) as Batch
            return FINAL_BATCH.includes(view.status) ? view : null
          },
          60_000,
          100,
        )
        expect(batch.status).toBe('completed')
        expect(batch.request_counts.succeeded).toBe(LINES)

        const jobs = sim.batches().jobs
        const chunkIds = jobs.map((job) => job.metadata?.mg_chunk)
        expect(new Set(chunkIds).size).toBe(chunkIds.length)
        // Every line in exactly one provider batch: their sizes add up to the file.
        expect(jobs.reduce((sum, job) => sum + job.customIds.length, 0)).toBe(LINES)
        expect(sim.stats().byPath['/v1/chat/completions'] ?? 0).toBe(0)

        const text = await (
          await fetch(`${gateway.url}/v1/batches/${id}/results`, { headers })
        ).text()
        const rows = text
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as { line: number; provider: string; cost_usd: string })
        expect(rows.map((row) => row.line)).toEqual(Array.from({ length: LINES }, (_, i) => i + 1))
        const total = rows.reduce((sum, row) => sum.plus(row.cost_usd), new Decimal(0))
        expect(new Decimal(batch.cost_usd).eq(total)).toBe(true)
        for (const row of rows) expect(row.provider).toBe('sim:batch')
      } finally {
        await gateway.kill('SIGKILL')
        await sim.stop()
        if (env.DATABASE_URL) await dropTestSchema(env.DATABASE_URL)
      }
    }, 120_000)
  })
}
