/**
 * Limits that hold for the fleet, not per instance: one key's requests per minute counted in
 * Redis across instances, and the open-batch limit and credit hold under concurrent submits to
 * different instances. And when Redis goes away, requests are still served, logged once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chatLine, jsonl, startTestGateway } from '../helpers/gateway.ts'
import { freePort } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { describeScale, fleetTest, startFleet, type Fleet } from './fleet.ts'

/** Fixed one-minute windows: a burst that straddles a boundary is counted in two. */
async function awayFromWindowEdge(needMs: number) {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < needMs) await Bun.sleep(left + 50)
}

const get = (fleet: Fleet, index: number, key: string, path = '/v1/batches') =>
  fetch(`${fleet.urls[index]}${path}`, { headers: { authorization: `Bearer ${key}` } })

describeScale('scale: fleet limits', () => {
  // API-only instances: nothing dispatches, so admitted batches stay open and held.
  let fleet: Fleet
  beforeAll(async () => {
    fleet = await startFleet({
      instances: 2,
      openai: 'http://127.0.0.1:9/v1',
      env: { MULTIGRID_DISPATCH: '0' },
    })
  })
  afterAll(async () => {
    await fleet?.stop()
  })
  const withFleet = fleetTest(() => fleet, 30_000)

  withFleet(
    '200 concurrent requests of one key across instances: exactly the limit pass, the rest 429',
    async () => {
      const { accountId } = await fleet.newAccount('1')
      const made = await fleet.admin(`/accounts/${accountId}/keys`, { rate_limit_per_minute: 50 })
      const { key } = (await made.json()) as { key: string }
      await awayFromWindowEdge(3_000)
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, i) => get(fleet, i % 2, key)),
      )
      const statuses = answers.map((r) => r.status)
      expect(statuses.filter((s) => s === 200)).toHaveLength(50)
      expect(statuses.filter((s) => s === 429)).toHaveLength(150)
      for (const answer of answers) {
        expect(answer.headers.get('x-ratelimit-limit')).toBe('50')
        if (answer.status === 429) {
          expect(answer.headers.get('x-ratelimit-remaining')).toBe('0')
          expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0)
          expect(((await answer.json()) as { error: { code: string } }).error.code).toBe(
            'rate_limit_exceeded',
          )
        } else await answer.arrayBuffer()
      }
      // Each instance got 100 of them: counting on its own, each would have let 50 through.
    },
  )

  withFleet(
    'X-RateLimit-Remaining counts down across instances, one request at a time',
    async () => {
      const { accountId } = await fleet.newAccount('1')
      const made = await fleet.admin(`/accounts/${accountId}/keys`, { rate_limit_per_minute: 10 })
      const { key } = (await made.json()) as { key: string }
      await awayFromWindowEdge(2_000)
      const remaining: string[] = []
      for (let i = 0; i < 12; i++) {
        const answer = await get(fleet, i % 2, key)
        remaining.push(answer.headers.get('x-ratelimit-remaining')!)
        expect(answer.status).toBe(i < 10 ? 200 : 429)
        expect(Number(answer.headers.get('x-ratelimit-reset'))).toBeLessThanOrEqual(60)
        await answer.arrayBuffer()
      }
      expect(remaining).toEqual(['9', '8', '7', '6', '5', '4', '3', '2', '1', '0', '0', '0'])
    },
  )

  withFleet(
    'two concurrent submits to different instances that together exceed the credit: exactly one is admitted',
    async () => {
      const file = jsonl(
        Array.from({ length: 50 }, (_, i) =>
          chatLine(`c-${i}`, `credit line ${i}`, { max_tokens: 4000 }),
        ),
      )
      const probe = await fleet.newAccount('1000')
      const quote = await fetch(`${fleet.urls[0]}/v1/batches?dry_run=true`, {
        method: 'POST',
        headers: { authorization: `Bearer ${probe.key}`, 'content-type': 'application/jsonl' },
        body: file,
      })
      const ceiling = Number(
        ((await quote.json()) as { cost_ceiling_usd: string }).cost_ceiling_usd,
      )
      // Rounds, each on a fresh account: a race has to be lost every time to pass by luck.
      for (let round = 0; round < 8; round++) {
        const { accountId, key } = await fleet.newAccount((ceiling * 1.5).toFixed(6))
        const answers = await Promise.all([fleet.submit(0, key, file), fleet.submit(1, key, file)])
        const statuses = answers.map((r) => r.status).sort()
        expect(statuses).toEqual([201, 402])
        const refused = answers.find((r) => r.status === 402)!
        expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
          'insufficient_quota',
        )
        const [account] =
          await fleet.sql`SELECT balance_usd, held_usd FROM accounts WHERE id = ${accountId}`
        expect(Number(account.held_usd)).toBeCloseTo(ceiling, 6)
        const [{ n }] =
          await fleet.sql`SELECT count(*)::int AS n FROM batches WHERE account_id = ${accountId}`
        expect(n).toBe(1)
      }
    },
  )

  withFleet(
    'two concurrent submits to different instances with one open batch left: exactly one is admitted',
    async () => {
      const file = jsonl([chatLine('o-1', 'open batch line')])
      for (let round = 0; round < 8; round++) {
        const { accountId, key } = await fleet.newAccount('100', { max_open_batches: 1 })
        const answers = await Promise.all([fleet.submit(0, key, file), fleet.submit(1, key, file)])
        expect(answers.map((r) => r.status).sort()).toEqual([201, 429])
        const refused = (await answers.find((r) => r.status === 429)!.json()) as {
          error: { code: string; limit: unknown }
        }
        expect(refused.error.code).toBe('limit_exceeded')
        expect(refused.error.limit).toEqual({ open_batches: 1, in_use: 1 })
        const [{ n }] =
          await fleet.sql`SELECT count(*)::int AS n FROM batches WHERE account_id = ${accountId}`
        expect(n).toBe(1)
      }
    },
  )
})

