/**
 * The providers' batch APIs as lanes, end to end (docs/batch-lanes.md): a real gateway whose catalog
 * has batch-lane offerings, against the simulator's OpenAI Files + Batches and Anthropic Message
 * Batches APIs, over HTTP. A batch with ample time runs wholly through provider batches at the
 * lane's prices, in chunks of at most chunk_lines, with upstream ids of the gateway's own and
 * results arriving while it runs; a provider batch not ended by the fallback time is cancelled and
 * what it did not finish runs live; errored lines are retried and expired ones rerun; a cancel
 * reaches the provider.
 */
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import OpenAI, { toFile } from 'openai'
import { summary } from '../../src/cli/progress.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { messageBatchEnded } from '../helpers/message-batches.ts'
import { dashboardCookie, nativeClient } from '../helpers/native-client.ts'
import { CHUNK_LINES, FALLBACK_AFTER_S, laneCatalog } from '../helpers/lane-catalog.ts'

interface Batch {
  id: string
  status: string
  created_at: number
  deadline_at: number
  request_counts: Record<string, number>
  cost_usd: string
  routing: { providers: Record<string, Record<string, unknown>>; eta: number | null }
  waiting: { code: string; message: string; until?: number } | null
}
interface Row {
  custom_id: string
  line: number
  status: string
  provider: string | null
  attempts: number
  cost_usd: string
  response: { status_code: number; body: any } | null
}

