/**
 * The live-hold scenario of issue 14 as helpers: a catalog with an Anthropic model at Claude
 * Haiku's list price ($1 / $5 per million tokens), the issue's request (100-character prompt,
 * max_tokens 150), many at once, and what each answer cost by its own usage.
 */
import { expect } from 'bun:test'
import Decimal from 'decimal.js'
import { testCatalog, writeCatalog } from './catalog.ts'

export const HAIKU = { id: 'sim/haiku', input: '1', output: '5' }

export function liveCatalog(upstreams: { openai: string; anthropic: string }) {
  const catalog = testCatalog(upstreams, { maxConcurrency: 256 })
  catalog.models.push({
    id: HAIKU.id,
    endpoints: ['chat'],
    context_tokens: 200000,
    max_output_tokens: 8192,
    offerings: [
      {
        provider: 'sim-anthropic',
        upstream_model: 'claude-haiku-sim',
        input_usd_per_mtok: HAIKU.input,
        output_usd_per_mtok: HAIKU.output,
      },
    ],
  })
  return catalog
}

export const liveCatalogFile = (upstreams: { openai: string; anthropic: string }) =>
  writeCatalog(liveCatalog(upstreams))

/** The issue's request: a 100-character prompt, max_tokens 150. */
export function issueRequest(stream: boolean, index = 0) {
  const prompt = `request ${String(index).padStart(4, '0')}: `.padEnd(100, 'x')
  return {
    model: HAIKU.id,
    messages: [{ role: 'user', content: prompt }],
    max_tokens: 150,
    ...(stream ? { stream: true } : {}),
  }
}

export interface LiveAnswer {
  status: number
  /** What the answer cost by its usage, at the model's price; null for refusals. */
  cost: Decimal | null
  /** performance.now() when the whole answer had arrived. */
  receivedAt: number
  /** The refusal's body, for a 402. */
  error?: { code: string; message: string; cost_ceiling_usd?: string; available_usd?: string }
}

const costOf = (usage: { prompt_tokens: number; completion_tokens: number }) =>
  new Decimal(usage.prompt_tokens)
    .times(HAIKU.input)
    .plus(new Decimal(usage.completion_tokens).times(HAIKU.output))
    .div(1e6)

/** One call; for a stream, the answer counts once its usage chunk and [DONE] arrived. */
export async function liveCall(
  url: string,
  key: string,
  body: Record<string, unknown>,
): Promise<LiveAnswer> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    // A stream carries its usage chunk only when asked (as OpenAI's does).
    body: JSON.stringify(
      body.stream && !body.stream_options
        ? { ...body, stream_options: { include_usage: true } }
        : body,
    ),
  })
  const text = await response.text()
  const receivedAt = performance.now()
  if (response.status !== 200) {
    return {
      status: response.status,
      cost: null,
      receivedAt,
      error: (JSON.parse(text) as { error: LiveAnswer['error'] }).error,
    }
  }
  if (body.stream) {
    const events = text.split('\n\n').filter(Boolean)
    if (events.at(-1) !== 'data: [DONE]')
      throw new Error(`stream did not end with [DONE]: ${text.slice(-200)}`)
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)))
    const usage = chunks.find((chunk) => chunk.usage)?.usage
    if (!usage) throw new Error('stream without usage')
    return { status: 200, cost: costOf(usage), receivedAt }
  }
  return {
    status: 200,
    cost: costOf(
      (JSON.parse(text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage,
    ),
    receivedAt,
  }
}

export const sumCosts = (answers: LiveAnswer[]) =>
  answers.reduce((sum, a) => (a.cost ? sum.plus(a.cost) : sum), new Decimal(0))

/**
 * 16 clients calling `url` in a loop until `kill` (called after 1.5 s) cuts the gateway off:
 * the answers delivered, when the kill came, and the most calls that were in flight at once.
 */
export async function trafficUntilKilled(url: string, key: string, kill: () => Promise<unknown>) {
  const delivered: LiveAnswer[] = []
  let inFlight = 0
  let maxInFlight = 0
  let stop = false
  const worker = async (w: number) => {
    for (let i = 0; i < 10_000 && !stop; i++) {
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      try {
        const answer = await liveCall(url, key, issueRequest(w % 2 === 0, i))
        if (answer.status === 200) delivered.push(answer)
      } catch {
      } finally {
        // cut off by the kill
        inFlight--
      }
    }
  }
  const workers = Array.from({ length: 16 }, (_, w) => worker(w))
  await Bun.sleep(1_500)
  const killedAt = performance.now()
  await kill()
  stop = true
  await Promise.all(workers)
  return { delivered, killedAt, maxInFlight }
}

/**
 * What a SIGKILL may cost (docs/live.md): never a charge twice — at most what was delivered, plus calls
 * answered upstream and charged whose answer the kill kept from the client — and at most the
 * answers of the group being formed or written when the kill came unbilled (one interval, and the
 * write's own few ms). Returns the figures, for the test's log line.
 */
export function expectKillCostWithinOneInterval(
  traffic: { delivered: LiveAnswer[]; killedAt: number; maxInFlight: number },
  charged: Decimal,
  chargeIntervalMs: number,
) {
  const { delivered, killedAt, maxInFlight } = traffic
  const all = sumCosts(delivered)
  const window = chargeIntervalMs + 100
  const lastInterval = sumCosts(delivered.filter((a) => a.receivedAt >= killedAt - window))
  const maxCost = delivered.reduce((max, a) => Decimal.max(max, a.cost!), new Decimal(0))
  expect(delivered.length).toBeGreaterThan(50)
  expect(charged.lessThanOrEqualTo(all.plus(maxCost.times(maxInFlight)))).toBe(true)
  expect(charged.greaterThanOrEqualTo(all.minus(lastInterval))).toBe(true)
  return `${delivered.length} answers delivered ($${all.toFixed()}), charged $${charged.toFixed()}, unbilled $${all.minus(charged).toFixed()} (answers of the last ${window} ms: $${lastInterval.toFixed()})`
}
