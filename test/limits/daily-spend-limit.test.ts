/**
 * docs/money-and-limits.md, the per-account daily spend limit, over real HTTP: set by the admin API, counted
 * from batches' holds and charges and live calls made since 00:00 UTC, refused `429
 * limit_exceeded` with `error.limit` when a submit or live call would pass it, not raised by a
 * deposit, reset at 00:00 UTC (the gateway's clock moved by the test), and exact across two
 * instances on one PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import OpenAI from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  chatLine,
  jsonl,
  startTestGateway,
  STORES,
  TEST_DATABASE_URL,
  freshSchemaUrl,
  type TestGateway,
} from '../helpers/gateway.ts'
import { issueRequest, liveCall, liveCatalog, sumCosts } from '../helpers/live-calls.ts'

/** The 2-line file's ceiling: 0.000093 a line (test/native/batches-api.test.ts says why). */
const TWO_LINES = [chatLine('a'), chatLine('b')]
const ONE_LINE = [chatLine('a')]

type Refusal = { error: { code: string; type: string; message: string; limit?: unknown } }

const DAY_MS = 86_400_000

for (const store of STORES) {
  describe(`daily spend limit (${store})`, () => {
    let sim: Simulator
    let claude: Simulator
    let gw: TestGateway
    /** Added to the gateway's clock (admission, live ledger, account view). */
    let shiftMs = 0
    /** One live call's ceiling (issueRequest), read from a 402. */
    let ceiling: Decimal
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 2 })
      claude = await startSimulator({ latencyMs: 100, requireApiKey: 'sk-ant-test-secret' })
      gw = await startTestGateway({
        store,
        catalog: liveCatalog({ openai: `${sim.url}/v1`, anthropic: claude.url }),
        // Batches stay held at their ceiling: what counts is exact.
        env: {
          MULTIGRID_DISPATCH: '0',
          MULTIGRID_LIVE_CHARGE_INTERVAL_MS: '100',
          MULTIGRID_LIVE_LEASE_IDLE_MS: '300',
        },
        clock: () => Date.now() + shiftMs,
      })
      const broke = await gw.newAccount('0')
      const probe = await liveCall(gw.url, broke.key, issueRequest(false))
      expect(probe.status).toBe(402)
      ceiling = new Decimal(probe.error!.cost_ceiling_usd!)
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
      await claude.stop()
    })

    const submit = (key: string, lines: unknown[], query = '') =>
      gw.request(`/v1/batches${query}`, key, { method: 'POST', body: jsonl(lines) })
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as Record<string, unknown>
    const patch = (id: string, body: unknown) =>
      gw.admin(`/accounts/${id}`, { method: 'PATCH', body })

    test('the admin API sets it on create, shows it with what today used, changes it and lifts it (null)', async () => {
      const { accountId } = await gw.newAccount('10', {}, { daily_spend_limit_usd: '0.0002' })
      expect(await account(accountId)).toMatchObject({
        daily_spend_limit_usd: '0.0002',
        daily_spend_used_usd: '0.000000',
      })
      expect(
        await (await patch(accountId, { daily_spend_limit_usd: '5.50' })).json(),
      ).toMatchObject({ daily_spend_limit_usd: '5.5' })
      const lifted = await patch(accountId, { daily_spend_limit_usd: null })
      expect(lifted.status).toBe(200)
      expect(((await lifted.json()) as Record<string, unknown>).daily_spend_limit_usd).toBeNull()
      for (const bad of ['-1', 'abc', 5, '1e3', true]) {
        const refused = await patch(accountId, { daily_spend_limit_usd: bad })
        expect(refused.status).toBe(400)
        const body = (await refused.json()) as Refusal
        expect(body.error.message).toContain('daily_spend_limit_usd')
        // A number is only quoted wrongly; true in quotes would be refused again.
        if (bad === 5) expect(body.error.message).toContain('in quotes: "5"')
        if (bad === true) {
          expect(body.error.message).toContain('set daily_spend_limit_usd to a string')
          expect(body.error.message).not.toContain('"true"')
        }
        // Its example is one it takes, not a negative amount as a credit's may be.
        if (typeof bad === 'string')
          expect(body.error.message).toContain(
            'not negative, with at most 6 decimals, such as "100" or "12.50"',
          )
      }
      const created = await gw.admin('/accounts', {
        body: { name: 'x', daily_spend_limit_usd: '-3' },
      })
      expect(created.status).toBe(400)
      expect((await account(accountId)).daily_spend_limit_usd).toBeNull()
    })

    test('a submit that would pass it is 429 limit_exceeded with the limit and what the day used; a deposit does not raise it', async () => {
      const { accountId, key } = await gw.newAccount('10', {}, { daily_spend_limit_usd: '0.0003' })
      const quote = async (lines: unknown[]) =>
        ((await (await submit(key, lines, '?dry_run=true')).json()) as Record<string, unknown>)
          .daily_limit_sufficient
      expect(await quote(TWO_LINES)).toBe(true)
      expect((await submit(key, TWO_LINES)).status).toBe(201)
      // The dry run says what the submit then finds: over the limit now, though the credit covers it.
      expect(await quote(TWO_LINES)).toBe(false)
      expect(await quote(ONE_LINE)).toBe(true)
      const refused = await submit(key, TWO_LINES)
      expect(refused.status).toBe(429)
      const body = (await refused.json()) as Refusal
      expect(body.error).toMatchObject({
        code: 'limit_exceeded',
        type: 'rate_limit_error',
        limit: { daily_spend_usd: '0.0003', used_usd: '0.000186' },
      })
      expect(body.error.message).toContain('00:00 UTC')
      expect(refused.headers.get('x-ratelimit-limit')).not.toBeNull()
      // Retry-After: the seconds until the limit resets at 00:00 UTC.
      const untilMidnight = (86_400_000 - (Date.now() % 86_400_000)) / 1000
      expect(Math.abs(Number(refused.headers.get('retry-after')) - untilMidnight)).toBeLessThan(5)
      expect(refused.headers.get('x-should-retry')).toBe('false')
      // Nothing was stored.
      const list = (await (await gw.request('/v1/batches', key)).json()) as { data: unknown[] }
      expect(list.data).toHaveLength(1)
      await gw.admin(`/accounts/${accountId}/credits`, { body: { amount_usd: '1000' } })
      expect((await submit(key, TWO_LINES)).status).toBe(429)
      // What still fits is admitted: 0.000186 + 0.000093 ≤ 0.0003.
      expect((await submit(key, ONE_LINE)).status).toBe(201)
      expect(await account(accountId)).toMatchObject({ daily_spend_used_usd: '0.000279' })
      await patch(accountId, { daily_spend_limit_usd: null })
      expect((await submit(key, TWO_LINES)).status).toBe(201)
    })

    test('the facade (official openai package) gets the same 429 with error.limit', async () => {
      const { key } = await gw.newAccount('10', {}, { daily_spend_limit_usd: '0.0001' })
      const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
      const file = await openai.files.create({
        file: new File([jsonl(TWO_LINES)], 'two.jsonl'),
        purpose: 'batch',
      })
      const error = await openai.batches
        .create({
          input_file_id: file.id,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        })
        .then(
          () => null,
          (e: unknown) => e,
        )
      expect(error).toBeInstanceOf(OpenAI.RateLimitError)
      const apiError = error as InstanceType<typeof OpenAI.RateLimitError>
      expect(apiError.code).toBe('limit_exceeded')
      expect((apiError.error as { limit: unknown }).limit).toEqual({
        daily_spend_usd: '0.0001',
        used_usd: '0.000000',
      })
      // A live call through the facade that would pass it: the same refusal, which the SDK does
      // not retry (its backoff of a second would not free the day's limit).
      let sent = 0
      const retrying = new OpenAI({
        apiKey: key,
        baseURL: `${gw.url}/openai/v1`,
        maxRetries: 2,
        fetch: (input: string | URL | Request, init?: RequestInit) => {
          sent++
          return fetch(input, init)
        },
      })
      const live = await retrying.chat.completions.create(issueRequest(false) as never).then(
        () => null,
        (e: unknown) => e,
      )
      expect(live).toBeInstanceOf(OpenAI.RateLimitError)
      const refusedLive = live as InstanceType<typeof OpenAI.RateLimitError>
      expect(refusedLive.code).toBe('limit_exceeded')
      expect(Number(refusedLive.headers?.get('retry-after'))).toBeGreaterThan(0)
      expect(sent).toBe(1)
    })

    test('live calls count and are held to it: concurrent calls never pass it, and a batch sees what they used', async () => {
      // Room for 3.5 ceilings a day, credit for far more.
      const limit = ceiling.times(3.5).toDecimalPlaces(6, Decimal.ROUND_DOWN)
      const { accountId, key } = await gw.newAccount(
        '100',
        { rate_limit_per_minute: 100_000 },
        { daily_spend_limit_usd: limit.toFixed() },
      )
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => liveCall(gw.url, key, issueRequest(false, i))),
      )
      const answered = answers.filter((a) => a.status === 200)
      const refused = answers.filter((a) => a.status === 429)
      expect(answered.length + refused.length).toBe(20)
      // All in flight at once (the upstream takes 100 ms): each holds its ceiling meanwhile.
      expect(answered.length).toBeGreaterThanOrEqual(1)
      expect(answered.length).toBeLessThanOrEqual(3)
      expect(refused[0]!.error).toMatchObject({
        code: 'limit_exceeded',
        limit: { daily_spend_usd: limit.toFixed() },
      })
      // One after another, each holding only its own ceiling: until used + ceiling passes it.
      let last: Refusal['error'] | null = null
      for (let i = 0; i < 80 && !last; i++) {
        const answer = await liveCall(gw.url, key, issueRequest(false, 100 + i))
        if (answer.status === 200) answered.push(answer)
        else {
          expect(answer.status).toBe(429)
          last = answer.error as unknown as Refusal['error']
        }
      }
      const { used_usd: used } = last!.limit as { used_usd: string }
      expect(new Decimal(used).plus(ceiling).greaterThan(limit)).toBe(true)
      await gw.credit.flush()
      const spent = new Decimal(100).minus((await account(accountId)).balance_usd as string)
      expect(spent.equals(sumCosts(answered))).toBe(true)
      expect(spent.lessThanOrEqualTo(limit)).toBe(true)
      console.log(
        `daily limit (${store}): limit $${limit.toFixed()}, live ceiling $${ceiling.toFixed()}: ${answered.length} live calls answered for $${spent.toFixed()}`,
      )
      // A batch counts what the live calls used: the answered ones' costs (the lease went back).
      await waitForLeaseBack(accountId)
      const batch = await submit(key, [chatLine('z', 'x', { max_tokens: 4000 })])
      expect(batch.status).toBe(429)
      expect(((await batch.json()) as Refusal).error.limit).toEqual({
        daily_spend_usd: limit.toFixed(),
        used_usd: usdText(spent),
      })
    })

    test('it resets at 00:00 UTC: the next day admits batches and answers live calls again', async () => {
      const { accountId, key } = await gw.newAccount(
        '100',
        { rate_limit_per_minute: 100_000 },
        // One live call a day, and then what it did not cost.
        { daily_spend_limit_usd: ceiling.toFixed() },
      )
      expect((await liveCall(gw.url, key, issueRequest(false))).status).toBe(200)
      await gw.credit.flush()
      await waitForLeaseBack(accountId)
      // What is left today is less than one more ceiling.
      expect((await liveCall(gw.url, key, issueRequest(false, 1))).status).toBe(429)
      expect((await submit(key, [chatLine('big', 'x', { max_tokens: 4000 })])).status).toBe(429)
      // 00:00:01 UTC of the next day, on the gateway's clock.
      const now = Date.now() + shiftMs
      shiftMs += DAY_MS - (now % DAY_MS) + 1_000
      try {
        expect((await account(accountId)).daily_spend_used_usd).toBe('0.000000')
        expect((await liveCall(gw.url, key, issueRequest(false, 2))).status).toBe(200)
        await gw.credit.flush()
        await waitForLeaseBack(accountId)
        expect((await submit(key, ONE_LINE)).status).toBe(201)
      } finally {
        await gw.credit.flush()
      }
    })

    async function waitForLeaseBack(accountId: string) {
      const deadline = Date.now() + 5_000
      while ((await account(accountId)).held_usd !== '0.000000') {
        if (Date.now() > deadline) throw new Error('the live lease did not come back')
        await Bun.sleep(50)
      }
    }
  })
}

