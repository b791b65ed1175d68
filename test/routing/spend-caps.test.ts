/**
 * Per-batch spend caps (docs/money-and-limits.md `max_cost_usd`) over real HTTP, with the simulator upstream:
 * bad values are refused with what to send; a cap lets a batch in whose ceiling the credit could
 * not hold; the cap holds exactly (never a micro-dollar over), also when the upstream reports
 * more usage than the ceiling allows; the lines that cannot fit end cancelled with
 * max_cost_reached and the batch completes; the OpenAI SDK sets it through extra_body and finds
 * those lines in the error file.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import OpenAI, { toFile } from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { contractProblems } from '../helpers/openai-contract.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

interface NativeBatch {
  id: string
  status: string
  cost_usd: string
  cost_ceiling_usd: string
  max_cost_usd: string | null
  request_counts: Record<string, number>
  routing: { providers: Record<string, { cost_usd: string; succeeded: number }> }
  waiting: { code: string; message: string } | null
}
interface Row {
  custom_id: string
  status: string
  cost_usd?: string
  error: { code: string; message: string } | null
}

/** 40 lines of one size: each has the same ceiling, and costs a fraction of it. */
const LINES = Array.from({ length: 40 }, (_, i) =>
  chatLine(`cap-${String(i).padStart(2, '0')}`, `spend cap question number ${i % 10}`, {
    max_tokens: 64,
  }),
)

