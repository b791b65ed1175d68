/**
 * docs/live.md: a whole (not streamed) live call whose caller hangs up. Once sent, the provider
 * bills it whether or not anyone reads the answer, so it runs to its end and is billed; before,
 * the gateway cut the upstream call off and billed nothing. A caller that hangs up while its call
 * still waits for a provider's slot takes it out of the queue: nothing is sent, nothing billed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { STORES, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

type AccountView = { balance_usd: string; held_usd: string }

const body = JSON.stringify({
  model: 'sim/chat',
  messages: [{ role: 'user', content: 'a story, please' }],
  max_tokens: 40,
})

for (const store of STORES) {
  describe(`a whole live call whose caller hangs up (${store})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let broken: Simulator
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 600 })
      // Answers 500 after 600 ms: a call to it falls back to sim.
      broken = await startSimulator({ latencyMs: 600, errorRate: 1 })
      // One call at a time to the provider: a second one waits for the slot.
      const catalog = testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 1 }) as {
        providers: Record<string, unknown>
        models: { id: string; offerings: unknown[] }[]
      }
      catalog.providers['sim-broken'] = { kind: 'openai', base_url: `${broken.url}/v1` }
      const chat = catalog.models.find((model) => model.id === 'sim/chat')!
      catalog.models.push({
        ...chat,
        id: 'sim/fallback',
        aliases: [],
        offerings: [
          { ...(chat.offerings[0] as object), provider: 'sim-broken' },
          chat.offerings[0],
        ],
      } as never)
      gw = await startTestGateway({
        store,
        catalog,
        env: { MULTIGRID_DISPATCH: '0', MULTIGRID_LIVE_LEASE_IDLE_MS: '300' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
      await broken.stop()
    })

    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as AccountView
    /** Sends the call; `hangUp` decides when the caller leaves (never: it reads the answer). */
    const call = (key: string, hangUp?: AbortSignal, sent = body) =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: sent,
        signal: hangUp,
      }).then(
        async (response) => ({ status: response.status, json: await response.json() }),
        () => null,
      )
    /** What the account was charged once its calls settled and the lease went back. */
    const charged = async (accountId: string) => {
      await waitFor(
        'the lease handed back',
        async () => (await account(accountId)).held_usd === '0.000000',
        10_000,
        50,
      )
      await gw.credit.flush()
      return new Decimal(1).minus((await account(accountId)).balance_usd)
    }

    test('once sent, it runs to its end and is billed what the answer cost', async () => {
      const reader = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
      const read = await call(reader.key)
      expect(read!.status).toBe(200)
      const readCost = await charged(reader.accountId)
      expect(readCost.greaterThan(0)).toBe(true)

      const leaver = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
      const before = sim.stats().requests
      const hangUp = new AbortController()
      const left = call(leaver.key, hangUp.signal)
      await waitFor('the call upstream', async () => sim.stats().inFlight === 1, 5_000, 5)
      hangUp.abort()
      expect(await left).toBeNull()
      // The simulator answers the same prompt the same way: the same cost, to the digit.
      expect((await charged(leaver.accountId)).toFixed()).toBe(readCost.toFixed())
      expect(sim.stats().requests - before).toBe(1)
      expect(sim.stats().byStatus['200']).toBeGreaterThanOrEqual(2)
    })

    test('while it waits for a slot, hanging up takes it out of the queue: nothing sent or billed', async () => {
      const first = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
      const waiting = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
      const before = sim.stats().requests
      const holder = call(first.key)
      await waitFor('the first call upstream', async () => sim.stats().inFlight === 1, 5_000, 5)
      const hangUp = new AbortController()
      const queued = call(waiting.key, hangUp.signal)
      await Bun.sleep(100)
      hangUp.abort()
      expect(await queued).toBeNull()
      expect((await holder)!.status).toBe(200)
      // The slot freed: had the queued call stayed in the queue, it would have gone out now.
      await Bun.sleep(300)
      expect(sim.stats().requests - before).toBe(1)
      expect((await charged(waiting.accountId)).toFixed()).toBe('0')
      expect((await charged(first.accountId)).greaterThan(0)).toBe(true)
    })

    test('a caller gone when its first offering fails gets no fallback call: nothing more sent or billed', async () => {
      const { key, accountId } = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
      const before = { broken: broken.stats().requests, sim: sim.stats().requests }
      const hangUp = new AbortController()
      const left = call(key, hangUp.signal, body.replace('sim/chat', 'sim/fallback'))
      await waitFor('the first call upstream', async () => broken.stats().inFlight === 1, 5_000, 5)
      hangUp.abort()
      expect(await left).toBeNull()
      await waitFor('the first call over', async () => broken.stats().inFlight === 0, 5_000, 5)
      await Bun.sleep(300)
      expect(broken.stats().requests - before.broken).toBe(1)
      expect(sim.stats().requests - before.sim).toBe(0)
      expect((await charged(accountId)).toFixed()).toBe('0')
    })
  })
}
