/**
 * docs/open-models.md, waiting for a top-up, over real HTTP: a submit with wait_for_credit=true whose hold
 * does not fit is admitted `validating` with `waiting.code` `insufficient_credit` instead of a
 * 402; a deposit that makes it fit starts it within seconds (earliest first, none twice); still
 * short after half its window it fails `insufficient_quota`, nothing run, nothing charged. On
 * both stores, through the native API and the facade (official openai package), and on two
 * instances sharing one PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { join } from 'node:path'
import OpenAI, { toFile } from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  chatLine,
  freshSchemaUrl,
  jsonl,
  startTestGateway,
  STORES,
  TEST_DATABASE_URL,
  type TestGateway,
} from '../helpers/gateway.ts'
import { usd } from '../../src/money/decimal.ts'
import { contractProblems, schemaFor } from '../helpers/openai-contract.ts'
import { editBatchRow } from '../helpers/edit-batch.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

/** 0.000093 a line (test/native/batches-api.test.ts says why). */
const LINE_USD = new Decimal('0.000093')
const lines = (n: number, prefix = 'l') =>
  Array.from({ length: n }, (_, i) => chatLine(`${prefix}-${i}`))

type Batch = {
  id: string
  status: string
  created_at: number
  cost_ceiling_usd: string
  cost_usd: string
  request_counts: Record<string, number>
  waiting: { code: string; message: string; until?: number } | null
  errors: { code: string; message: string }[] | null
}

/** Moves a waiting batch's end of wait to now, in the store itself (both dialects). */
const endWaitNow = (gw: TestGateway, batchId: string) =>
  editBatchRow(gw, batchId, `waiting_until = ${Math.floor(Date.now() / 1000)}`)

