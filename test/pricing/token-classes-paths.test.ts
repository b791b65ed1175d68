/**
 * Exact list price by token class on every path that reaches a provider (docs/pricing.md,
 * docs/batch-lanes.md, docs/clients/): the Responses API and the Anthropic Messages API, whole and
 * streamed, passed through and translated both ways; the flex lane; native batch lines and a
 * Message Batch on the providers' batch lanes. Each is charged Σ tokens × its class's rate at its
 * tier, at the rates of the lane that answered, to the last decimal: read from the usage the
 * caller was shown, in that API's own shape. token-classes.test.ts covers chat completions.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { specCost, type Classes, type Rates } from '../helpers/spec-cost.ts'

const rates = (input: string, output: string, cached: string, write: string, write1h?: string) => ({
  input_usd_per_mtok: input,
  output_usd_per_mtok: output,
  cached_input_usd_per_mtok: cached,
  cache_write_usd_per_mtok: write,
  ...(write1h ? { cache_write_1h_usd_per_mtok: write1h } : {}),
})
type Tier = Omit<Rates, 'long_context'>
const tiered = (base: Tier, long: Tier): Rates => ({
  ...base,
  long_context: { above_input_tokens: 60, ...long },
})

/** Each lane at rates of its own, so a line priced at another lane's rates cannot pass. */
const RATES: Record<string, Rates> = {
  'gpt:live': tiered(rates('1.25', '10', '0.125', '1.5625'), rates('2.5', '15', '0.25', '3.1')),
  'gpt:flex': tiered(rates('0.625', '5', '0.0625', '0.78'), rates('1.3', '7.7', '0.13', '1.6')),
  'gpt:batch': tiered(rates('0.6', '4.9', '0.061', '0.77'), rates('1.1', '7.1', '0.11', '1.4')),
  'chat:live': tiered(rates('1.7', '9.3', '0.17', '2.1'), rates('3.4', '18.6', '0.34', '4.2')),
  'claude:live': tiered(
    rates('3', '15', '0.30', '3.75', '6'),
    rates('6', '22.5', '0.6', '7.5', '12'),
  ),
  'claude:batch': tiered(
    rates('1.5', '7.5', '0.15', '1.875', '3'),
    rates('3.1', '11.3', '0.31', '3.9', '6.2'),
  ),
}

function catalog(sim: Simulator) {
  const provider = { max_concurrency: 8, timeout_s: 10 }
  const lane = { lane: 'batch', poll_s: 0.05, min_hours_left: 1, fallback_hours: 0.5 }
  const offering = (name: string, upstream: string, extra = {}) => ({
    provider: name,
    upstream_model: upstream,
    ...extra,
  })
  const model = (id: string, offerings: unknown[]) => ({
    id,
    endpoints: ['chat'],
    context_tokens: 32000,
    max_output_tokens: 1024,
    offerings,
  })
  return {
    providers: {
      sim: { kind: 'openai', base_url: `${sim.url}/v1`, responses_api: true, ...provider },
      'sim-chat': { kind: 'openai', base_url: `${sim.url}/v1`, ...provider },
      'sim-anthropic': {
        kind: 'anthropic',
        base_url: sim.url,
        api_key_env: 'MG_TEST_ANTHROPIC_KEY',
        ...provider,
      },
    },
    models: [
      model('p/gpt', [
        offering('sim', 'sim-chat', RATES['gpt:live']),
        offering('sim', 'sim-chat', { ...RATES['gpt:flex'], lane: 'flex' }),
        offering('sim', 'sim-chat', { ...RATES['gpt:batch'], ...lane }),
      ]),
      model('p/chat', [offering('sim-chat', 'sim-chat', RATES['chat:live'])]),
      model('p/claude', [
        offering('sim-anthropic', 'claude-sim', RATES['claude:live']),
        offering('sim-anthropic', 'claude-sim', { ...RATES['claude:batch'], ...lane }),
      ]),
    ],
  }
}

/** The SPEC's cost of a line answered on `lane`. */
const laneCost = (lane: string, t: Classes) => specCost(RATES[lane], t)

type Counts = Record<string, number | undefined | null | Record<string, number | undefined>>
const n = (value: unknown) => (typeof value === 'number' ? value : 0)

/** The classes of a usage as the caller was shown it: chat's, a Response's or Anthropic's shape. */
function classesOf(usage: Counts, write1h: number): Classes {
  if ('prompt_tokens' in usage || 'input_tokens_details' in usage) {
    const details = (usage.prompt_tokens_details ?? usage.input_tokens_details ?? {}) as Counts
    return {
      prompt: n(usage.prompt_tokens ?? usage.input_tokens),
      cached: n(details.cached_tokens),
      write5m: n(details.cache_write_tokens) - write1h,
      write1h,
      output: n(usage.completion_tokens ?? usage.output_tokens),
    }
  }
  const read = n(usage.cache_read_input_tokens)
  const written = n(usage.cache_creation_input_tokens)
  const hour = n((usage.cache_creation as Counts | undefined)?.ephemeral_1h_input_tokens)
  return {
    prompt: n(usage.input_tokens) + read + written,
    cached: read,
    write5m: written - hour,
    write1h: hour,
    output: n(usage.output_tokens),
  }
}

