/**
 * docs/live.md over real HTTP: a live call is held before it is sent. The issue's reproduction — an
 * account with $0.001, 100 concurrent chat calls to an Anthropic model, the upstream answering
 * after 500 ms — got 100 answers for $0.001 of credit before; now at most as many as the credit
 * covers are answered, the rest are 402, and the account is charged exactly what the answers cost.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { measureSent, sentTokens } from '../helpers/sent-bound.ts'
import {
  ADMIN_TOKEN,
  STORES,
  jsonl,
  startTestGateway,
  type TestGateway,
} from '../helpers/gateway.ts'
import {
  issueRequest,
  liveCall,
  liveCatalog,
  liveCatalogFile,
  sumCosts,
  type LiveAnswer,
  trafficUntilKilled,
  expectKillCostWithinOneInterval,
} from '../helpers/live-calls.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'
import { openStoreFile } from '../helpers/store-file.ts'
import { waitFor } from '../helpers/wait.ts'

type AccountView = { balance_usd: string; held_usd: string; available_usd: string }

/** Charge groups written since the gateway started, read from its store's own table. */
async function countGroups(gw: TestGateway): Promise<number> {
  if (gw.env.DATABASE_URL) {
    const { default: postgres } = await import('postgres')
    const sql = postgres(gw.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      const [row] = await sql`SELECT count(*)::int AS n FROM live_charge_groups`
      return row!.n as number
    } finally {
      await sql.end()
    }
  }
  const db = openStoreFile(gw.env.MULTIGRID_DATA_DIR!, { readonly: true })
  try {
    return (db.query('SELECT count(*) AS n FROM live_charge_groups').get() as { n: number }).n
  } finally {
    db.close()
  }
}

