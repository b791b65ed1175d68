/**
 * Exact list price by token class (docs/pricing.md), over real HTTP against the simulator, which reports
 * cache reads and 5-minute/1-hour writes in each provider's shape ([sim:cache …] markers): every
 * line's `cost_usd`, the batch's `cost_usd` and `usage`, a live call's charge (whole and streamed)
 * and the account's balance equal Σ tokens × their class's rate at the line's tier, to the last
 * decimal; no line costs more than the batch's ceiling allows.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { specCost, type Classes, type Rates } from '../helpers/spec-cost.ts'

/** Rates per million tokens, each class and tier (the SPEC's names). */
const GPT = {
  input_usd_per_mtok: '1.25',
  output_usd_per_mtok: '10',
  cached_input_usd_per_mtok: '0.125',
  cache_write_usd_per_mtok: '1.5625',
  long_context: {
    above_input_tokens: 60,
    input_usd_per_mtok: '2.5',
    output_usd_per_mtok: '15',
    cached_input_usd_per_mtok: '0.25',
  },
}
const CLAUDE = {
  input_usd_per_mtok: '3',
  output_usd_per_mtok: '15',
  cached_input_usd_per_mtok: '0.30',
  cache_write_usd_per_mtok: '3.75',
  cache_write_1h_usd_per_mtok: '6',
  long_context: {
    above_input_tokens: 60,
    input_usd_per_mtok: '6',
    output_usd_per_mtok: '22.50',
    cached_input_usd_per_mtok: '0.60',
    cache_write_usd_per_mtok: '7.50',
    cache_write_1h_usd_per_mtok: '12',
  },
}

function catalog(sim: Simulator) {
  const provider = { max_concurrency: 8, timeout_s: 10 }
  return {
    providers: {
      sim: { kind: 'openai', base_url: `${sim.url}/v1`, ...provider },
      'sim-anthropic': {
        kind: 'anthropic',
        base_url: sim.url,
        api_key_env: 'MG_TEST_ANTHROPIC_KEY',
        ...provider,
      },
    },
    models: [
      {
        id: 'cache/gpt',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        offerings: [{ provider: 'sim', upstream_model: 'sim-chat', ...GPT }],
      },
      {
        id: 'cache/claude',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        offerings: [{ provider: 'sim-anthropic', upstream_model: 'claude-sim', ...CLAUDE }],
      },
    ],
  }
}

type Usage = {
  prompt_tokens: number
  completion_tokens: number
  prompt_tokens_details?: { cached_tokens: number; cache_write_tokens: number }
}

/** A line's classes from its OpenAI-shaped usage, the 5m/1h split of its writes from its marker. */
function classesOf(usage: Usage, write1h = 0): Classes {
  const written = usage.prompt_tokens_details?.cache_write_tokens ?? 0
  return {
    prompt: usage.prompt_tokens,
    cached: usage.prompt_tokens_details?.cached_tokens ?? 0,
    write5m: written - write1h,
    write1h,
    output: usage.completion_tokens,
  }
}

const LONG = 'a long document that passes the long-context threshold '.repeat(6)

/** Each line: its model, its prompt (with its cache marker), and what it asks of Anthropic. */
const LINES = [
  { id: 'gpt-plain', model: 'cache/gpt', text: 'hello there', write1h: 0 },
  { id: 'gpt-read', model: 'cache/gpt', text: 'cached prompt [sim:cache read=4]', write1h: 0 },
  { id: 'gpt-write', model: 'cache/gpt', text: 'new prompt [sim:cache write=5]', write1h: 0 },
  { id: 'gpt-long', model: 'cache/gpt', text: `${LONG} [sim:cache read=30]`, write1h: 0 },
  { id: 'claude-read', model: 'cache/claude', text: 'reads [sim:cache read=6]', write1h: 0 },
  {
    id: 'claude-writes',
    model: 'cache/claude',
    text: 'writes both [sim:cache read=2 write=3 write1h=4]',
    write1h: 4,
    ttl: '1h',
  },
  {
    id: 'claude-nosplit',
    model: 'cache/claude',
    text: 'old [sim:cache write=5 nosplit]',
    write1h: 0,
  },
  {
    id: 'claude-long',
    model: 'cache/claude',
    text: `${LONG} [sim:cache read=20 write=10 write1h=5]`,
    write1h: 5,
    ttl: '1h',
  },
]