const LONG = 'a long document that passes the long-context threshold '.repeat(6)
/** A short prompt and one above the tier's 60 tokens, each with cache reads and writes. */
const PROMPTS = ['hello [sim:cache read=4 write=5]', `${LONG} [sim:cache read=30 write=7]`]
const HOUR = `${LONG} [sim:cache read=20 write=10 write1h=5]`

/** The usage of a whole answer or of a stream's last report, in the API's own events. */
async function usageOf(response: Response, stream: boolean): Promise<Counts> {
  if (!stream) return ((await response.json()) as { usage: Counts }).usage
  const events = (await response.text())
    .split('\n\n')
    .map((event) => event.split('\n').find((line) => line.startsWith('data: {')))
    .filter((line): line is string => line !== undefined)
    .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>)
  const completed = events.find((e) => e.type === 'response.completed')
  if (completed) return (completed.response as { usage: Counts }).usage
  const start = events.find((e) => e.type === 'message_start')
  if (start) {
    // Anthropic: message_start's usage, each figure message_delta reports taking its place.
    const usage = { ...(start.message as { usage: Counts }).usage }
    for (const delta of events.filter((e) => e.type === 'message_delta'))
      for (const [name, value] of Object.entries(delta.usage as Counts))
        if (value !== null) usage[name] = value
    return usage
  }
  return events.find((e) => e.usage)!.usage as Counts
}

/** A call to one API for one model, with the prompt and (for Anthropic) its cache_control. */
function callBody(api: string, model: string, text: string, stream: boolean) {
  const ttl = text === HOUR ? { ttl: '1h' } : {}
  const part = {
    type: 'text',
    text,
    ...(model === 'p/claude' ? { cache_control: { type: 'ephemeral', ...ttl } } : {}),
  }
  const streamed = stream ? { stream: true } : {}
  if (api === '/v1/responses') return { model, max_output_tokens: 40, input: text, ...streamed }
  const usage =
    stream && api === '/v1/chat/completions' ? { stream_options: { include_usage: true } } : {}
  return {
    model,
    max_tokens: 40,
    messages: [{ role: 'user', content: [part] }],
    ...streamed,
    ...usage,
  }
}

const LIVE_LANE: Record<string, string> = {
  'p/gpt': 'gpt:live',
  'p/chat': 'chat:live',
  'p/claude': 'claude:live',
}
const APIS = ['/v1/responses', '/anthropic/v1/messages']