for (const store of STORES) {
  describe(`live calls held before they are sent (${store})`, () => {
    let sim: Simulator
    let claude: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 2 })
      claude = await startSimulator({ latencyMs: 500, requireApiKey: 'sk-ant-test-secret' })
      gw = await startTestGateway({
        store,
        catalog: liveCatalog({ openai: `${sim.url}/v1`, anthropic: claude.url }),
        env: {
          MULTIGRID_DISPATCH: '0',
          MULTIGRID_LIVE_CHARGE_INTERVAL_MS: '200',
          MULTIGRID_LIVE_LEASE_IDLE_MS: '600',
        },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
      await claude.stop()
    })
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as AccountView

    for (const stream of [false, true]) {
      for (const credit of ['0.001', '0.005']) {
        test(`100 concurrent calls${stream ? ' (stream: true)' : ''} on $${credit}: at most what the credit covers, charged exactly their cost`, async () => {
          const { key, accountId } = await gw.newAccount(credit, { rate_limit_per_minute: 100_000 })
          const answers = await Promise.all(
            Array.from({ length: 100 }, (_, i) => liveCall(gw.url, key, issueRequest(stream, i))),
          )
          const answered = answers.filter((a) => a.status === 200)
          const refused = answers.filter((a) => a.status === 402)
          expect(answered.length + refused.length).toBe(100)
          expect(refused[0]!.error!.code).toBe('insufficient_quota')
          // Each call's ceiling: what the credit can cover at once.
          const ceiling = new Decimal(refused[0]!.error!.cost_ceiling_usd!)
          const covered = new Decimal(credit).div(ceiling).floor().toNumber()
          expect(covered).toBeGreaterThanOrEqual(1)
          expect(answered.length).toBeGreaterThanOrEqual(1)
          expect(answered.length).toBeLessThanOrEqual(covered)
          await gw.credit.flush()
          const after = await account(accountId)
          expect(new Decimal(after.balance_usd).greaterThanOrEqualTo(0)).toBe(true)
          expect(new Decimal(credit).minus(after.balance_usd).equals(sumCosts(answered))).toBe(true)
          console.log(
            `live holds (${store}${stream ? ', stream' : ''}): $${credit}, ceiling $${ceiling.toFixed()}: ${answered.length} answered, ${refused.length} refused 402, charged $${sumCosts(answered).toFixed()}`,
          )
          // The lease goes back once the account has no live call here.
          await waitFor(
            'the lease handed back',
            async () => (await account(accountId)).held_usd === '0.000000',
            5_000,
            50,
          )
          expect((await account(accountId)).available_usd).toBe(
            (await account(accountId)).balance_usd,
          )
        }, 30_000)
      }
    }

    test('a lease is a hold: available_usd shows it while calls run, and it comes back when idle', async () => {
      const { key, accountId } = await gw.newAccount('10', { rate_limit_per_minute: 100_000 })
      const call = liveCall(gw.url, key, issueRequest(false))
      await Bun.sleep(200)
      const during = await account(accountId)
      expect(new Decimal(during.held_usd).greaterThan(0)).toBe(true)
      expect(new Decimal(during.available_usd).lessThan(10)).toBe(true)
      expect((await call).status).toBe(200)
      const started = performance.now()
      const back = await waitFor(
        'the lease handed back',
        async () => {
          const view = await account(accountId)
          return view.held_usd === '0.000000' ? view : null
        },
        30_000,
        50,
      )
      const returnedAfter = performance.now() - started
      expect(returnedAfter).toBeLessThan(30_000)
      console.log(
        `idle lease ($${during.held_usd}) handed back ${Math.round(returnedAfter)} ms after the last call (idle 600 ms, interval 200 ms)`,
      )
      expect(back.available_usd).toBe(back.balance_usd)
    }, 40_000)

    test("a batch submitted while a live call runs is weighed against the credit the call holds, not the instance's whole block", async () => {
      const credit = '0.01'
      const { key, accountId } = await gw.newAccount(credit, { rate_limit_per_minute: 100_000 })
      const submit = (lines: number, query = '') =>
        gw.request(`/v1/batches${query}`, key, {
          method: 'POST',
          headers: { 'content-type': 'application/jsonl' },
          body: jsonl(
            Array.from({ length: lines }, (_, i) => ({
              custom_id: `l${i}`,
              method: 'POST',
              url: '/v1/chat/completions',
              body: issueRequest(false, i),
            })),
          ),
        })
      // A line's ceiling is the live call's own (same body, same arithmetic).
      const quote = (await (await submit(1, '?dry_run=true')).json()) as {
        cost_ceiling_usd: string
      }
      const ceiling = new Decimal(quote.cost_ceiling_usd)
      // As many lines as fit beside the running call: more than the half of the credit the
      // instance's block may take, so the block, counted as held, would refuse them.
      const lines = new Decimal(credit).minus(ceiling).div(ceiling).floor().toNumber()
      expect(ceiling.times(lines).greaterThan(new Decimal(credit).div(2))).toBe(true)
      const call = liveCall(gw.url, key, issueRequest(false))
      await Bun.sleep(200)
      // The call runs (the upstream answers after 500 ms), and its block is held: more than its ceiling.
      expect(new Decimal((await account(accountId)).held_usd).greaterThan(ceiling)).toBe(true)
      const response = await submit(lines)
      expect(response.status).toBe(201)
      // The running call still holds its ceiling beside the batch's hold.
      const held = new Decimal((await account(accountId)).held_usd)
      expect(held.greaterThanOrEqualTo(ceiling.times(lines + 1))).toBe(true)
      expect((await call).status).toBe(200)
    }, 30_000)

    test('a stream the client abandons settles what the upstream reported and gives the rest back', async () => {
      const { key, accountId } = await gw.newAccount('0.01', { rate_limit_per_minute: 100_000 })
      const aborted = new AbortController()
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(issueRequest(true)),
        signal: aborted.signal,
      })
      expect(response.status).toBe(200)
      const reader = response.body!.getReader()
      await reader.read()
      aborted.abort()
      await reader.cancel().catch(() => {})
      // Its hold does not stay behind: the lease goes back once the call is over.
      await waitFor(
        'the lease handed back',
        async () => (await account(accountId)).held_usd === '0.000000',
        10_000,
        50,
      )
      const after = await account(accountId)
      const ceiling = new Decimal('0.000857') // (107 input + 150 output tokens) at $1 / $5 per million
      expect(new Decimal('0.01').minus(after.balance_usd).lessThanOrEqualTo(ceiling)).toBe(true)
      expect(after.available_usd).toBe(after.balance_usd)
    })

    test('a stream the client leaves is billed: past the finish its real usage, read on for it; before, what it was sent', async () => {
      // The body comes in pieces over 1.5 s: OpenAI's usage, in the last chunk, is still to come.
      sim.configure({ trickleRate: 1, trickleMs: 1500, keepBodies: 1 })
      try {
        const body = {
          model: 'sim/chat',
          messages: [{ role: 'user', content: 'tell me a story' }],
          max_tokens: 20,
          stream: true,
        }
        /** Reads the stream until `stop` says so (or its end), then hangs up; what it cost. */
        const charged = async (stop: (text: string, finished: boolean) => boolean) => {
          const { key, accountId } = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
          const aborted = new AbortController()
          const response = await fetch(`${gw.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
            signal: aborted.signal,
          })
          expect(response.status).toBe(200)
          const reader = response.body!.getReader()
          let read = ''
          let text = ''
          let finished = false
          while (!stop(text, finished)) {
            const { value, done } = await reader.read()
            if (done) break
            read += new TextDecoder().decode(value)
            const events = read.split('\n\n').filter((e) => e.startsWith('data: {'))
            text = ''
            for (const event of events) {
              const choice = JSON.parse(event.slice(6)).choices?.[0]
              text += choice?.delta?.content ?? ''
              if (choice?.finish_reason) finished = true
            }
          }
          aborted.abort()
          await reader.cancel().catch(() => {})
          await waitFor(
            'the call settled',
            async () => (await account(accountId)).held_usd === '0.000000',
            10_000,
            50,
          )
          await gw.credit.flush()
          return { cost: new Decimal(1).minus((await account(accountId)).balance_usd), text }
        }
        const whole = await charged(() => false)
        // Left at finish_reason, before the usage chunk: billed exactly what reading on costs.
        const atFinish = await charged((_, finished) => finished)
        expect(atFinish.cost.toFixed()).toBe(whole.cost.toFixed())
        // Left mid-text: at least the prompt's bound and a token per byte read, at most the ceiling.
        const early = await charged((text) => text.length > 0)
        expect(early.text).not.toBe('')
        const prompt = sentTokens(
          measureSent(JSON.parse(sim.received().at(-1)!.text), 'openai'),
          0,
          0,
        )
        const least = new Decimal(prompt.input)
          .times('0.5')
          .plus(new Decimal(Math.min(Buffer.byteLength(early.text), 20)).times('1.5'))
          .div(1e6)
        const most = new Decimal(prompt.input)
          .times('0.5')
          .plus(new Decimal(20).times('1.5'))
          .div(1e6)
        expect(early.cost.greaterThanOrEqualTo(least)).toBe(true)
        expect(early.cost.lessThanOrEqualTo(most)).toBe(true)
      } finally {
        sim.configure({ trickleRate: 0, keepBodies: 0 })
      }
    })

    test('charges are written in groups: 60 answered calls in a row make a few group writes, not 60', async () => {
      claude.configure({ latencyMs: 5 })
      try {
        const { key, accountId } = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
        // Earlier tests' leases and charges settle first: count only this test's groups.
        await Bun.sleep(1_000)
        await gw.credit.flush()
        const groupsBefore = await countGroups(gw)
        const started = performance.now()
        const answers: Awaited<ReturnType<typeof liveCall>>[] = []
        for (let i = 0; i < 60; i++)
          answers.push(await liveCall(gw.url, key, issueRequest(false, i)))
        const elapsed = performance.now() - started
        expect(answers.every((a) => a.status === 200)).toBe(true)
        await gw.credit.flush()
        expect(
          new Decimal('1').minus((await account(accountId)).balance_usd).equals(sumCosts(answers)),
        ).toBe(true)
        // Counted in the store itself: one row per group written, each stored with its id.
        const groups = (await countGroups(gw)) - groupsBefore
        expect(groups).toBeGreaterThanOrEqual(1)
        expect(groups).toBeLessThanOrEqual(Math.ceil(elapsed / 200) + 2)
        console.log(
          `grouped charges (${store}): 60 calls in ${Math.round(elapsed)} ms, ${groups} group writes`,
        )
      } finally {
        claude.configure({ latencyMs: 500 })
      }
    })

    test('an answer without usage is billed on the bound, as a batch line is, plain and streamed', async () => {
      sim.configure({ noUsageRate: 1, keepBodies: 2 })
      try {
        const { key, accountId } = await gw.newAccount('1', { rate_limit_per_minute: 100_000 })
        const body = {
          model: 'sim/chat',
          messages: [{ role: 'user', content: 'hello there' }],
          max_tokens: 20,
        }
        const send = (extra: Record<string, unknown>) =>
          gw.request('/v1/chat/completions', key, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ ...body, ...extra }),
          })
        const plain = (await (await send({})).json()) as {
          usage?: unknown
          choices: { message: { content: string } }[]
        }
        expect(plain.usage).toBeUndefined()
        const streamed = (await (await send({ stream: true })).text())
          .split('\n\n')
          .filter((e) => e.startsWith('data: {'))
        const streamedText = streamed
          .map((e) => JSON.parse(e.slice(6)).choices?.[0]?.delta?.content ?? '')
          .join('')
        // The stream's charge is set aside just after its last byte went out.
        await Bun.sleep(50)
        await gw.credit.flush()
        // The prompt's bound measured on the body the upstream received (bytes + 4 per message + 3,
        // test/helpers/sent-bound.ts) at $0.50, one token per byte of the reply (at most 20) at $1.50.
        const [plainSent, streamSent] = sim
          .received()
          .map((r) => sentTokens(measureSent(JSON.parse(r.text), 'openai'), 0, 0).input)
        const bound = (prompt: number, text: string) =>
          new Decimal(prompt)
            .times('0.5')
            .plus(new Decimal(Math.min(Buffer.byteLength(text), 20)).times('1.5'))
            .div(1e6)
        const expected = bound(plainSent!, plain.choices[0]!.message.content).plus(
          bound(streamSent!, streamedText),
        )
        expect(new Decimal(1).minus((await account(accountId)).balance_usd).toFixed()).toBe(
          expected.toFixed(),
        )
      } finally {
        sim.configure({ noUsageRate: 0, keepBodies: 0 })
      }
    })

    test('a failed upstream call releases its whole hold and charges nothing', async () => {
      const { key, accountId } = await gw.newAccount('0.01', { rate_limit_per_minute: 100_000 })
      const refused = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/refused',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 10,
        }),
      })
      expect(refused.status).toBe(400)
      // The field the provider named, as it named it.
      expect(((await refused.json()) as { error: { param: string } }).error.param).toBe('model')
      await gw.credit.flush()
      await waitFor(
        'the lease handed back',
        async () => (await account(accountId)).held_usd === '0.000000',
        5_000,
        50,
      )
      expect((await account(accountId)).balance_usd).toBe('0.010000')
    })
  })
}

describe('live calls across SIGTERM and SIGKILL (SQLite, the gateway in its own process)', () => {
  const CHARGE_INTERVAL_MS = 250
  const LEASE_TTL_MS = 2_000
  let claude: Simulator
  let sim: Simulator
  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 2 })
    claude = await startSimulator({ latencyMs: 20, requireApiKey: 'sk-ant-test-secret' })
  })
  afterAll(async () => {
    await sim.stop()
    await claude.stop()
  })

  const processEnv = () => ({
    PORT: String(freePort()),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-live-kill-')),
    MULTIGRID_CONFIG: liveCatalogFile({ openai: `${sim.url}/v1`, anthropic: claude.url }),
    MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
    MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
    MULTIGRID_DISPATCH: '0',
    // The longest allowed, so the calls' charges are still pending when the stop comes.
    MULTIGRID_LIVE_CHARGE_INTERVAL_MS: '5000',
    MULTIGRID_LIVE_LEASE_TTL_MS: '600000',
    MULTIGRID_LIVE_LEASE_IDLE_MS: '25000',
    LOG_LEVEL: 'error',
  })

  test('SIGTERM writes every pending charge and hands the lease back at once', async () => {
    const env = processEnv()
    let gateway = await spawnGatewayProcess(env)
    const admin = (path: string, body?: unknown) =>
      fetch(`${gateway.url}/admin/v1${path}`, {
        method: body ? 'POST' : 'GET',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: body ? JSON.stringify(body) : undefined,
      })
    try {
      const { id: accountId } = (await (
        await admin('/accounts', { name: 'term', credit_usd: '1', rate_limit_per_minute: 100_000 })
      ).json()) as { id: string }
      const { key } = (await (await admin(`/accounts/${accountId}/keys`, {})).json()) as {
        key: string
      }
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          liveCall(gateway.url, key, issueRequest(i % 2 === 0, i)),
        ),
      )
      expect(answers.every((a) => a.status === 200)).toBe(true)
      await Bun.sleep(100)
      const before = (await (await admin(`/accounts/${accountId}`)).json()) as AccountView
      expect(new Decimal(before.held_usd).greaterThan(0)).toBe(true)
      expect(await gateway.kill('SIGTERM')).toBe(0)
      gateway = await spawnGatewayProcess(env)
      const after = (await (await admin(`/accounts/${accountId}`)).json()) as AccountView
      expect(after.held_usd).toBe('0.000000')
      expect(new Decimal(1).minus(after.balance_usd).equals(sumCosts(answers))).toBe(true)
    } finally {
      await gateway.kill('SIGTERM').catch(() => 0)
    }
  }, 60_000)

  test('at most one group interval of delivered answers unbilled, none billed twice, and the dead instance’s lease expires', async () => {
    const env = {
      PORT: String(freePort()),
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-live-kill-')),
      MULTIGRID_CONFIG: liveCatalogFile({ openai: `${sim.url}/v1`, anthropic: claude.url }),
      MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
      MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
      MULTIGRID_DISPATCH: '0',
      MULTIGRID_LIVE_CHARGE_INTERVAL_MS: String(CHARGE_INTERVAL_MS),
      MULTIGRID_LIVE_LEASE_TTL_MS: String(LEASE_TTL_MS),
      LOG_LEVEL: 'error',
    }
    let gateway = await spawnGatewayProcess(env)
    const admin = (path: string, body?: unknown) =>
      fetch(`${gateway.url}/admin/v1${path}`, {
        method: body ? 'POST' : 'GET',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: body ? JSON.stringify(body) : undefined,
      })
    try {
      const credit = '100'
      const { id: accountId } = (await (
        await admin('/accounts', {
          name: 'kill',
          credit_usd: credit,
          rate_limit_per_minute: 100_000,
        })
      ).json()) as { id: string }
      const { key } = (await (await admin(`/accounts/${accountId}/keys`, {})).json()) as {
        key: string
      }
      const traffic = await trafficUntilKilled(gateway.url, key, () => gateway.kill('SIGKILL'))
      const { killedAt } = traffic
      gateway = await spawnGatewayProcess(env)
      // The dead instance's lease still counts until it expires, then it is nothing.
      await waitFor(
        'the dead instance’s lease to expire',
        async () =>
          ((await (await admin(`/accounts/${accountId}`)).json()) as AccountView).held_usd ===
          '0.000000',
        LEASE_TTL_MS + 5_000,
        50,
      )
      expect(performance.now() - killedAt).toBeLessThan(LEASE_TTL_MS + 3_000)
      const charged = new Decimal(credit).minus(
        ((await (await admin(`/accounts/${accountId}`)).json()) as AccountView).balance_usd,
      )
      console.log(
        `SIGKILL during traffic (SQLite): ${expectKillCostWithinOneInterval(traffic, charged, CHARGE_INTERVAL_MS)}`,
      )
    } finally {
      await gateway.kill('SIGTERM').catch(() => 0)
    }
  }, 60_000)
})
