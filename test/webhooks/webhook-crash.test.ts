/**
 * Two gateway processes on one PostgreSQL deliver the same account's webhooks: each event reaches
 * each webhook once while both run, and when the instance in the middle of a delivery is killed
 * with SIGKILL, the other sends it after the dead one's lease runs out, with the same webhook-id,
 * and nothing else twice. Needs TEST_DATABASE_URL (SQLite is one process only).
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { startSimulator } from '../../src/simulator/server.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import {
  ADMIN_TOKEN,
  chatLine,
  dropTestSchema,
  freshSchemaUrl,
  jsonl,
  TEST_DATABASE_URL,
} from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess, type GatewayProcess } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { startWebhookReceiver, type Answer } from '../helpers/webhook-receiver.ts'

/** An attempt's timeout; a lease is twice it, so the survivor takes over 6 s after the claim. */
const TIMEOUT_MS = 3_000

/** Which of `pids` has the TCP socket whose local port is `port` (Linux /proc). */
function pidOfLocalPort(port: number, pids: number[]): number | null {
  const hex = port.toString(16).toUpperCase().padStart(4, '0')
  const inodes = new Set<string>()
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/)
      if (fields[1]?.endsWith(`:${hex}`)) inodes.add(fields[9]!)
    }
  }
  for (const pid of pids) {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      let target = ''
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`)
      } catch {}
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1]
      if (inode && inodes.has(inode)) return pid
    }
  }
  return null
}

describe('webhook deliveries across two instances, one killed mid-delivery', () => {
  if (!TEST_DATABASE_URL) {
    test.skip('needs TEST_DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/test', () => {})
    return
  }

  test('each event reaches each webhook once; the killed instance’s delivery is sent again with its webhook-id', async () => {
    const sim = await startSimulator({ latencyMs: 5 })
    let holdNext = false
    const receiver = startWebhookReceiver((path): Answer => {
      if (path === '/a' && holdNext) {
        holdNext = false
        return 'hold'
      }
      return 200
    })
    const databaseUrl = freshSchemaUrl(TEST_DATABASE_URL!).url
    const base = {
      HOST: '127.0.0.1',
      MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: `${sim.url}/v1` })),
      MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
      DATABASE_URL: databaseUrl,
      MULTIGRID_POLL_MS: '50',
      MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true',
      MULTIGRID_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      MULTIGRID_WEBHOOK_RETRY_BASE_MS: '200',
      LOG_LEVEL: 'error',
    }
    const spawn = () =>
      spawnGatewayProcess({
        ...base,
        PORT: String(freePort()),
        MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-hooks-')),
      })
    // The first applies the migrations; the second starts on a migrated schema.
    const first = await spawn()
    const gateways: GatewayProcess[] = [first, await spawn()]
    try {
      const call = (gateway: GatewayProcess, path: string, key: string, init: RequestInit = {}) =>
        fetch(`${gateway.url}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        })
      const account = (await (
        await call(first, '/admin/v1/accounts', ADMIN_TOKEN, {
          method: 'POST',
          body: JSON.stringify({ name: 'hooks', credit_usd: '5' }),
        })
      ).json()) as { id: string }
      const { key } = (await (
        await call(first, `/admin/v1/accounts/${account.id}/keys`, ADMIN_TOKEN, {
          method: 'POST',
          body: '{}',
        })
      ).json()) as { key: string }
      const hooks: Record<string, { id: string; secret: string }> = {}
      for (const path of ['/a', '/b']) {
        const created = await call(first, '/v1/webhooks', key, {
          method: 'POST',
          body: JSON.stringify({ url: `${receiver.url}${path}` }),
        })
        expect(created.status).toBe(201)
        hooks[path] = (await created.json()) as { id: string; secret: string }
      }
      const batches: string[] = []
      const submit = async (gateway: GatewayProcess) => {
        const response = await fetch(`${gateway.url}/v1/batches`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}` },
          body: jsonl([chatLine('q')]),
        })
        expect(response.status).toBe(201)
        batches.push(((await response.json()) as { id: string }).id)
      }
      const log = async (path: string) =>
        (
          (await (
            await call(gateways.at(-1)!, `/v1/webhooks/${hooks[path]!.id}/deliveries`, key)
          ).json()) as { data: { batch_id: string; status: string; attempts: number }[] }
        ).data
      const delivered = async (path: string) =>
        (await log(path)).filter((d) => d.status === 'delivered').length

      // Both instances run: six batches, submitted through both, twelve deliveries.
      for (let i = 0; i < 6; i++) await submit(gateways[i % 2]!)
      await waitFor('12 deliveries recorded', async () => {
        return (await delivered('/a')) === 6 && (await delivered('/b')) === 6
      })

      // The seventh batch's delivery to /a is held open by the receiver; its sender is killed.
      holdNext = true
      await submit(gateways[0]!)
      const held = await waitFor('the held delivery', async () =>
        receiver.received.find((r) => r.path === '/a' && !r.acked && r.remotePort),
      )
      const holder = pidOfLocalPort(
        held.remotePort!,
        gateways.map((g) => g.pid),
      )
      expect(holder).not.toBeNull()
      const victim = gateways.find((g) => g.pid === holder)!
      const survivor = gateways.find((g) => g !== victim)!
      // /b's delivery of the same event is recorded before the kill, so nothing else is in flight.
      await waitFor('/b’s seventh delivery recorded', async () => (await delivered('/b')) === 7)
      const killedAt = Date.now()
      await victim.kill('SIGKILL')
      gateways.splice(gateways.indexOf(victim), 1)

      await waitFor(
        'the survivor to send the held delivery again',
        async () => receiver.at('/a').filter((r) => r.acked).length === 7,
        4 * TIMEOUT_MS,
      )
      // Not before the dead instance's lease (twice the timeout from its claim) ran out.
      const resent = receiver.at('/a').at(-1)!
      expect(resent.at - held.at).toBeGreaterThanOrEqual(2 * TIMEOUT_MS - 100)
      expect(resent.at).toBeGreaterThan(killedAt)
      expect(resent.headers['webhook-id']).toBe(held.headers['webhook-id'])
      expect(JSON.parse(resent.body)).toEqual(JSON.parse(held.body))

      await Bun.sleep(500)
      const openai = new OpenAI({ apiKey: key, baseURL: `${survivor.url}/openai/v1` })
      for (const path of ['/a', '/b']) {
        const acked = receiver.at(path).filter((r) => r.acked)
        const ids = acked.map((r) => r.headers['webhook-id'])
        // Each event once per webhook, for all seven batches.
        expect(new Set(ids).size).toBe(7)
        expect(ids).toHaveLength(7)
        const about = await Promise.all(
          acked.map(async (r) => {
            const event = (await openai.webhooks.unwrap(
              r.body,
              r.headers,
              hooks[path]!.secret,
            )) as {
              data: { id: string }
            }
            return event.data.id
          }),
        )
        expect(about.sort()).toEqual([...batches].sort())
      }
      // Sent twice, once held and dropped by the kill, once answered: the one held; nothing else.
      expect(receiver.at('/a')).toHaveLength(8)
      expect(receiver.at('/b')).toHaveLength(7)
      // Recorded just after the receiver's answer.
      const entries = await waitFor('all seven recorded', async () => {
        const all = await log('/a')
        return all.every((d) => d.status === 'delivered') ? all : null
      })
      expect(entries).toHaveLength(7)
      expect(entries.find((d) => d.batch_id === batches[6])!.attempts).toBe(2)
      expect(entries.filter((d) => d.attempts === 1)).toHaveLength(6)
    } finally {
      for (const gateway of gateways) await gateway.kill('SIGTERM')
      await receiver.stop()
      await sim.stop()
      await dropTestSchema(databaseUrl)
    }
  }, 90_000)
})