const lines = (modelId: string, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    custom_id: `user-${modelId}-${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: {
      model: modelId,
      max_tokens: 16,
      messages: [{ role: 'user', content: `question ${i}` }],
    },
  }))

/** A line's cost from its own usage at these prices per million tokens, to the decimal. */
function priced(
  usage: { prompt_tokens: number; completion_tokens: number },
  input: string,
  output: string,
) {
  return new Decimal(usage.prompt_tokens)
    .times(input)
    .plus(new Decimal(usage.completion_tokens).times(output))
    .div(1_000_000)
}

/** A Response's cost from its own usage (input and output tokens), as priced(). */
const pricedResponse = (
  body: { usage: { input_tokens: number; output_tokens: number } },
  input: string,
  output: string,
) =>
  priced(
    { prompt_tokens: body.usage.input_tokens, completion_tokens: body.usage.output_tokens },
    input,
    output,
  )

const liveChats = (sim: Simulator) => sim.stats().byPath['/v1/chat/completions'] ?? 0
const liveMessages = (sim: Simulator) => sim.stats().byPath['/v1/messages'] ?? 0

for (const storeKind of STORES) {
  describe(`batch lanes over HTTP (${storeKind})`, () => {
    let openai: Simulator
    let anthropic: Simulator
    let gw: TestGateway
    let key: string

    beforeAll(async () => {
      openai = await startSimulator({ latencyMs: 2 })
      anthropic = await startSimulator({ latencyMs: 2, requireApiKey: 'sk-ant-test-secret' })
      gw = await startTestGateway({
        store: storeKind,
        catalog: laneCatalog(openai.url, anthropic.url),
        env: { MULTIGRID_POLL_MS: '20' },
      })
      ;({ key } = await gw.newAccount('100', { rate_limit_per_minute: 100_000 }))
    })
    beforeEach(() => {
      for (const sim of [openai, anthropic]) {
        sim.configure({ batchTurnaroundMs: 300, batchErrorRate: 0, batchExpireMs: null })
        sim.resetStats()
      }
    })
    afterAll(async () => {
      await gw?.stop()
      await openai?.stop()
      await anthropic?.stop()
    })

    const { submit, read, finished, results } = nativeClient<Batch, Row>(
      () => gw,
      () => key,
    )
    test('ample time: every line through OpenAI batches at the lane prices, results while it runs', async () => {
      // The first provider batches end in 300 ms, the later ones take 5 s: results of the first
      // must be readable while the later ones still run.
      const before = openai.batches().jobs.length
      const batch = await submit(jsonl(lines('lane/chat', 22)))
      await waitFor('the first provider batch', async () => openai.batches().jobs.length > before)
      openai.configure({ batchTurnaroundMs: 5_000 })
      const early = await waitFor('a first result', async () => {
        const done = await results(batch.id, '?filter=succeeded')
        return done.length > 0 ? done : null
      })
      const running = openai
        .batches()
        .jobs.slice(before)
        .filter((job) => job.status === 'in_progress')
      expect(early.length).toBeLessThan(22)
      expect(running.length).toBeGreaterThan(0)

      const ended = await finished(batch.id)
      expect(ended.status).toBe('completed')
      expect(ended.request_counts.succeeded).toBe(22)
      expect(liveChats(openai)).toBe(0)
      const jobs = openai.batches().jobs.slice(before)
      expect(jobs.length).toBe(Math.ceil(22 / CHUNK_LINES))
      const userIds = new Set(lines('lane/chat', 22).map((line) => line.custom_id))
      for (const job of jobs) {
        expect(job.customIds.length).toBeLessThanOrEqual(CHUNK_LINES)
        for (const id of job.customIds) {
          expect(userIds.has(id)).toBe(false)
          expect(id).toMatch(/^mg-\d+$/)
        }
        expect(job.metadata?.mg_chunk).toMatch(/^chk_/)
      }
      const rows = await results(batch.id)
      expect(rows.map((row) => row.line)).toEqual(Array.from({ length: 22 }, (_, i) => i + 1))
      let total = new Decimal(0)
      for (const row of rows) {
        expect(row.status).toBe('succeeded')
        expect(row.provider).toBe('sim:batch')
        expect(row.cost_usd).toBe(priced(row.response!.body.usage, '0.5', '1').toFixed())
        total = total.plus(row.cost_usd)
      }
      expect(new Decimal(ended.cost_usd).eq(total)).toBe(true)
      expect(ended.routing.providers['sim:batch']?.succeeded).toBe(22)
      // format=input and filter work on these lines as on any other.
      const inputs = await results(batch.id, '?format=input&filter=succeeded')
      expect(inputs.length).toBe(22)
    }, 60_000)

    test("usage past a line's ceiling: billed as a live line is, never past a capped batch's cap", async () => {
      // Every answer reports 50 times the tokens its bounds allow.
      openai.configure({ usageFactor: 50 })
      try {
        const file = jsonl(lines('lane/chat', 4))
        const quote = (await (
          await gw.request('/v1/batches?dry_run=true', key, { method: 'POST', body: file })
        ).json()) as { cost_ceiling_usd: string }
        const ceiling = new Decimal(quote.cost_ceiling_usd).div(4)
        // Room for two lines' ceilings: each line let in is billed its ceiling at most.
        const cap = ceiling.times(2).toFixed()
        const created = await gw.request(`/v1/batches?max_cost_usd=${cap}`, key, {
          method: 'POST',
          body: file,
        })
        expect(created.status).toBe(201)
        const capped = await finished(((await created.json()) as Batch).id)
        expect(new Decimal(capped.cost_usd).lessThanOrEqualTo(cap)).toBe(true)
        const billed = (await results(capped.id)).filter((row) => row.status === 'succeeded')
        expect(billed.length).toBeGreaterThan(0)
        for (const row of billed) {
          expect(row.provider).toBe('sim:batch')
          expect(new Decimal(row.cost_usd).eq(ceiling)).toBe(true)
          // What the upstream reported is kept; only the bill stops at the ceiling.
          expect(priced(row.response!.body.usage, '0.5', '1').greaterThan(ceiling)).toBe(true)
        }
        // Without a cap, billed in full from its usage.
        const open = await finished((await submit(jsonl(lines('lane/chat', 2)))).id)
        for (const row of await results(open.id)) {
          expect(row.provider).toBe('sim:batch')
          expect(new Decimal(row.cost_usd).eq(priced(row.response!.body.usage, '0.5', '1'))).toBe(
            true,
          )
        }
      } finally {
        openai.configure({ usageFactor: 1 })
      }
    }, 60_000)

    test("an answer without usage is billed on the line's bounds, as a live one is, not sent again", async () => {
      openai.configure({ noUsageRate: 1 })
      try {
        const before = openai.batches().jobs.length
        const batch = await finished((await submit(jsonl(lines('lane/chat', 3)))).id)
        expect(batch.request_counts.succeeded).toBe(3)
        // One provider batch: no line went upstream twice.
        expect(openai.batches().jobs.length - before).toBe(1)
        for (const row of await results(batch.id)) {
          expect(row.provider).toBe('sim:batch')
          expect(row.attempts).toBe(1)
          expect(row.response!.body.usage).toBeUndefined()
          expect(new Decimal(row.cost_usd).greaterThan(0)).toBe(true)
        }
      } finally {
        openai.configure({ noUsageRate: 0 })
      }
    }, 60_000)

    test('Anthropic Message Batches: lines at the lane prices, never live', async () => {
      const before = anthropic.batches().jobs.length
      const batch = await submit(jsonl(lines('lane/claude', 6)))
      const ended = await finished(batch.id)
      expect(ended.status).toBe('completed')
      expect(liveMessages(anthropic)).toBe(0)
      const jobs = anthropic.batches().jobs.slice(before)
      expect(jobs.length).toBe(2)
      for (const job of jobs) for (const id of job.customIds) expect(id).toMatch(/^mg-\d+$/)
      for (const row of await results(batch.id)) {
        expect(row.provider).toBe('claude:batch')
        const usage = row.response!.body.usage
        expect(row.cost_usd).toBe(priced(usage, '1.5', '7.5').toFixed())
      }
    }, 60_000)

    test("the Anthropic SDK's Message Batches: each request into Anthropic's batch as it came, kept as its message at the lane prices", async () => {
      const client = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: key, maxRetries: 0 })
      const before = anthropic.batches().jobs.length
      const params = (i: number) => ({
        model: 'lane/claude',
        max_tokens: 16,
        top_k: 5,
        system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: `question ${i}` }],
      })
      const created = await client.messages.batches.create({
        requests: [0, 1].map((i) => ({ custom_id: `m-${i}`, params: params(i) as never })),
      })
      await messageBatchEnded(client, created.id, 30_000)
      expect(liveMessages(anthropic)).toBe(0)
      const jobs = anthropic.batches().jobs.slice(before)
      expect(jobs.length).toBe(1)
      // As it came, with the upstream's model id and without the gateway's own fields.
      expect(jobs[0].requests).toEqual([0, 1].map((i) => ({ ...params(i), model: 'claude-sim' })))
      const messages = []
      for await (const entry of await client.messages.batches.results(created.id)) {
        if (entry.result.type !== 'succeeded')
          throw new Error(`${entry.custom_id} ${entry.result.type}`)
        messages.push(entry.result.message)
      }
      expect(messages.map((message) => message.model)).toEqual(['claude-sim', 'claude-sim'])
      const nativeId = `batch_${created.id.slice('msgbatch_'.length)}`
      for (const [i, row] of (await results(nativeId)).entries()) {
        expect(row.provider).toBe('claude:batch')
        expect(row.response!.body).toEqual(messages[i])
        const { input_tokens, output_tokens } = messages[i].usage
        const usage = { prompt_tokens: input_tokens, completion_tokens: output_tokens }
        expect(row.cost_usd).toBe(priced(usage, '1.5', '7.5').toFixed())
      }
    }, 60_000)

    test('a Message Batch through an OpenAI batch lane answers in messages that name the model as the caller did', async () => {
      const client = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: key, maxRetries: 0 })
      const before = openai.batches().jobs.length
      const created = await client.messages.batches.create({
        requests: [0, 1].map((i) => ({
          custom_id: `alias-${i}`,
          params: {
            model: 'chat-lane',
            max_tokens: 16,
            messages: [{ role: 'user', content: `q ${i}` }],
          },
        })),
      })
      await messageBatchEnded(client, created.id, 30_000)
      // Sent as chat to the OpenAI batch API, not live.
      expect(openai.batches().jobs.length).toBe(before + 1)
      const models = []
      for await (const entry of await client.messages.batches.results(created.id)) {
        if (entry.result.type !== 'succeeded')
          throw new Error(`${entry.custom_id} ${entry.result.type}`)
        models.push(entry.result.message.model)
      }
      expect(models).toEqual(['chat-lane', 'chat-lane'])
    }, 60_000)

    test("a Message Batch's errored requests retry natively, still Messages requests", async () => {
      const client = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: key, maxRetries: 0 })
      const params = (text: string) => ({
        model: 'lane/claude',
        max_tokens: 16,
        top_k: 5,
        messages: [{ role: 'user', content: text }],
      })
      const created = await client.messages.batches.create({
        requests: [
          { custom_id: 'fine', params: params('question') as never },
          { custom_id: 'refused', params: params('question [sim:batch-invalid]') as never },
        ],
      })
      const ended = await messageBatchEnded(client, created.id, 30_000)
      expect(ended.request_counts.errored).toBe(1)
      const nativeId = `batch_${created.id.slice('msgbatch_'.length)}`
      const retried = await gw.request(`/v1/batches/${nativeId}/retry`, key, { method: 'POST' })
      expect(retried.status).toBe(201)
      const child = (await retried.json()) as { id: string; endpoint: string; line_count: number }
      expect(child.endpoint).toBe('/v1/messages')
      expect(child.line_count).toBe(1)
      // The retry is a Message Batch too, under its own msgbatch_ id.
      const asMessages = await client.messages.batches.retrieve(
        `msgbatch_${child.id.slice('batch_'.length)}`,
      )
      expect(asMessages.type).toBe('message_batch')
      // And listed with the Message Batches, newest first.
      const listed = await client.messages.batches.list({ limit: 2 })
      expect(listed.data.map((batch) => batch.id)).toEqual([asMessages.id, created.id])
    }, 60_000)

    test("two models on one upstream model: each line at its own model's lane price, in the batch's usage and the usage report", async () => {
      const batch = await submit(jsonl(lines('lane/twin', 3)))
      const ended = (await finished(batch.id)) as Batch & {
        usage: { input_tokens: number; output_tokens: number }
      }
      expect(ended.status).toBe('completed')
      const rows = await results(batch.id)
      let input = 0
      let output = 0
      for (const row of rows) {
        expect(row.provider).toBe('sim:batch')
        const usage = row.response!.body.usage
        expect(row.cost_usd).toBe(priced(usage, '0.25', '0.5').toFixed())
        input += usage.prompt_tokens
        output += usage.completion_tokens
      }
      expect(input).toBeGreaterThan(0)
      expect(ended.usage).toMatchObject({ input_tokens: input, output_tokens: output })
      const today = new Date().toISOString().slice(0, 10)
      const reported = await waitFor('the lines in the usage report', async () => {
        const answer = await gw.request(`/v1/usage?from=${today}&to=${today}&group_by=model`, key)
        const body = (await answer.json()) as {
          data: { model: string; lines: number; input_tokens: number; cost_usd: string }[]
        }
        const row = body.data.find((entry) => entry.model === 'lane/twin')
        return row?.lines === 3 ? row : null
      })
      expect(reported.input_tokens).toBe(input)
      expect(new Decimal(reported.cost_usd).eq(ended.cost_usd)).toBe(true)
      const metrics = await (await fetch(`${gw.url}/metrics`)).text()
      expect(metrics).toMatch(/multigrid_lines_total\{[^}]*provider="sim:batch"[^}]*\} \d+/)
      // The lane's own calls (upload, create, polls, the results) are timed as its upstream calls.
      expect(metrics).toMatch(
        /multigrid_upstream_latency_seconds_count\{provider="sim:batch"\} [1-9]/,
      )
    }, 60_000)

    test("a mixed batch: the lane takes its model's lines, the others run live once it has", async () => {
      const batch = await submit(jsonl([...lines('lane/chat', 2), ...lines('lane/none', 2)]))
      const ended = await finished(batch.id)
      expect(ended.status).toBe('completed')
      const rows = await results(batch.id)
      expect(rows.map((row) => row.provider)).toEqual(['sim:batch', 'sim:batch', 'sim', 'sim'])
    }, 60_000)

    test('a mixed batch whose lane lines come later: the lane takes them wherever they stand, the others run live at once', async () => {
      const before = openai.batches().jobs.length
      // Live-only lines first, lane lines after and between them, and one lane/chat line that
      // keeps itself to the live offering (its own routing): it runs live too.
      const pinned = {
        ...lines('lane/chat', 1)[0]!,
        custom_id: 'pinned',
        body: { ...lines('lane/chat', 1)[0]!.body, provider: { only: ['sim'] } },
      }
      const file = [
        ...lines('lane/none', 2),
        ...lines('lane/chat', 2),
        lines('lane/none', 3)[2]!,
        pinned,
        lines('lane/chat', 3)[2]!,
      ]
      const batch = await submit(jsonl(file))
      const ended = await finished(batch.id)
      expect(ended.status).toBe('completed')
      const rows = await results(batch.id)
      expect(rows.map((row) => row.provider)).toEqual([
        'sim',
        'sim',
        'sim:batch',
        'sim:batch',
        'sim',
        'sim',
        'sim:batch',
      ])
      expect(liveChats(openai)).toBe(4)
      const jobs = openai.batches().jobs.slice(before)
      expect(jobs.flatMap((job) => job.customIds).length).toBe(3)
      for (const row of rows.filter((row) => row.provider === 'sim:batch'))
        expect(row.cost_usd).toBe(priced(row.response!.body.usage, '0.5', '1').toFixed())
    }, 60_000)

    test("a line whose own routing puts a batch lane first goes there, though its model's order does not", async () => {
      const [plain, routed] = lines('lane/dear', 2)
      const file = [
        plain!,
        { ...routed!, body: { ...routed!.body, provider: { order: ['sim:batch'] } } },
      ]
      const batch = await submit(jsonl(file))
      const ended = await finished(batch.id)
      expect(ended.status).toBe('completed')
      const rows = await results(batch.id)
      expect(rows.map((row) => row.provider)).toEqual(['sim', 'sim:batch'])
      expect(rows[0]!.cost_usd).toBe(priced(rows[0]!.response!.body.usage, '0.5', '1').toFixed())
      expect(rows[1]!.cost_usd).toBe(priced(rows[1]!.response!.body.usage, '1', '2').toFixed())
    }, 60_000)

    const responsesLines = (modelId: string, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        custom_id: `r-${i}`,
        method: 'POST',
        url: '/v1/responses',
        body: { model: modelId, input: `question ${i}`, max_output_tokens: 16, truncation: 'auto' },
      }))

    test('Responses lines go into OpenAI batches as they came, each answer its Response at the lane prices', async () => {
      const before = openai.batches().jobs.length
      const batch = await submit(jsonl(responsesLines('lane/chat', 5)))
      expect((await finished(batch.id)).status).toBe('completed')
      expect(liveChats(openai)).toBe(0)
      expect(openai.stats().byPath['/v1/responses'] ?? 0).toBe(0)
      const jobs = openai.batches().jobs.slice(before)
      expect(jobs.length).toBe(Math.ceil(5 / CHUNK_LINES))
      // As they came (truncation, outside the translated subset, included), with the upstream's
      // model id and nothing stored upstream.
      expect(jobs.flatMap((job) => job.requests)).toEqual(
        responsesLines('lane/chat', 5).map((line) => ({
          ...line.body,
          model: 'sim-chat',
          store: false,
        })),
      )
      for (const row of await results(batch.id)) {
        expect(row.status).toBe('succeeded')
        expect(row.provider).toBe('sim:batch')
        const body = row.response!.body
        expect(body.object).toBe('response')
        expect(row.cost_usd).toBe(pricedResponse(body, '0.5', '1').toFixed())
      }
    }, 60_000)

    test('Responses lines on a lane whose provider does not speak the Responses API go as chat, each answer its Response at the lane prices', async () => {
      const before = anthropic.batches().jobs.length
      const lines = responsesLines('lane/claude', 2).map((line, i) => {
        const { truncation: _, ...body } = line.body
        return { ...line, body: { ...body, instructions: 'Be brief.', metadata: { n: String(i) } } }
      })
      const batch = await submit(jsonl(lines))
      expect((await finished(batch.id)).status).toBe('completed')
      expect(liveMessages(anthropic)).toBe(0)
      const jobs = anthropic.batches().jobs.slice(before)
      expect(jobs.length).toBe(1)
      // Translated: Anthropic's Messages request of each, its instructions the system prompt.
      expect(jobs[0]!.requests.map((request: any) => request.system)).toEqual([
        'Be brief.',
        'Be brief.',
      ])
      const rows = await results(batch.id)
      rows.forEach((row, i) => {
        expect(row.status).toBe('succeeded')
        expect(row.provider).toBe('claude:batch')
        const body = row.response!.body
        // The Response of its own request: the request's fields echoed, the answer's text.
        expect(body).toMatchObject({
          object: 'response',
          status: 'completed',
          instructions: 'Be brief.',
          metadata: { n: String(i) },
          max_output_tokens: 16,
        })
        expect(body.output[0].content[0].text).toContain(`question ${i}`)
        expect(row.cost_usd).toBe(pricedResponse(body, '1.5', '7.5').toFixed())
      })
    }, 60_000)

    test('the OpenAI SDK unchanged: a facade batch runs through the lane like any other', async () => {
      const before = openai.batches().jobs.length
      const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
      const file = await client.files.create({
        file: await toFile(Buffer.from(jsonl(lines('lane/chat', 5))), 'requests.jsonl'),
        purpose: 'batch',
      })
      const created = await client.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      const batch = await waitFor('the facade batch', async () => {
        const view = await client.batches.retrieve(created.id)
        return ['completed', 'failed', 'cancelled', 'expired'].includes(view.status) ? view : null
      })
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toEqual({ total: 5, completed: 5, failed: 0 })
      const output = (await (await client.files.content(batch.output_file_id!)).text())
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line))
      expect(output.map((line) => line.custom_id).sort()).toEqual(
        lines('lane/chat', 5)
          .map((line) => line.custom_id)
          .sort(),
      )
      expect(openai.batches().jobs.length - before).toBe(2)
      expect(liveChats(openai)).toBe(0)
    }, 60_000)

    test('live calls and lines that ignore the lane never go to it', async () => {
      const before = openai.batches().jobs.length
      const kept = lines('lane/chat', 3).map((line) => ({
        ...line,
        body: { ...line.body, provider: { ignore: ['sim:batch'] } },
      }))
      const batch = await submit(jsonl(kept))
      expect((await finished(batch.id)).status).toBe('completed')
      for (const row of await results(batch.id)) {
        expect(row.provider).toBe('sim')
        expect(row.cost_usd).toBe(priced(row.response!.body.usage, '1', '2').toFixed())
      }
      const call = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(lines('lane/chat', 1)[0]!.body),
      })
      expect(call.status).toBe(200)
      expect(liveChats(openai)).toBe(4)
      expect(openai.batches().jobs.length).toBe(before)
      // The lane alone cannot serve a line: the fix names what routing can, by its names.
      const only = lines('lane/chat', 1).map((line) => ({
        ...line,
        body: { ...line.body, provider: { only: ['sim:batch'] } },
      }))
      const refused = await gw.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body: jsonl(only),
      })
      expect(refused.status).toBe(400)
      const issue = ((await refused.json()) as { issues: { path: string; fix: string }[] })
        .issues[0]
      expect(issue.path).toBe('body.provider')
      expect(issue.fix).toBe('allow one of: sim')
      // The model list names each lane as routing and results do.
      const models = (await (await gw.request('/v1/models', key)).json()) as {
        data: { id: string; pricing: { provider: string; lane: string }[] }[]
      }
      const pricing = models.data.find((m) => m.id === 'lane/chat')!.pricing
      expect(pricing.map((p) => [p.provider, p.lane])).toEqual([
        ['sim', 'live'],
        ['sim:batch', 'batch'],
      ])
    }, 60_000)

    test('a provider batch not ended at the fallback time is cancelled: what it finished is kept, the rest runs live', async () => {
      // 10 s for a chunk: of its 4 lines one is due every 2.5 s, so at the fallback (3–4 s after
      // the chunk's create, created_at being whole seconds) one is done.
      openai.configure({ batchTurnaroundMs: 10_000 })
      const before = openai.batches()
      const batch = await submit(jsonl(lines('lane/soon', CHUNK_LINES)))
      const ended = await finished(batch.id, 30_000)
      expect(ended.status).toBe('completed')
      const after = openai.batches()
      expect(after.cancelled - before.cancelled).toBe(1)
      const rows = await results(batch.id)
      const byLane = rows.filter((row) => row.provider === 'sim:batch')
      const byLive = rows.filter((row) => row.provider === 'sim')
      expect(byLane.length).toBe(1)
      expect(byLive.length).toBe(3)
      expect(liveChats(openai)).toBe(3)
      for (const row of byLane)
        expect(row.cost_usd).toBe(priced(row.response!.body.usage, '0.5', '1').toFixed())
      for (const row of byLive) {
        expect(row.cost_usd).toBe(priced(row.response!.body.usage, '1', '2').toFixed())
        // Returned to pending without an attempt: the live call is its first.
        expect(row.attempts).toBe(1)
      }
      // The lines went live only after the fallback time.
      expect(Date.now() / 1000 - batch.created_at).toBeGreaterThanOrEqual(FALLBACK_AFTER_S - 1)
    }, 60_000)

    const strict = (modelId: string, count: number) =>
      lines(modelId, count).map((line) => ({
        ...line,
        body: { ...line.body, provider: { allow_fallbacks: false } },
      }))

    test('allow_fallbacks false keeps lines to their batch lane: past the fallback time none goes live', async () => {
      openai.configure({ batchTurnaroundMs: 6_000 })
      const before = openai.batches()
      const batch = await submit(jsonl(strict('lane/soon', CHUNK_LINES)))
      // Cancelled at the fallback time, about 4 s into its 6 s: what it finished by then is kept.
      const job = await waitFor(
        'the provider batch cancelled at the fallback time',
        async () =>
          openai
            .batches()
            .jobs.find((job, i) => i >= before.jobs.length && job.status === 'cancelled'),
        15_000,
      )
      expect(job.done).toBeLessThan(CHUNK_LINES)
      const settled = (counts: Record<string, number>) => ({
        succeeded: counts.succeeded,
        failed: counts.failed,
        cancelled: counts.cancelled,
        expired: counts.expired,
        unsettled: counts.pending! + counts.running!,
      })
      const done = await waitFor('what it finished recorded', async () => {
        const view = await read(batch.id)
        return view.request_counts.succeeded === job.done ? view : null
      })
      // Long enough for the live dispatcher (polling every 20 ms) to have sent them, had it.
      await Bun.sleep(1_500)
      const view = await read(batch.id)
      expect(view.status).toBe('in_progress')
      // The rest stay unsettled (a live lane may pick one up, only to hand it back unsent).
      expect(settled(view.request_counts)).toEqual(settled(done.request_counts))
      expect(settled(view.request_counts).unsettled).toBe(CHUNK_LINES - job.done)
      expect(liveChats(openai)).toBe(0)
      expect(openai.batches().jobs.length - before.jobs.length).toBe(1)
      // Why they wait (said once a live lane has looked at them), and that the batch ends no
      // sooner than its deadline, which ends them.
      const told = await waitFor('the reason they wait', async () => {
        const now = await read(batch.id)
        return now.waiting ? now : null
      })
      expect(told.waiting).toMatchObject({ code: 'provider_unavailable', until: view.deadline_at })
      expect(told.waiting!.message).toContain('keep to sim:batch (provider.allow_fallbacks false)')
      expect(told.waiting!.message).toContain(`results?filter=failed&format=input`)
      expect(told.routing.eta).toBe(view.deadline_at)
      expect(liveChats(openai)).toBe(0)
      const kept = await results(batch.id, '?filter=succeeded')
      expect(kept.length).toBe(job.done)
      for (const row of kept) {
        expect(row.provider).toBe('sim:batch')
        expect(row.cost_usd).toBe(priced(row.response!.body.usage, '0.5', '1').toFixed())
      }
      // The rest wait for the deadline; cancelling ends them unsent.
      await gw.request(`/v1/batches/${batch.id}`, key, { method: 'DELETE' })
      const ended = await finished(batch.id)
      expect(ended.status).toBe('cancelled')
      expect(ended.request_counts.cancelled).toBe(CHUNK_LINES - job.done)
      const paid = kept.reduce((sum, row) => sum.plus(row.cost_usd), new Decimal(0))
      expect(new Decimal(ended.cost_usd).eq(paid)).toBe(true)
      expect(liveChats(openai)).toBe(0)
    }, 60_000)

    test('allow_fallbacks false with a window too short for the lane: its first live offering alone', async () => {
      const before = openai.batches().jobs.length
      // lane/soon's lane needs almost 24 h left; a 1 h batch never had it open.
      const response = await gw.request('/v1/batches?completion_window_hours=1', key, {
        method: 'POST',
        body: jsonl(strict('lane/soon', 3)),
        headers: { 'content-type': 'application/jsonl' },
      })
      expect(response.status).toBe(201)
      const batch = (await response.json()) as Batch
      expect((await finished(batch.id)).status).toBe('completed')
      for (const row of await results(batch.id)) {
        expect(row.provider).toBe('sim')
        expect(row.cost_usd).toBe(priced(row.response!.body.usage, '1', '2').toFixed())
      }
      expect(liveChats(openai)).toBe(3)
      expect(openai.batches().jobs.length).toBe(before)
    }, 60_000)

    test("allow_fallbacks false: the ceiling covers the live offering's price as well as the lane's", async () => {
      const quote = async (file: string) => {
        const response = await gw.request('/v1/batches?dry_run=true', key, {
          method: 'POST',
          body: file,
          headers: { 'content-type': 'application/jsonl' },
        })
        expect(response.status).toBe(200)
        return new Decimal(
          ((await response.json()) as { cost_ceiling_usd: string }).cost_ceiling_usd,
        )
      }
      const onlyLive = lines('lane/chat', 5).map((line) => ({
        ...line,
        body: { ...line.body, provider: { only: ['sim'] } },
      }))
      const onlyLane = lines('lane/chat', 5).map((line) => ({
        ...line,
        body: { ...line.body, provider: { order: ['sim:batch'], allow_fallbacks: false } },
      }))
      const live = await quote(jsonl(onlyLive))
      expect(live.gt(0)).toBe(true)
      // Which one serves depends on the batch's window, which the quote of a file cannot know.
      expect((await quote(jsonl(strict('lane/chat', 5)))).toFixed()).toBe(live.toFixed())
      expect((await quote(jsonl(onlyLane))).toFixed()).toBe(live.toFixed())
    }, 60_000)

    test('errored lines are retried and expired ones rerun, in new provider batches', async () => {
      openai.configure({ batchErrorRate: 1 })
      const before = openai.batches().jobs.length
      const failing = await submit(jsonl(lines('lane/chat', 3)))
      await waitFor('the errored chunk to be read', async () => {
        const jobs = openai.batches().jobs.slice(before)
        return jobs.length > 0 && jobs[0]!.status === 'completed'
      })
      openai.configure({ batchErrorRate: 0 })
      const retried = await finished(failing.id)
      expect(retried.request_counts.succeeded).toBe(3)
      for (const row of await results(failing.id)) {
        expect(row.provider).toBe('sim:batch')
        expect(row.attempts).toBe(2)
      }

      // Expires after 200 of 800 ms: one of four lines done, the rest again without an attempt.
      openai.configure({ batchTurnaroundMs: 800, batchExpireMs: 200 })
      const mark = openai.batches().jobs.length
      const expiring = await submit(jsonl(lines('lane/chat', 4)))
      await waitFor('the expired chunk', async () =>
        openai
          .batches()
          .jobs.slice(mark)
          .some((job) => job.status === 'expired'),
      )
      openai.configure({ batchExpireMs: null, batchTurnaroundMs: 200 })
      const rerun = await finished(expiring.id)
      expect(rerun.request_counts.succeeded).toBe(4)
      expect(openai.batches().jobs.length - mark).toBeGreaterThanOrEqual(2)
      for (const row of await results(expiring.id)) expect(row.attempts).toBe(1)
      expect(liveChats(openai)).toBe(0)
    }, 60_000)

    test('cancelling the batch cancels its provider batches', async () => {
      openai.configure({ batchTurnaroundMs: 60_000 })
      const before = openai.batches()
      const batch = await submit(jsonl(lines('lane/chat', 8)))
      await waitFor(
        'both provider batches',
        async () => openai.batches().jobs.length - before.jobs.length === 2,
      )
      // Seen while they wait: running in the lane, in how many provider batches, live from when.
      const waiting = await waitFor('both chunks shown', async () => {
        const view = await read(batch.id)
        return view.routing.providers['sim:batch']?.provider_batches === 2 ? view : null
      })
      const fallbackAt = waiting.deadline_at - 0.5 * 3600
      expect(waiting.routing.providers['sim:batch']).toEqual({
        succeeded: 0,
        failed: 0,
        running: 8,
        cost_usd: '0',
        provider_batches: 2,
        fallback_at: fallbackAt,
      })
      const when = new Date(fallbackAt * 1000).toISOString().slice(0, 16).replace('T', ' ')
      expect(summary(waiting as never)).toContain('sim:batch: 0 ok, 0 failed, 8 running')
      // Lines in a provider batch are running, not pending, in the lines' summary too.
      expect(summary(waiting as never)).toMatch(
        /lines\s+8: 0 succeeded, .*\), 0 pending, 8 running\n/,
      )
      expect(summary(waiting as never)).toContain(`in 2 provider batches; live lanes from ${when}`)
      const cookie = await dashboardCookie(gw.url, key)
      const page = await (
        await fetch(`${gw.url}/dashboard/batches/${batch.id}`, { headers: { cookie } })
      ).text()
      expect(page.replace(/\s+/g, ' ')).toContain('in 2 provider batches; live lanes from')

      const cancel = await gw.request(`/v1/batches/${batch.id}`, key, { method: 'DELETE' })
      expect(cancel.status).toBe(200)
      const ended = await finished(batch.id)
      expect(ended.status).toBe('cancelled')
      expect(openai.batches().cancelled - before.cancelled).toBe(2)
      expect(ended.request_counts.cancelled).toBe(8)
      expect(liveChats(openai)).toBe(0)
    }, 60_000)

    test('a cancel while a provider batch is still being created reaches it too', async () => {
      // Each create takes a second: the cancel comes while the first is under way.
      openai.configure({ batchTurnaroundMs: 60_000, batchCreateMs: 1_000 })
      try {
        const before = openai.batches()
        const batch = await submit(jsonl(lines('lane/chat', 8)))
        await waitFor('the first chunk claimed', async () => {
          const view = await read(batch.id)
          return (view.routing.providers['sim:batch']?.running as number) > 0
        })
        expect(openai.batches().jobs.length).toBe(before.jobs.length)
        const cancel = await gw.request(`/v1/batches/${batch.id}`, key, { method: 'DELETE' })
        expect(cancel.status).toBe(200)
        // Not at the provider batch's end a minute later: once the create answered, it is cancelled.
        const ended = await finished(batch.id, 15_000)
        expect(ended.status).toBe('cancelled')
        expect(ended.request_counts.succeeded).toBe(0)
        const made = openai.batches().jobs.slice(before.jobs.length)
        expect(made.length).toBeGreaterThan(0)
        expect(openai.batches().cancelled - before.cancelled).toBe(made.length)
        expect(liveChats(openai)).toBe(0)
      } finally {
        openai.configure({ batchCreateMs: 0 })
      }
    }, 30_000)
  })
}