for (const store of STORES) {
  describe(`waiting for a top-up (${store})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 5 })
      gw = await startTestGateway({
        store,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_CREDIT_WAIT_POLL_MS: '200' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
    })

    const chatRequests = () => sim.stats().byPath['/v1/chat/completions'] ?? 0
    const submit = (key: string, body: unknown[], query = '?wait_for_credit=true') =>
      gw.request(`/v1/batches${query}`, key, { method: 'POST', body: jsonl(body) })
    const batchOf = async (key: string, id: string) =>
      (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as Record<string, string | number>
    const deposit = (id: string, amount: string) =>
      gw.admin(`/accounts/${id}/credits`, { body: { amount_usd: amount } })
    const done = (key: string, id: string) =>
      waitFor(
        `batch ${id} to end`,
        async () => {
          const batch = await batchOf(key, id)
          return FINAL_BATCH.includes(batch.status) && batch
        },
        15_000,
      )

    test('a hold that does not fit: 402 without wait_for_credit; with it, 201 validating, waiting insufficient_credit with the deposit needed, nothing held or run', async () => {
      const { accountId, key } = await gw.newAccount('0.0001')
      const refused = await submit(key, lines(2), '')
      expect(refused.status).toBe(402)
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
        'insufficient_quota',
      )
      const admitted = await submit(key, lines(2))
      expect(admitted.status).toBe(201)
      const batch = (await admitted.json()) as Batch
      expect(batch).toMatchObject({
        status: 'validating',
        cost_ceiling_usd: '0.000186',
        cost_usd: '0.000000',
        errors: null,
        waiting: {
          code: 'insufficient_credit',
          until: batch.created_at + 12 * 3600,
        },
      })
      // It says a deposit is needed, and how much: 0.000186 − 0.0001.
      expect(batch.waiting!.message).toContain('deposit at least $0.000086')
      expect(batch.waiting!.message).toContain('insufficient_quota')
      expect(await account(accountId)).toMatchObject({
        held_usd: '0.000000',
        available_usd: '0.000100',
        open_batches: 1,
      })
      await Bun.sleep(700)
      const later = await batchOf(key, batch.id)
      expect(later.status).toBe('validating')
      expect(later.request_counts).toMatchObject({ pending: 2, running: 0, succeeded: 0 })
      expect(chatRequests()).toBe(0)
      // Listed as it is read.
      const list = (await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }
      expect(list.data[0]!.waiting!.code).toBe('insufficient_credit')
    })

    test('a long window waits for credit until half of it, but never past the 48 hours by which it must start', async () => {
      const { key } = await gw.newAccount('0.0001')
      const until = async (hours: number) => {
        const admitted = await submit(key, lines(2), `?completion_window_hours=${hours}`)
        expect(admitted.status).toBe(201)
        const batch = (await admitted.json()) as Batch
        expect(batch.status).toBe('validating')
        return (batch.waiting!.until! - batch.created_at) / 3600
      }
      // At 72 hours and more it waits by default, wait_for_credit not given.
      expect(await until(72)).toBe(36)
      expect(await until(96)).toBe(48)
      // Credit at hour 60 would start a batch already past its start-by time.
      expect(await until(120)).toBe(48)
    })

    test('a capped batch waits for its cap, not its ceiling: a deposit covering max_cost_usd starts it, and it spends within the cap', async () => {
      const { accountId, key } = await gw.newAccount('0')
      // Ceiling 0.000930 for 10 lines; the cap holds 0.0005 instead.
      const admitted = await submit(
        key,
        lines(10, 'cap'),
        '?wait_for_credit=true&max_cost_usd=0.0005',
      )
      expect(admitted.status).toBe(201)
      const batch = (await admitted.json()) as Batch & { max_cost_usd: string }
      expect(batch).toMatchObject({ status: 'validating', max_cost_usd: '0.0005' })
      expect(batch.waiting!.message).toContain('deposit at least $0.000500')
      await deposit(accountId, '0.0005')
      const started = await waitFor(
        'the capped batch to start',
        async () => {
          const now = await batchOf(key, batch.id)
          return now.status !== 'validating' && now
        },
        5_000,
        20,
      )
      expect(started.waiting === null || started.waiting.code === 'max_cost_reached').toBe(true)
      const finished = await done(key, batch.id)
      expect(finished.status).toBe('completed')
      expect(new Decimal(finished.cost_usd).lessThanOrEqualTo('0.0005')).toBe(true)
      expect((await account(accountId)).held_usd).toBe('0.000000')
    })

    test('a deposit that makes it fit starts it within seconds; it runs and is charged what it cost', async () => {
      const { accountId, key } = await gw.newAccount('0.0001')
      const { id } = (await (await submit(key, lines(2))).json()) as Batch
      // Not enough yet: still waiting, needing less.
      await deposit(accountId, '0.00005')
      await waitFor(
        'the deposit needed to shrink',
        async () => (await batchOf(key, id)).waiting?.message.includes('$0.000036'),
        5_000,
      )
      const depositedAt = performance.now()
      await deposit(accountId, '0.000036')
      const started = await waitFor(
        'the batch to start',
        async () => {
          const batch = await batchOf(key, id)
          return batch.status !== 'validating' && batch
        },
        5_000,
        20,
      )
      const startMs = Math.round(performance.now() - depositedAt)
      expect(started.waiting).toBeNull()
      const finished = await done(key, id)
      expect(finished.status).toBe('completed')
      expect(finished.request_counts).toMatchObject({ succeeded: 2, failed: 0 })
      const cost = new Decimal(finished.cost_usd)
      expect(cost.greaterThan(0) && cost.lessThanOrEqualTo('0.000186')).toBe(true)
      const after = await account(accountId)
      expect(new Decimal(after.balance_usd!).equals(new Decimal('0.000186').minus(cost))).toBe(true)
      expect(after.held_usd).toBe('0.000000')
      console.log(`wait for credit (${store}): started ${startMs} ms after the deposit`)
    })

    test('a deposit starts each batch whose hold it makes fit, earliest first, and none twice', async () => {
      const { accountId, key } = await gw.newAccount('0')
      const first = (await (await submit(key, lines(2, 'a'))).json()) as Batch
      const second = (await (await submit(key, lines(3, 'b'))).json()) as Batch
      const third = (await (await submit(key, lines(1, 'c'))).json()) as Batch
      // Ceilings 0.000186, 0.000279 and 0.000093: this covers the third alone, the latest.
      await deposit(accountId, '0.00015')
      expect((await done(key, third.id)).status).toBe('completed')
      for (const batch of [first, second])
        expect((await batchOf(key, batch.id)).status).toBe('validating')
      // What is left; the first needs the rest of its ceiling, the second its own and the
      // first's, which a deposit covering it reaches first.
      const left = new Decimal('0.00015').minus((await batchOf(key, third.id)).cost_usd)
      const needs = (ceiling: Decimal) => `$${usd(ceiling.minus(left))}`
      const firstNeeds = needs(LINE_USD.times(2))
      await waitFor(
        'the deposits still needed',
        async () =>
          (await batchOf(key, first.id)).waiting?.message.includes(firstNeeds) &&
          (await batchOf(key, second.id)).waiting?.message.includes(needs(LINE_USD.times(5))),
        5_000,
      )
      await deposit(accountId, '1')
      for (const batch of [first, second])
        expect((await done(key, batch.id)).status).toBe('completed')
      // Each line ran once; the account paid exactly what the three batches cost.
      let total = new Decimal(0)
      for (const batch of [first, second, third]) {
        const results = (await (await gw.request(`/v1/batches/${batch.id}/results`, key)).text())
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as { attempts: number; status: string })
        expect(results.every((line) => line.status === 'succeeded' && line.attempts === 1)).toBe(
          true,
        )
        total = total.plus((await batchOf(key, batch.id)).cost_usd)
      }
      const balance = new Decimal((await account(accountId)).balance_usd!)
      expect(new Decimal('1.00015').minus(balance).equals(total)).toBe(true)
    })

    test('a submit whose hold fits starts at once, though an earlier one waits', async () => {
      const { key } = await gw.newAccount('0.0001')
      const waiting = (await (await submit(key, lines(2, 'a'))).json()) as Batch
      expect(waiting.status).toBe('validating')
      const fits = (await (await submit(key, lines(1, 'b'))).json()) as Batch
      expect(fits).toMatchObject({ status: 'in_progress', waiting: null })
      expect((await done(key, fits.id)).status).toBe('completed')
      expect((await batchOf(key, waiting.id)).status).toBe('validating')
    })

    test('still short after half its window: failed insufficient_quota, nothing run, nothing charged, nothing held', async () => {
      const { accountId, key } = await gw.newAccount('0.0001')
      const { id } = (await (await submit(key, lines(3))).json()) as Batch
      const before = chatRequests()
      await endWaitNow(gw, id)
      const failed = await done(key, id)
      expect(failed).toMatchObject({
        status: 'failed',
        cost_usd: '0.000000',
        waiting: null,
        request_counts: { total: 3, pending: 0, running: 0, succeeded: 0, failed: 3 },
      })
      expect(failed.errors![0]!.code).toBe('insufficient_quota')
      expect(failed.errors![0]!.message).toContain('nothing was run or charged')
      const results = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
        .trim()
        .split('\n')
        .map(
          (line) =>
            JSON.parse(line) as { status: string; error: { code: string }; cost_usd: string },
        )
      expect(results.map((line) => [line.status, line.error.code, line.cost_usd])).toEqual(
        Array(3).fill(['failed', 'insufficient_quota', '0.000000']),
      )
      // Ready to submit again once credit comes.
      const input = await (
        await gw.request(`/v1/batches/${id}/results?filter=failed&format=input`, key)
      ).text()
      expect(input.trim().split('\n')).toHaveLength(3)
      expect(chatRequests()).toBe(before)
      expect(await account(accountId)).toMatchObject({
        balance_usd: '0.000100',
        held_usd: '0.000000',
        open_batches: 0,
      })
      // The facade shows it failed with the reason too.
      const facade = (await (await gw.request(`/openai/v1/batches/${id}`, key)).json()) as {
        status: string
        errors: { data: { code: string }[] }
      }
      expect(facade.status).toBe('failed')
      expect(facade.errors.data[0]!.code).toBe('insufficient_quota')
    })

    test('the open-batch limit still applies, and a waiting batch can be cancelled: nothing charged', async () => {
      const { accountId, key } = await gw.newAccount('0', {}, { max_open_batches: 1 })
      const { id } = (await (await submit(key, lines(1))).json()) as Batch
      const second = await submit(key, lines(1))
      expect(second.status).toBe(429)
      expect(((await second.json()) as { error: { limit: unknown } }).error.limit).toEqual({
        open_batches: 1,
        in_use: 1,
      })
      const cancelled = await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })
      expect(cancelled.status).toBe(200)
      const batch = await done(key, id)
      expect(batch).toMatchObject({ status: 'cancelled', waiting: null, cost_usd: '0.000000' })
      await deposit(accountId, '1')
      await Bun.sleep(500)
      expect((await batchOf(key, id)).status).toBe('cancelled')
      expect(await account(accountId)).toMatchObject({ balance_usd: '1.000000', open_batches: 0 })
    })

    test('a retry waits for a top-up as a submit does: by default at 72 hours or more, or when asked', async () => {
      const { accountId, key } = await gw.newAccount('0')
      // A parent whose lines did not succeed: it waited for credit and was cancelled.
      const { id: parent } = (await (await submit(key, lines(2))).json()) as Batch
      await gw.request(`/v1/batches/${parent}`, key, { method: 'DELETE' })
      expect((await done(key, parent)).status).toBe('cancelled')
      const retry = (body: unknown) =>
        gw.request(`/v1/batches/${parent}/retry`, key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
      expect((await retry({})).status).toBe(402)
      expect((await retry({ completion_window_hours: 72, wait_for_credit: false })).status).toBe(
        402,
      )
      const long = await retry({ completion_window_hours: 72 })
      expect(long.status).toBe(201)
      const asked = await retry({ wait_for_credit: true })
      expect(asked.status).toBe(201)
      for (const child of [(await long.json()) as Batch, (await asked.json()) as Batch]) {
        expect(child).toMatchObject({
          status: 'validating',
          waiting: { code: 'insufficient_credit' },
        })
        await gw.request(`/v1/batches/${child.id}`, key, { method: 'DELETE' })
      }
      await deposit(accountId, '1')
      // A query parameter says the same; with the credit there it starts at once, and runs.
      const queried = await gw.request(`/v1/batches/${parent}/retry?wait_for_credit=1`, key, {
        method: 'POST',
      })
      expect(queried.status).toBe(201)
      const ran = await done(key, ((await queried.json()) as Batch).id)
      expect(ran.status).toBe('completed')
      expect(ran.request_counts.succeeded).toBe(2)
    })

    test('the daily spend limit is not waited for: 429 limit_exceeded', async () => {
      const { key } = await gw.newAccount('0', {}, { daily_spend_limit_usd: '0.0001' })
      const refused = await submit(key, lines(2))
      expect(refused.status).toBe(429)
      expect(((await refused.json()) as { error: { limit: unknown } }).error.limit).toEqual({
        daily_spend_usd: '0.0001',
        used_usd: '0.000000',
      })
    })

    test('the facade (official openai package): wait_for_credit through extra_body, started by a deposit', async () => {
      const { accountId, key } = await gw.newAccount('0')
      const problems: string[] = []
      const openai = new OpenAI({
        apiKey: key,
        baseURL: `${gw.url}/openai/v1`,
        maxRetries: 0,
        // Every facade answer checked against OpenAI's published schemas.
        fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
          const response = await fetch(input, init)
          const url = new URL(input instanceof Request ? input.url : input.toString())
          const name = schemaFor(init?.method ?? 'GET', url.pathname, response.status)
          if (name && (response.headers.get('content-type') ?? '').includes('json'))
            problems.push(...contractProblems(name, await response.clone().json()))
          return response
        }) as typeof fetch,
      })
      const file = await openai.files.create({
        file: await toFile(Buffer.from(jsonl(lines(2, 'f'))), 'wait.jsonl'),
        purpose: 'batch',
      })
      const created = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
        // @ts-expect-error extra_body is merged into the JSON body by the SDK
        extra_body: { wait_for_credit: true },
      })
      expect(created.status).toBe('validating')
      expect(created.errors).toBeNull()
      expect(created.in_progress_at).toBeNull()
      // Without it, refused for the credit as on every admission path: 402, nothing stored.
      const refused = await openai.batches
        .create({
          input_file_id: file.id,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        })
        .catch((e: unknown) => e)
      expect(refused).toBeInstanceOf(OpenAI.APIError)
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(402)
      expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('insufficient_quota')
      expect((await openai.batches.list()).data.map((batch) => batch.id)).toEqual([created.id])
      await deposit(accountId, '0.001')
      const finished = await waitFor(
        'the facade batch to complete',
        async () => {
          const batch = await openai.batches.retrieve(created.id)
          return batch.status === 'completed' && batch
        },
        15_000,
      )
      expect(finished.request_counts).toEqual({ total: 2, completed: 2, failed: 0 })
      const output = (await (await openai.files.content(finished.output_file_id!)).text())
        .trim()
        .split('\n')
      expect(output).toHaveLength(2)
      expect(problems).toEqual([])
    })
  })
}

describe.skipIf(!TEST_DATABASE_URL)(
  'waiting for a top-up on two instances sharing one PostgreSQL',
  () => {
    let sim: Simulator
    let a: TestGateway
    let b: TestGateway
    const shared = TEST_DATABASE_URL ? freshSchemaUrl(TEST_DATABASE_URL).url : ''
    // The polls so slow that only the store channel's nudge can explain a start within seconds.
    const start = (second: boolean, env: Record<string, string>) =>
      startTestGateway({
        sharesSchema: second,
        upstreams: { openai: `${sim.url}/v1` },
        env: { DATABASE_URL: shared, MULTIGRID_CREDIT_WAIT_POLL_MS: '60000', ...env },
      })
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 5 })
      a = await start(false, {})
      // API only: what starts a batch here is this instance's waiting pass, not its dispatcher.
      b = await start(true, { MULTIGRID_DISPATCH: '0' })
    })
    afterAll(async () => {
      await b?.stop()
      await a?.stop()
      await sim.stop()
    })

    const submit = (gw: TestGateway, key: string, n: number) =>
      gw.request('/v1/batches?wait_for_credit=true', key, {
        method: 'POST',
        body: jsonl(lines(n)),
      })
    const statusOf = async (gw: TestGateway, key: string, id: string) =>
      ((await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch).status

    test('a deposit on another instance starts the batch within seconds, and the first instance runs it', async () => {
      const { accountId, key } = await a.newAccount('0')
      const { id } = (await (await submit(a, key, 2)).json()) as Batch
      const at = performance.now()
      await b.admin(`/accounts/${accountId}/credits`, { body: { amount_usd: '1' } })
      await waitFor(
        'the batch to complete',
        async () => (await statusOf(a, key, id)) === 'completed',
        5_000,
        20,
      )
      console.log(
        `wait for credit, two instances: deposit on the other instance → completed in ${Math.round(performance.now() - at)} ms`,
      )
    })

    test('a deposit by the CLI, which no instance served, is heard by every instance on the store channel', async () => {
      const { accountId, key } = await a.newAccount('0')
      const { id } = (await (await submit(b, key, 1)).json()) as Batch
      const at = performance.now()
      const cli = Bun.spawn(
        [process.execPath, 'src/cli/admin.ts', 'accounts', 'credit', accountId, '1'],
        {
          cwd: join(import.meta.dir, '../..'),
          env: {
            DATABASE_URL: shared,
            MULTIGRID_CONFIG: a.env.MULTIGRID_CONFIG!,
            PATH: process.env.PATH ?? '',
          },
          stdout: 'ignore',
          stderr: 'pipe',
        },
      )
      expect(await cli.exited).toBe(0)
      await waitFor(
        'the batch to complete',
        async () => (await statusOf(b, key, id)) === 'completed',
        5_000,
        20,
      )
      console.log(
        `wait for credit, CLI deposit → completed in ${Math.round(performance.now() - at)} ms (polls every 60 s)`,
      )
    })

    test('both instances looking at once never start a batch twice: each account holds exactly what its started batches hold', async () => {
      // A schema of their own, where nothing dispatches: what is held stays to be counted.
      const own = freshSchemaUrl(TEST_DATABASE_URL!).url
      const fast = (second: boolean) =>
        startTestGateway({
          sharesSchema: second,
          upstreams: { openai: `${sim.url}/v1` },
          env: { DATABASE_URL: own, MULTIGRID_CREDIT_WAIT_POLL_MS: '100', MULTIGRID_DISPATCH: '0' },
        })
      const c = await fast(false)
      const d = await fast(true)
      try {
        const accounts: { accountId: string; key: string; ids: string[] }[] = []
        for (let i = 0; i < 4; i++) {
          const { accountId, key } = await c.newAccount('0', {}, { max_open_batches: 50 })
          const ids: string[] = []
          for (let j = 0; j < 5; j++)
            ids.push(((await (await submit(j % 2 ? c : d, key, 1)).json()) as Batch).id)
          accounts.push({ accountId, key, ids })
        }
        // Each deposit covers three of the account's five batches (0.000093 each) and a part.
        await Promise.all(
          accounts.map(({ accountId }, i) =>
            (i % 2 ? c : d).admin(`/accounts/${accountId}/credits`, {
              body: { amount_usd: '0.0003' },
            }),
          ),
        )
        for (const { accountId, key, ids } of accounts) {
          const statuses = () => Promise.all(ids.map((id) => statusOf(d, key, id)))
          await waitFor(
            'the earliest three to start',
            async () =>
              (await statuses()).filter((status) => status === 'in_progress').length === 3,
            5_000,
          )
          // More passes on both instances change nothing.
          await Bun.sleep(400)
          expect(await statuses()).toEqual([
            'in_progress',
            'in_progress',
            'in_progress',
            'validating',
            'validating',
          ])
          // Three ceilings held, not more: no batch was started twice.
          const view = (await (await c.admin(`/accounts/${accountId}`)).json()) as Record<
            string,
            string
          >
          expect(view).toMatchObject({ held_usd: '0.000279', available_usd: '0.000021' })
        }
      } finally {
        await d.stop()
        await c.stop()
      }
    })
  },
)
