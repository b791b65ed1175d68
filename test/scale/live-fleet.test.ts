/**
 * Live holds across a fleet (docs/live.md): two or three gateway processes on one PostgreSQL and one
 * Redis. The credit an instance leases is a hold every instance sees, so concurrent calls spread
 * over the fleet get at most what the credit covers; a killed instance's lease expires by itself;
 * a SIGKILL during traffic loses at most one group interval of charges of answers already
 * delivered and never charges twice; a key revoked on one instance is refused on another at once.
 */
import { afterAll, beforeAll, expect } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { ADMIN_TOKEN } from '../helpers/gateway.ts'
import {
  issueRequest,
  liveCall,
  liveCatalogFile,
  sumCosts,
  type LiveAnswer,
  trafficUntilKilled,
  expectKillCostWithinOneInterval,
} from '../helpers/live-calls.ts'
import { waitFor } from '../helpers/wait.ts'
import { describeScale, fleetTest, startFleet, type Fleet } from './fleet.ts'

type AccountView = { balance_usd: string; held_usd: string; available_usd: string }

const CHARGE_INTERVAL_MS = 250
const LEASE_TTL_MS = 2_000

describeScale('scale: live holds across a fleet', () => {
  let slow: Simulator
  let openai: Simulator
  let fleet: Fleet
  beforeAll(async () => {
    openai = await startSimulator({ latencyMs: 2 })
    slow = await startSimulator({ latencyMs: 500, requireApiKey: 'sk-ant-test-secret' })
    fleet = await startFleet({
      instances: 3,
      openai: `${openai.url}/v1`,
      env: {
        MULTIGRID_DISPATCH: '0',
        MULTIGRID_CONFIG: liveCatalogFile({ openai: `${openai.url}/v1`, anthropic: slow.url }),
        MULTIGRID_LIVE_CHARGE_INTERVAL_MS: String(CHARGE_INTERVAL_MS),
        MULTIGRID_LIVE_LEASE_TTL_MS: String(LEASE_TTL_MS),
        MULTIGRID_LIVE_LEASE_IDLE_MS: '1000',
      },
    })
  }, 60_000)
  afterAll(async () => {
    await fleet?.stop()
    await slow?.stop()
    await openai?.stop()
  }, 30_000)
  const withFleet = fleetTest(() => fleet, 60_000)
  const account = async (id: string, index = 1) =>
    (await (await fleet.admin(`/accounts/${id}`, undefined, index)).json()) as AccountView
  const chargedBy = async (id: string, credit: string) =>
    new Decimal(credit).minus((await account(id)).balance_usd)

  for (const stream of [false, true]) {
    withFleet(
      `100 concurrent calls${stream ? ' (stream: true)' : ''} over two instances on $0.002: answers bounded by the credit across both`,
      async () => {
        const credit = '0.002'
        const { key, accountId } = await fleet.newAccount(credit)
        const answers = await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            liveCall(fleet.urls[i % 2]!, key, issueRequest(stream, i)),
          ),
        )
        const answered = answers.filter((a) => a.status === 200)
        const refused = answers.filter((a) => a.status === 402)
        expect(answered.length + refused.length).toBe(100)
        const ceiling = new Decimal(refused[0]!.error!.cost_ceiling_usd!)
        expect(answered.length).toBeGreaterThanOrEqual(1)
        expect(answered.length).toBeLessThanOrEqual(
          new Decimal(credit).div(ceiling).floor().toNumber(),
        )
        // Both instances hand their leases back once idle; by then every charge is written.
        await waitFor(
          'both leases handed back',
          async () => (await account(accountId)).held_usd === '0.000000',
          10_000,
          100,
        )
        const charged = await chargedBy(accountId, credit)
        expect(charged.equals(sumCosts(answered))).toBe(true)
        console.log(
          `live holds (two instances${stream ? ', stream' : ''}): $${credit}, ceiling $${ceiling.toFixed()}: ${answered.length} answered, ${refused.length} refused 402, charged $${sumCosts(answered).toFixed()}`,
        )
        expect(new Decimal((await account(accountId)).balance_usd).greaterThanOrEqualTo(0)).toBe(
          true,
        )
      },
    )
  }

  withFleet(
    'a key revoked on one instance is refused on another at once, not when its cache entry is due',
    async () => {
      const { accountId } = await fleet.newAccount('1')
      const made = (await (await fleet.admin(`/accounts/${accountId}/keys`, {})).json()) as {
        id: string
        key: string
      }
      const models = () =>
        fetch(`${fleet.urls[1]}/v1/models`, { headers: { authorization: `Bearer ${made.key}` } })
      // Looked up on instance 1, so it is in that instance's cache.
      expect((await models()).status).toBe(200)
      expect((await models()).status).toBe(200)
      const revoked = await fetch(`${fleet.urls[0]}/admin/v1/keys/${made.id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      })
      expect(revoked.status).toBe(200)
      const started = performance.now()
      // Refused at once where it was revoked.
      expect(
        (
          await fetch(`${fleet.urls[0]}/v1/models`, {
            headers: { authorization: `Bearer ${made.key}` },
          })
        ).status,
      ).toBe(401)
      await waitFor(
        'instance 1 to refuse the revoked key',
        async () => (await models()).status === 401,
        5_000,
        20,
      )
      const elapsed = performance.now() - started
      // Told on the store's channel: a NOTIFY away, where the cache alone would serve it up to
      // MULTIGRID_KEY_CACHE_MS (1 s) after the lookups above.
      expect(elapsed).toBeLessThan(300)
      console.log(`revocation: refused on the other instance after ${Math.round(elapsed)} ms`)
    },
  )

  withFleet('the lease of a SIGKILLed instance expires by itself', async () => {
    const { key, accountId } = await fleet.newAccount('10')
    expect((await liveCall(fleet.urls[2]!, key, issueRequest(false))).status).toBe(200)
    const held = await account(accountId)
    expect(new Decimal(held.held_usd).greaterThan(0)).toBe(true)
    await fleet.processes[2]!.kill('SIGKILL')
    const killedAt = performance.now()
    await waitFor(
      'the dead instance’s lease to expire',
      async () => (await account(accountId)).held_usd === '0.000000',
      LEASE_TTL_MS + 5_000,
      50,
    )
    const expiredAfter = performance.now() - killedAt
    expect(expiredAfter).toBeLessThan(LEASE_TTL_MS + 1_000)
    console.log(
      `lease of a SIGKILLed instance ($${held.held_usd}) gone after ${Math.round(expiredAfter)} ms (TTL ${LEASE_TTL_MS} ms)`,
    )
  })

  withFleet(
    'SIGKILL during traffic: at most one group interval of delivered answers unbilled, none billed twice',
    async () => {
      // Many answers a second, so each group interval has some.
      slow.configure({ latencyMs: 20 })
      const credit = '100'
      const { key, accountId } = await fleet.newAccount(credit)
      const traffic = await trafficUntilKilled(fleet.urls[0]!, key, () =>
        fleet.processes[0]!.kill('SIGKILL'),
      )
      slow.configure({ latencyMs: 500 })
      await waitFor(
        'the dead instance’s lease to expire',
        async () => (await account(accountId)).held_usd === '0.000000',
        LEASE_TTL_MS + 5_000,
        50,
      )
      const charged = await chargedBy(accountId, credit)
      console.log(
        `SIGKILL during traffic: ${expectKillCostWithinOneInterval(traffic, charged, CHARGE_INTERVAL_MS)}`,
      )
    },
  )
})
