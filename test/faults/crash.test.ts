/**
 * The gateway process killed with SIGKILL five times at random moments while a 5,000-line batch
 * runs, and restarted each time: every line ends in exactly one final state, the results have one
 * line per input line in order, the account is charged exactly the sum of the recorded line costs,
 * and no line went upstream more than twice. On SQLite, and on PostgreSQL when configured.
 */
import { describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator } from '../../src/simulator/server.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import {
  ADMIN_TOKEN,
  chatLine,
  dropTestSchema,
  freshSchemaUrl,
  jsonl,
  STORES,
  TEST_DATABASE_URL,
} from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess, type GatewayProcess } from '../helpers/process-gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

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

interface Batch {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
}
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
      const env: Record<string, string> = {
        PORT: String(freePort()),
        HOST: '127.0.0.1',
        MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-kill-')),
        MULTIGRID_CONFIG: writeCatalog(
          testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: CONCURRENCY }),
        ),
        MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
        // A dead instance's lines are claimed again a second after its last heartbeat.
        MULTIGRID_LEASE_SECONDS: '1',
        MULTIGRID_POLL_MS: '50',
        LOG_LEVEL: 'error',
      }
      if (storeKind === 'postgres') env.DATABASE_URL = freshSchemaUrl(TEST_DATABASE_URL!).url
      let gateway: GatewayProcess = await spawnGatewayProcess(env)
      const admin = (path: string, body?: unknown) =>
        fetch(`${gateway.url}/admin/v1${path}`, {
          method: body ? 'POST' : 'GET',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: body ? JSON.stringify(body) : undefined,
        })
      try {
        const account = (await (
          await admin('/accounts', { name: 'crash', credit_usd: CREDIT })
        ).json()) as { id: string }
        const { key } = (await (
          await admin(`/accounts/${account.id}/keys`, { rate_limit_per_minute: 1_000_000 })
        ).json()) as { key: string }
        const headers = { authorization: `Bearer ${key}` }
        const batchOf = async (id: string) =>
          (await (await fetch(`${gateway.url}/v1/batches/${id}`, { headers })).json()) as Batch
        const lines = Array.from({ length: LINES }, (_, i) => chatLine(`k-${i}`, `crash line ${i}`))
        const submitted = await fetch(`${gateway.url}/v1/batches`, {
          method: 'POST',
          headers,
          body: jsonl(lines),
        })
        expect(submitted.status).toBe(201)
        const { id } = (await submitted.json()) as Batch

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
          gateway = await spawnGatewayProcess(env)
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

        const batch = await waitFor(
          'the batch to finish after the last restart',
          async () => {
            const view = await batchOf(id)
            return FINAL_BATCH.includes(view.status) ? view : null
          },
          60_000,
          100,
        )
        expect(batch.status).toBe('completed')
        expect(batch.request_counts).toMatchObject({
          total: LINES,
          succeeded: LINES,
          pending: 0,
          running: 0,
          failed: 0,
        })

        // One result per input line, in order, each in one final state.
        const text = await (
          await fetch(`${gateway.url}/v1/batches/${id}/results`, { headers })
        ).text()
        const rows = text
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as Row)
        expect(rows).toHaveLength(LINES)
        expect(rows.map((row) => row.custom_id)).toEqual(lines.map((line) => line.custom_id))
        expect(rows.map((row) => row.line)).toEqual(lines.map((_, i) => i + 1))
        expect(rows.every((row) => row.status === 'succeeded')).toBe(true)

        // Charged exactly the sum of what was recorded, to the last digit; nothing still held.
        const sum = rows.reduce((total, row) => total.plus(row.cost_usd!), new Decimal(0))
        const view = (await (await admin(`/accounts/${account.id}`)).json()) as Record<
          string,
          string
        >
        expect(view.held_usd).toBe('0.000000')
        expect(new Decimal(CREDIT).minus(view.balance_usd).equals(sum)).toBe(true)
        expect(new Decimal(batch.cost_usd).equals(sum)).toBe(true)

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