describe('scale: Redis goes away', () => {
  test('requests are still served, counted per instance, and the outage is logged once', async () => {
    // A Redis of this test's own, so stopping it disturbs nothing else.
    const port = freePort()
    const start = () =>
      Bun.spawn(
        [
          'redis-server',
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
        ],
        { stdout: 'ignore', stderr: 'ignore' },
      )
    let redis = start()
    const logLines: string[] = []
    let gw: Awaited<ReturnType<typeof startTestGateway>> | null = null
    try {
      await waitFor(
        'private redis',
        async () =>
          Bun.spawnSync(['redis-cli', '-p', String(port), 'ping'])
            .stdout.toString()
            .includes('PONG'),
        5_000,
      )
      gw = await startTestGateway({
        env: { REDIS_URL: `redis://127.0.0.1:${port}`, LOG_LEVEL: 'info' },
        logLines,
      })
      const { key } = await gw.newAccount('1', { rate_limit_per_minute: 1000 })
      await awayFromWindowEdge(6_000)
      const remaining = async () => {
        const answer = await gw!.request('/v1/batches', key)
        expect(answer.status).toBe(200)
        await answer.arrayBuffer()
        return Number(answer.headers.get('x-ratelimit-remaining'))
      }
      expect(await remaining()).toBe(999)
      expect(await remaining()).toBe(998)
      redis.kill('SIGKILL')
      await redis.exited
      // Served throughout, counted by this instance alone (its own window starts afresh).
      const during: number[] = []
      for (let i = 0; i < 20; i++) during.push(await remaining())
      expect(during.at(-1)!).toBeLessThan(during[0])
      const events = (name: string) => logLines.filter((line) => line.includes(`"${name}"`))
      expect(events('rate_limiter.redis_unreachable')).toHaveLength(1)
      expect(events('fleet_gate.redis_unreachable').length).toBeLessThanOrEqual(1)
      // Back again: counted in Redis once more (its counter survived nothing: a fresh server).
      redis = start()
      await waitFor(
        'the limiter to reconnect',
        async () => events('rate_limiter.redis_recovered').length > 0,
        10_000,
      )
      expect(await remaining()).toBe(999)
      expect(events('rate_limiter.redis_unreachable')).toHaveLength(1)
    } finally {
      await gw?.stop()
      redis.kill('SIGKILL')
      await redis.exited
    }
  }, 30_000)
})