for (const storeKind of STORES) {
  describe(`spend caps (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 20 })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const submit = (key: string, query: string, lines: unknown[] = LINES) =>
      gw.request(`/v1/batches${query}`, key, {
        method: 'POST',
        body: jsonl(lines),
        headers: { 'content-type': 'application/jsonl' },
      })
    const finished = (key: string, id: string) =>
      waitFor(
        'the batch to finish',
        async () => {
          const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as NativeBatch
          return FINAL_BATCH.includes(batch.status) ? batch : null
        },
        30_000,
      )
    const results = async (key: string, id: string) =>
      (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Row)
    /** What the whole file costs when it runs uncapped (the simulator's replies are deterministic). */
    let uncappedCost: Decimal | null = null
    const fullCost = async () => {
      if (uncappedCost) return uncappedCost
      const { key } = await gw.newAccount('100')
      const created = (await (await submit(key, '')).json()) as NativeBatch
      uncappedCost = new Decimal((await finished(key, created.id)).cost_usd)
      return uncappedCost
    }
    /** Half of what the file costs: some lines must be left out, and several fit. */
    const halfCap = async (ceiling: Decimal) => {
      const cap = Decimal.max((await fullCost()).div(2), ceiling.div(LINES.length).times(3))
      return cap.toDecimalPlaces(6)
    }
    const ceilingOf = async (key: string) => {
      const quote = (await (await submit(key, '?dry_run=true')).json()) as {
        cost_ceiling_usd: string
      }
      return new Decimal(quote.cost_ceiling_usd)
    }

    test('a bad max_cost_usd is a 400 that says what to send', async () => {
      const { key } = await gw.newAccount('10')
      // The bound and the notation are said too: a value above 0 is refused only for them.
      for (const bad of [
        '0',
        '-1',
        'abc',
        '1e3',
        '$5',
        ' 5',
        '0.000',
        '',
        '1000000000000',
        '00.5',
      ]) {
        const response = await submit(key, `?max_cost_usd=${encodeURIComponent(bad)}`)
        expect(response.status).toBe(400)
        const { error } = (await response.json()) as { error: { message: string; param: string } }
        expect(error.param).toBe('max_cost_usd')
        expect(error.message).toContain(
          'max_cost_usd must be a decimal amount of USD greater than 0',
        )
        expect(error.message).toContain(
          'below 1000000000000, in plain notation with no extra leading zero ("0.25", not "00.25" or "007")',
        )
        expect(error.message).toContain('"5"')
        // The example is given once, in the fix, not repeated after it.
        expect(error.message.split('such as')).toHaveLength(2)
      }
      // Nothing was stored.
      const list = (await (await gw.request('/v1/batches', key)).json()) as { data: unknown[] }
      expect(list.data).toHaveLength(0)
    })

    test('a dry run names each line whose own ceiling is above the cap (it could never start); the submit is still admitted and those lines end max_cost_reached', async () => {
      const { key } = await gw.newAccount('10')
      const lines = [
        chatLine('small', 'a short answer', { max_tokens: 16 }),
        chatLine('large', 'a long answer', { max_tokens: 4000 }),
        chatLine('small-2', 'another short answer', { max_tokens: 16 }),
      ]
      const send = (query: string, body: unknown[]) =>
        gw.request(`/v1/batches${query}`, key, { method: 'POST', body: jsonl(body) })
      const ceilingAlone = async (line: unknown) =>
        new Decimal(
          ((await (await send('?dry_run=true', [line])).json()) as { cost_ceiling_usd: string })
            .cost_ceiling_usd,
        )
      const small = await ceilingAlone(lines[0])
      const large = await ceilingAlone(lines[1])
      const cap = small.times(3).toDecimalPlaces(6)
      expect(cap.lessThan(large)).toBe(true)
      type Quote = {
        warnings: { line: number; custom_id: string; param: string; message: string; fix: string }[]
        warnings_omitted: number
      }
      const quote = (await (await send(`?dry_run=true&max_cost_usd=${cap}`, lines)).json()) as Quote
      expect(quote.warnings).toHaveLength(1)
      expect(quote.warnings[0]).toMatchObject({
        line: 2,
        custom_id: 'large',
        param: 'max_cost_usd',
      })
      expect(quote.warnings[0]!.message).toContain(`$${large.toFixed(6)}`)
      expect(quote.warnings[0]!.message).toContain('never starts')
      expect(quote.warnings[0]!.fix).toContain(`at least $${large.toFixed(6)}`)
      // A cap that each line fits under warns of none; without a cap, none either.
      const roomy = (await (
        await send(`?dry_run=true&max_cost_usd=${large}`, lines)
      ).json()) as Quote
      expect(roomy.warnings).toEqual([])
      expect(((await (await send('?dry_run=true', lines)).json()) as Quote).warnings).toEqual([])
      // What the warning said happens: admitted, the large line cancelled, the others run.
      const created = await send(`?max_cost_usd=${cap}`, lines)
      expect(created.status).toBe(201)
      const batch = await finished(key, ((await created.json()) as NativeBatch).id)
      const rows = await results(key, batch.id)
      expect(rows.map((row) => [row.custom_id, row.status, row.error?.code ?? null])).toEqual([
        ['small', 'succeeded', null],
        ['large', 'cancelled', 'max_cost_reached'],
        ['small-2', 'succeeded', null],
      ])
    })

    test('a cap the credit covers admits a batch whose ceiling it does not, and holds the cap', async () => {
      const probe = await gw.newAccount('100')
      const ceiling = await ceilingOf(probe.key)
      const credit = ceiling.div(2).toDecimalPlaces(6)
      const { key, accountId } = await gw.newAccount(credit.toFixed())
      const refused = await submit(key, '')
      expect(refused.status).toBe(402)
      expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
        'max_cost_usd',
      )
      const cap = credit.div(2).toDecimalPlaces(6)
      const quote = (await (await submit(key, `?dry_run=true&max_cost_usd=${cap}`)).json()) as {
        credit_sufficient: boolean
        max_cost_usd: string
      }
      expect(quote).toMatchObject({ credit_sufficient: true, max_cost_usd: cap.toFixed() })
      const created = await submit(key, `?max_cost_usd=${cap}`)
      expect(created.status).toBe(201)
      const batch = (await created.json()) as NativeBatch
      expect(batch.max_cost_usd).toBe(new Decimal(cap).toFixed())
      expect(batch.cost_ceiling_usd).toBe(ceiling.toFixed(6))
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        held_usd: string
      }
      expect(new Decimal(account.held_usd).lessThanOrEqualTo(cap)).toBe(true)
      await finished(key, batch.id)
    })

    for (const [label, usageFactor] of [
      ['honest usage', 1],
      ['an upstream that reports 20× the usage, past every ceiling', 20],
    ] as const) {
      test(`the cap holds exactly and the rest end max_cost_reached (${label})`, async () => {
        sim.configure({ usageFactor })
        try {
          const { key, accountId } = await gw.newAccount('100')
          const ceiling = await ceilingOf(key)
          const cap = await halfCap(ceiling)
          expect(cap.lessThan(await fullCost())).toBe(true)
          const created = (await (await submit(key, `?max_cost_usd=${cap}`)).json()) as NativeBatch
          const batch = await finished(key, created.id)
          expect(batch.status).toBe('completed')
          const cost = new Decimal(batch.cost_usd)
          expect(cost.lessThanOrEqualTo(cap)).toBe(true)
          const rows = await results(key, created.id)
          const ran = rows.filter((row) => row.status === 'succeeded')
          const stopped = rows.filter((row) => row.status === 'cancelled')
          expect(ran.length).toBeGreaterThan(0)
          expect(stopped.length).toBeGreaterThan(0)
          expect(ran.length + stopped.length).toBe(LINES.length)
          for (const row of stopped) {
            expect(row.error?.code).toBe('max_cost_reached')
            expect(row.cost_usd).toBe('0.000000')
          }
          // What the lines cost is what the batch and the account were charged, and no more.
          const sum = rows.reduce((total, row) => total.plus(row.cost_usd ?? 0), new Decimal(0))
          expect(sum.equals(cost)).toBe(true)
          const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
            balance_usd: string
            held_usd: string
          }
          expect(new Decimal(100).minus(account.balance_usd).equals(cost)).toBe(true)
          expect(account.held_usd).toBe('0.000000')
          expect(batch.waiting?.code).toBe('max_cost_reached')
          expect(batch.waiting?.message).toContain(`${stopped.length} lines did not run`)
          expect(batch.waiting?.message).toContain('higher max_cost_usd')
          expect(new Decimal(batch.routing.providers.sim!.cost_usd).equals(cost)).toBe(true)
          // Each line is let in for its ceiling: never more than that can be billed for it.
          const each = ceiling.div(LINES.length)
          for (const row of ran)
            expect(new Decimal(row.cost_usd!).lessThanOrEqualTo(each.plus('0.000001'))).toBe(true)
        } finally {
          sim.configure({ usageFactor: 1 })
        }
      })
    }

    test('a batch whose next line does not fit waits max_cost_reached while lines are in flight', async () => {
      sim.configure({ latencyMs: 1500 })
      try {
        const { key } = await gw.newAccount('100')
        const each = (await ceilingOf(key)).div(LINES.length)
        // Room for one line's ceiling and a half: one runs, the next waits for it.
        const cap = each.times(1.5).toDecimalPlaces(6)
        const created = (await (await submit(key, `?max_cost_usd=${cap}`)).json()) as NativeBatch
        const waiting = await waitFor('the cap to hold lines back', async () => {
          const batch = (await (
            await gw.request(`/v1/batches/${created.id}`, key)
          ).json()) as NativeBatch
          return batch.waiting ? batch : null
        })
        expect(waiting.status).toBe('in_progress')
        expect(waiting.request_counts.running).toBe(1)
        expect(waiting.waiting!.code).toBe('max_cost_reached')
        expect(waiting.waiting!.message).toContain(`max_cost_usd ($${cap.toFixed(6)})`)
        expect(waiting.waiting!.message).toContain('Nothing to do now')
      } finally {
        sim.configure({ latencyMs: 20 })
      }
    })

    test('the OpenAI SDK sets the cap through extra_body; stopped lines are in the error file', async () => {
      const { key } = await gw.newAccount('100')
      const ceiling = await ceilingOf(key)
      const cap = (await halfCap(ceiling)).toFixed()
      const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
      const file = await openai.files.create({
        file: await toFile(Buffer.from(jsonl(LINES)), 'capped.jsonl'),
        purpose: 'batch',
      })
      const bad = await openai.batches
        .create({
          input_file_id: file.id,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
          // @ts-expect-error Multigrid's own parameter
          extra_body: { max_cost_usd: 'five' },
        })
        .then(
          () => null,
          (error: unknown) => error,
        )
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError)
      expect((bad as Error).message).toContain('max_cost_usd must be a decimal amount of USD')
      const created = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
        // @ts-expect-error Multigrid's own parameter
        extra_body: { max_cost_usd: cap },
      })
      expect(contractProblems('Batch', created)).toEqual([])
      const done = await waitFor(
        'the facade batch to finish',
        async () => {
          const batch = await openai.batches.retrieve(created.id)
          return FINAL_BATCH.includes(batch.status) ? batch : null
        },
        30_000,
      )
      expect(contractProblems('Batch', done)).toEqual([])
      expect(done.status).toBe('completed')
      expect(done).not.toHaveProperty('max_cost_usd')
      expect(done).not.toHaveProperty('waiting')
      const errors = (await (await openai.files.content(done.error_file_id!)).text())
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { error: { code: string } })
      expect(errors.length).toBe(done.request_counts!.failed)
      expect(errors.length).toBeGreaterThan(0)
      for (const line of errors) expect(line.error.code).toBe('max_cost_reached')
      // The same batch on the native surface carries the cap.
      const native = (await (
        await gw.request(`/v1/batches/${created.id}`, key)
      ).json()) as NativeBatch
      expect(native.max_cost_usd).toBe(new Decimal(cap).toFixed())
      expect(new Decimal(native.cost_usd).lessThanOrEqualTo(cap)).toBe(true)
    })
  })
}