function lineOf(line: (typeof LINES)[number]) {
  const part: Record<string, unknown> = { type: 'text', text: line.text }
  if (line.model === 'cache/claude')
    part.cache_control = line.ttl ? { type: 'ephemeral', ttl: line.ttl } : { type: 'ephemeral' }
  return {
    custom_id: line.id,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: line.model, max_tokens: 40, messages: [{ role: 'user', content: [part] }] },
  }
}

const ratesOf = (model: string): Rates => (model === 'cache/gpt' ? GPT : CLAUDE)

for (const storeKind of STORES) {
  describe(`token classes and tiers (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ keepBodies: 50 })
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

    test('each line, the batch and the balance cost exactly what the SPEC arithmetic says', async () => {
      const { key, accountId } = await gw.newAccount('10')
      const created = await gw.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl(LINES.map(lineOf)),
      })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      type Batch = {
        status: string
        cost_usd: string
        cost_ceiling_usd: string
        usage: Record<string, number>
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
      const results = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
        .trim()
        .split('\n')
        .map(
          (text) =>
            JSON.parse(text) as {
              custom_id: string
              status: string
              cost_usd: string
              response: { body: { usage: Usage } }
            },
        )
      let total = new Decimal(0)
      const sums = { input: 0, cached: 0, written: 0, output: 0 }
      for (const [index, result] of results.entries()) {
        const line = LINES[index]
        expect(result.custom_id).toBe(line.id)
        expect(result.status).toBe('succeeded')
        const usage = result.response.body.usage
        const classes = classesOf(usage, line.write1h)
        // Shown with at least six decimals and every further one the exact amount has.
        const exact = new Decimal(specCost(ratesOf(line.model), classes))
        expect(result.cost_usd).toBe(exact.toFixed(Math.max(6, exact.decimalPlaces())))
        total = total.plus(result.cost_usd)
        sums.input += classes.prompt
        sums.cached += classes.cached
        sums.written += classes.write5m + classes.write1h
        sums.output += classes.output
      }
      // The markers took effect as written: the classes are there, in OpenAI's shape.
      const byId = new Map(results.map((r) => [r.custom_id, r.response.body.usage]))
      expect(byId.get('gpt-read')!.prompt_tokens_details).toEqual({
        cached_tokens: 4,
        cache_write_tokens: 0,
      })
      expect(byId.get('claude-writes')!.prompt_tokens_details).toEqual({
        cached_tokens: 2,
        cache_write_tokens: 7,
      })
      expect(byId.get('claude-nosplit')!.prompt_tokens_details!.cache_write_tokens).toBe(5)
      expect(byId.get('gpt-long')!.prompt_tokens).toBeGreaterThan(60)
      expect(byId.get('claude-long')!.prompt_tokens).toBeGreaterThan(60)
      // The 1-hour TTL and the cache marks reached Anthropic; OpenAI got no cache_control.
      const sent = sim.received().map((r) => r.text)
      expect(sent.some((text) => text.includes('"ttl":"1h"'))).toBe(true)
      for (const text of sent.filter((t) => t.includes('"model":"sim-chat"')))
        expect(text).not.toContain('cache_control')

      expect(new Decimal(batch.cost_usd).equals(total)).toBe(true)
      expect(batch.usage).toEqual({
        input_tokens: sums.input,
        cached_input_tokens: sums.cached,
        cache_write_tokens: sums.written,
        output_tokens: sums.output,
      })
      expect(total.lte(batch.cost_ceiling_usd)).toBe(true)
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        balance_usd: string
      }
      expect(new Decimal(account.balance_usd).equals(new Decimal(10).minus(total))).toBe(true)

      // The dashboard's batch page: tokens by class, and what caching saved against the price of
      // the same lines with every prompt token uncached.
      const signIn = await fetch(`${gw.url}/dashboard/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ key }),
        redirect: 'manual',
      })
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!
      const page = await (
        await fetch(`${gw.url}/dashboard/batches/${id}`, { headers: { cookie } })
      ).text()
      const cell = (name: string) =>
        new RegExp(`id="usage-${name}">([\\d,]+)<`).exec(page)?.[1]?.replaceAll(',', '')
      expect(cell('input')).toBe(String(sums.input))
      expect(cell('cached')).toBe(String(sums.cached))
      expect(cell('written')).toBe(String(sums.written))
      expect(cell('uncached')).toBe(String(sums.input - sums.cached - sums.written))
      expect(cell('output')).toBe(String(sums.output))
      let uncachedTotal = new Decimal(0)
      for (const [index, result] of results.entries()) {
        const { prompt, output } = classesOf(result.response.body.usage)
        const plain = { prompt, cached: 0, write5m: 0, write1h: 0, output }
        uncachedTotal = uncachedTotal.plus(specCost(ratesOf(LINES[index].model), plain))
      }
      const saved = uncachedTotal.minus(total)
      const shown = (d: Decimal) => d.toFixed(Math.max(6, d.decimalPlaces()))
      expect(page).toContain(
        saved.isPositive()
          ? `Caching saved $${shown(saved)} against the uncached price of $${shown(uncachedTotal)}.`
          : `Cache writes cost $${shown(saved.negated())} more`,
      )
    })

    test('a live call, whole and streamed, is charged the same arithmetic', async () => {
      const { key, accountId } = await gw.newAccount('10')
      const balance = async () =>
        new Decimal(
          ((await (await gw.admin(`/accounts/${accountId}`)).json()) as { balance_usd: string })
            .balance_usd,
        )
      const whole = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(lineOf(LINES[7]).body),
      })
      expect(whole.status).toBe(200)
      const answer = (await whole.json()) as { usage: Usage }
      const wholeCost = specCost(CLAUDE, classesOf(answer.usage, 5))
      expect(answer.usage.prompt_tokens_details).toEqual({
        cached_tokens: 20,
        cache_write_tokens: 15,
      })
      const afterWhole = new Decimal(10).minus(wholeCost)
      await waitFor(
        'the whole call settled',
        async () => (await balance()).equals(afterWhole),
        10_000,
      )

      const streamed = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          ...lineOf(LINES[3]).body,
          stream: true,
          stream_options: { include_usage: true },
        }),
      })
      expect(streamed.status).toBe(200)
      const events = (await streamed.text())
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .map((e) => JSON.parse(e.slice(6)) as { usage?: Usage | null })
      const usage = events.find((e) => e.usage)!.usage!
      expect(usage.prompt_tokens_details!.cached_tokens).toBe(30)
      const streamCost = specCost(GPT, classesOf(usage))
      const afterStream = afterWhole.minus(streamCost)
      await waitFor('the stream settled', async () => (await balance()).equals(afterStream), 10_000)

      // Anthropic streamed: message_start's cache fields, translated to OpenAI's usage chunk.
      const claude = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          ...lineOf(LINES[5]).body,
          stream: true,
          stream_options: { include_usage: true },
        }),
      })
      expect(claude.status).toBe(200)
      const claudeUsage = (await claude.text())
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .map((e) => JSON.parse(e.slice(6)) as { usage?: Usage | null })
        .find((e) => e.usage)!.usage!
      expect(claudeUsage.prompt_tokens_details).toEqual({ cached_tokens: 2, cache_write_tokens: 7 })
      const afterClaude = afterStream.minus(specCost(CLAUDE, classesOf(claudeUsage, 4)))
      await waitFor(
        'the Anthropic stream settled',
        async () => (await balance()).equals(afterClaude),
        10_000,
      )
    })
  })
}