for (const storeKind of STORES) {
  describe(`token classes on every path (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ batchTurnaroundMs: 200 })
      gw = await startTestGateway({
        store: storeKind,
        catalog: catalog(sim),
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const balanceOf = async (accountId: string) =>
      new Decimal(
        ((await (await gw.admin(`/accounts/${accountId}`)).json()) as { balance_usd: string })
          .balance_usd,
      )

    /** Sends one call and waits for the account to be charged; the charge and the SPEC's cost. */
    async function charged(api: string, body: Record<string, unknown>, lane: string) {
      const { key, accountId } = await gw.newAccount('10')
      const response = await gw.request(api, key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      expect(response.status).toBe(200)
      const usage = await usageOf(response, body.stream === true)
      const write1h = JSON.stringify(body).includes('write1h=5') ? 5 : 0
      const expected = laneCost(lane, classesOf(usage, write1h))
      const settled = async () => new Decimal(10).minus(await balanceOf(accountId))
      await waitFor('the call to settle', async () => (await settled()).equals(expected), 10_000)
      return { charged: (await settled()).toFixed(), expected }
    }

    test('the Responses and Anthropic APIs, whole and streamed, passed through and translated', async () => {
      for (const api of APIS)
        for (const model of Object.keys(LIVE_LANE))
          for (const text of PROMPTS)
            for (const stream of [false, true]) {
              const body = callBody(api, model, text, stream)
              const { charged: got, expected } = await charged(api, body, LIVE_LANE[model])
              expect(`${api} ${model} ${stream} ${got}`).toBe(
                `${api} ${model} ${stream} ${expected}`,
              )
            }
      // Anthropic's 1-hour writes, passed through.
      for (const stream of [false, true]) {
        const body = callBody('/anthropic/v1/messages', 'p/claude', HOUR, stream)
        const { charged: got, expected } = await charged(
          '/anthropic/v1/messages',
          body,
          'claude:live',
        )
        expect(got).toBe(expected)
      }
    })

    test("a live call asked onto the flex lane is charged the flex lane's rates", async () => {
      for (const api of ['/v1/chat/completions', '/v1/responses'])
        for (const stream of [false, true]) {
          const body = {
            ...callBody(api, 'p/gpt', PROMPTS[1], stream),
            provider: { order: ['sim:flex'] },
          }
          const { charged: got, expected } = await charged(api, body, 'gpt:flex')
          expect(got).toBe(expected)
        }
    })

    test("batch lines on each lane cost their lane's rates; the batch, its providers and the balance add up", async () => {
      const { key, accountId } = await gw.newAccount('10')
      const routes: [string, string[]][] = [
        ['p/gpt', ['sim']],
        ['p/gpt', ['sim:flex']],
        ['p/gpt', ['sim:batch', 'sim']],
        ['p/claude', ['sim-anthropic:batch', 'sim-anthropic']],
      ]
      const lines = routes.flatMap(([model, only], r) =>
        [...PROMPTS, ...(model === 'p/claude' ? [HOUR] : [])].map((text, p) => ({
          custom_id: `r${r}-p${p}`,
          method: 'POST',
          url: '/v1/chat/completions',
          body: { ...callBody('/v1/chat/completions', model, text, false), provider: { only } },
        })),
      )
      const created = await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      type Batch = {
        status: string
        cost_usd: string
        routing: { providers: Record<string, { cost_usd: string }> }
      }
      const batch = await waitFor(
        'the batch to finish',
        async () => {
          const b = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
          return FINAL_BATCH.includes(b.status) && b
        },
        60_000,
      )
      expect(batch.status).toBe('completed')
      const text = await (await gw.request(`/v1/batches/${id}/results`, key)).text()
      let total = new Decimal(0)
      const byProvider = new Map<string, Decimal>()
      for (const result of text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))) {
        const { provider, cost_usd: cost } = result as { provider: string; cost_usd: string }
        const model = provider.startsWith('sim-anthropic') ? 'claude' : 'gpt'
        const lane = `${model}:${provider.split(':')[1] ?? 'live'}`
        const write1h = result.custom_id.endsWith('p2') ? 5 : 0
        const expected = laneCost(lane, classesOf(result.response.body.usage, write1h))
        expect(`${result.custom_id} ${provider} ${new Decimal(cost).toFixed()}`).toBe(
          `${result.custom_id} ${provider} ${expected}`,
        )
        total = total.plus(cost)
        byProvider.set(provider, (byProvider.get(provider) ?? new Decimal(0)).plus(cost))
      }
      // Every lane was used, and each lane's share is the sum of its lines.
      expect([...byProvider.keys()].sort()).toEqual(
        ['sim', 'sim-anthropic:batch', 'sim:batch', 'sim:flex'].sort(),
      )
      for (const [provider, cost] of byProvider)
        expect(cost.equals(batch.routing.providers[provider].cost_usd)).toBe(true)
      expect(total.equals(batch.cost_usd)).toBe(true)
      expect((await balanceOf(accountId)).equals(new Decimal(10).minus(total))).toBe(true)
    })

    test('a Message Batch on the batch lanes costs the lanes’ rates, translated lines too', async () => {
      const { key, accountId } = await gw.newAccount('10')
      const request = (id: string, model: string, text: string) => {
        const { model: _, ...params } = callBody('/anthropic/v1/messages', model, text, false)
        return { custom_id: id, params: { model, ...params } }
      }
      const requests = [
        request('c-short', 'p/claude', PROMPTS[0]),
        request('c-hour', 'p/claude', HOUR),
        request('g-long', 'p/gpt', PROMPTS[1]),
        request('o-long', 'p/chat', PROMPTS[1]),
      ]
      const created = await gw.request('/anthropic/v1/messages/batches', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ requests }),
      })
      expect(created.status).toBe(200)
      const native = `batch_${((await created.json()) as { id: string }).id.slice('msgbatch_'.length)}`
      const batch = await waitFor(
        'the Message Batch to end',
        async () => {
          const b = (await (await gw.request(`/v1/batches/${native}`, key)).json()) as {
            status: string
            cost_usd: string
          }
          return FINAL_BATCH.includes(b.status) && b
        },
        60_000,
      )
      const text = await (await gw.request(`/v1/batches/${native}/results`, key)).text()
      const lanes: Record<string, string> = {
        'sim-anthropic:batch': 'claude:batch',
        'sim:batch': 'gpt:batch',
        'sim-chat': 'chat:live',
      }
      let total = new Decimal(0)
      for (const result of text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))) {
        // The usage as the Message Batch's results show it: Anthropic's shape, translated or not.
        const usage = result.response.body.usage as Counts
        const expected = laneCost(lanes[result.provider], classesOf(usage, 0))
        expect(`${result.custom_id} ${new Decimal(result.cost_usd).toFixed()}`).toBe(
          `${result.custom_id} ${expected}`,
        )
        total = total.plus(result.cost_usd)
      }
      expect(total.equals(batch.cost_usd)).toBe(true)
      expect((await balanceOf(accountId)).equals(new Decimal(10).minus(total))).toBe(true)
    })
  })
}