const usdText = (value: Decimal) =>
  value.decimalPlaces() <= 6 ? value.toFixed(6) : value.toFixed()

describe.skipIf(!TEST_DATABASE_URL)(
  'daily spend limit across two instances on one PostgreSQL',
  () => {
    let sim: Simulator
    let claude: Simulator
    let a: TestGateway
    let b: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 2 })
      claude = await startSimulator({ latencyMs: 100, requireApiKey: 'sk-ant-test-secret' })
      const shared = freshSchemaUrl(TEST_DATABASE_URL!).url
      const start = (second: boolean) =>
        startTestGateway({
          sharesSchema: second,
          catalog: liveCatalog({ openai: `${sim.url}/v1`, anthropic: claude.url }),
          env: {
            DATABASE_URL: shared,
            MULTIGRID_DISPATCH: '0',
            MULTIGRID_LIVE_CHARGE_INTERVAL_MS: '100',
            MULTIGRID_LIVE_LEASE_IDLE_MS: '300',
          },
        })
      a = await start(false)
      b = await start(true)
    })
    afterAll(async () => {
      await b?.stop()
      await a?.stop()
      await sim.stop()
      await claude.stop()
    })

    test('racing submits on both instances: exactly as many batches as the limit holds are admitted', async () => {
      const file = jsonl(TWO_LINES)
      for (let round = 0; round < 4; round++) {
        // Room for exactly 3 two-line batches (0.000186 each).
        const { accountId, key } = await a.newAccount(
          '100',
          { rate_limit_per_minute: 100_000 },
          { daily_spend_limit_usd: '0.000558', max_open_batches: 100 },
        )
        const answers = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            (i % 2 ? b : a).request('/v1/batches', key, { method: 'POST', body: file }),
          ),
        )
        const statuses = answers.map((r) => r.status)
        expect(statuses.filter((s) => s === 201)).toHaveLength(3)
        expect(statuses.filter((s) => s === 429)).toHaveLength(9)
        const view = (await (await a.admin(`/accounts/${accountId}`)).json()) as Record<
          string,
          unknown
        >
        expect(view).toMatchObject({ held_usd: '0.000558', daily_spend_used_usd: '0.000558' })
      }
    })

    test('racing live calls and submits on both instances never pass it together', async () => {
      const broke = await a.newAccount('0')
      const probe = await liveCall(a.url, broke.key, issueRequest(false))
      const liveCeiling = new Decimal(probe.error!.cost_ceiling_usd!)
      // Batches about as big as a live call's ceiling, so each race is for the same room.
      const file = jsonl([chatLine('big', 'x', { max_tokens: 600 })])
      // A quote needs no credit (it says whether the credit suffices), so the broke account's does.
      const quote = await a.request('/v1/batches?dry_run=true', broke.key, {
        method: 'POST',
        body: file,
      })
      const batchCeiling = new Decimal(
        ((await quote.json()) as { cost_ceiling_usd: string }).cost_ceiling_usd,
      )
      // Room for the three batches and one and a half live calls: whoever wins each race, the
      // batches cannot take the last live call's room, so at least one live call is answered.
      const limit = batchCeiling
        .times(3)
        .plus(liveCeiling.times(1.5))
        .toDecimalPlaces(6, Decimal.ROUND_DOWN)
      const { accountId, key } = await a.newAccount(
        '100',
        { rate_limit_per_minute: 100_000 },
        { daily_spend_limit_usd: limit.toFixed(), max_open_batches: 100 },
      )
      const live = Array.from({ length: 30 }, (_, i) =>
        liveCall((i % 2 ? b : a).url, key, issueRequest(false, i)),
      )
      const batches = Array.from({ length: 3 }, (_, i) =>
        (i % 2 ? a : b).request('/v1/batches', key, { method: 'POST', body: file }),
      )
      const [answers, submits] = await Promise.all([Promise.all(live), Promise.all(batches)])
      const answered = answers.filter((x) => x.status === 200)
      expect(answers.every((x) => x.status === 200 || x.status === 429)).toBe(true)
      const admitted = submits.filter((r) => r.status === 201).length
      expect(submits.every((r) => r.status === 201 || r.status === 429)).toBe(true)
      await a.credit.flush()
      await b.credit.flush()
      const view = (await (await a.admin(`/accounts/${accountId}`)).json()) as Record<
        string,
        string
      >
      const liveSpent = new Decimal(100).minus(view.balance_usd!)
      expect(liveSpent.equals(sumCosts(answered))).toBe(true)
      // Batch holds (nothing dispatches) plus live charges: within the limit, whoever raced whom.
      const total = liveSpent.plus(batchCeiling.times(admitted))
      expect(total.lessThanOrEqualTo(limit)).toBe(true)
      expect(answered.length).toBeGreaterThanOrEqual(1)
      console.log(
        `daily limit, two instances: limit $${limit.toFixed()}: ${answered.length} live answers, ${admitted} batches admitted, $${total.toFixed()} counted`,
      )
    })
  },
)
