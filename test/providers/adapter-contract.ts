/**
 * The contract every adapter kind runs against the real simulator over HTTP: the same prompt,
 * the same answer and usage, and every fault classified the same way.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { createProvider, UpstreamStreamError } from '../../providers/index.ts'
import type { ProviderAdapter, ProviderOptions, StreamOutcome } from '../../providers/types.ts'
import { defaultSimulatorOptions } from '../../src/simulator/options.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'

/** The request an adapter is handed: the upstream model is the body's own, as these tests write it. */
const forUpstream = <T extends { body: Record<string, unknown> }>(request: T) => ({
  ...request,
  model: String(request.body.model),
})

export interface ContractSetup {
  kind: ProviderOptions['kind']
  /** The base URL the catalog would hold for a simulator at `url`. */
  baseUrl(url: string): string
}

/** 'Be brief.' + 'Hello there': ceil(20 bytes / 4) + 3 × 2 messages. */
export const prompt = {
  model: 'sim-model',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hello there' },
  ],
}
export const promptTokens = 11

export async function collect(outcome: StreamOutcome) {
  if (!outcome.ok) throw new Error(`stream did not open: ${outcome.error.message}`)
  const chunks: Record<string, any>[] = []
  let error: unknown = null
  try {
    for await (const chunk of outcome.chunks) chunks.push(chunk)
  } catch (caught) {
    error = caught
  }
  const content = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('')
  const finish = chunks.map((chunk) => chunk.choices[0]?.finish_reason).find(Boolean) ?? null
  return { chunks, content, finish, error, usage: await outcome.usage }
}

export function runAdapterContract(setup: ContractSetup): void {
  let sim: Simulator
  const adapters: ProviderAdapter[] = []
  const adapter = (overrides: Partial<ProviderOptions> = {}) => {
    const created = createProvider({
      name: `sim-${setup.kind}`,
      kind: setup.kind,
      baseUrls: [setup.baseUrl(sim.url)],
      apiKey: 'sk-test-0123456789abcdef',
      timeoutMs: 2_000,
      connections: 8,
      ...overrides,
    })
    adapters.push(created)
    return created
  }

  beforeAll(async () => {
    sim = await startSimulator({ seed: 3 })
  })
  afterEach(() => {
    sim.configure({ ...defaultSimulatorOptions })
  })
  afterAll(async () => {
    await Promise.all(adapters.map((created) => created.close()))
    await sim.stop()
  })

  describe(`${setup.kind} adapter contract`, () => {
    test('answers a chat.completion with exact usage', async () => {
      const outcome = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      if (!outcome.ok) throw new Error(outcome.error.message)
      expect(outcome.status).toBe(200)
      const choice = (outcome.body.choices as Record<string, any>[])[0]
      expect(choice.message.role).toBe('assistant')
      expect(choice.message.content).toMatch(/^sim reply to Hello there #[0-9a-f]{8}$/)
      expect(choice.finish_reason).toBe('stop')
      expect(outcome.usage).toEqual({ input_tokens: promptTokens, output_tokens: 6 })
      expect(outcome.body.usage).toMatchObject({
        prompt_tokens: 11,
        completion_tokens: 6,
        total_tokens: 17,
      })
      // A translated answer (Anthropic's) carries prompt_tokens_details always, zeros here.
      if (setup.kind === 'anthropic')
        expect((outcome.body.usage as Record<string, unknown>).prompt_tokens_details).toEqual({
          cached_tokens: 0,
          cache_write_tokens: 0,
        })
      expect(outcome.latencyMs).toBeGreaterThanOrEqual(0)
    })

    test('finish reasons: length at max_tokens, stop at a stop sequence', async () => {
      const short = await adapter().send(
        forUpstream({ endpoint: 'chat', body: { ...prompt, max_tokens: 3 } }),
      )
      if (!short.ok) throw new Error(short.error.message)
      expect((short.body.choices as any[])[0]).toMatchObject({
        message: { content: 'sim reply to' },
        finish_reason: 'length',
      })
      expect(short.usage).toEqual({ input_tokens: promptTokens, output_tokens: 3 })
      const stopped = await adapter().send(
        forUpstream({
          endpoint: 'chat',
          body: { ...prompt, stop: ['there'] },
        }),
      )
      if (!stopped.ok) throw new Error(stopped.error.message)
      expect((stopped.body.choices as any[])[0]).toMatchObject({
        message: { content: 'sim reply to Hello ' },
        finish_reason: 'stop',
      })
      expect(stopped.usage?.output_tokens).toBe(4)
    })

    test('streams OpenAI chunks that add up to the plain answer, ending with usage', async () => {
      const client = adapter()
      const plain = await client.send(forUpstream({ endpoint: 'chat', body: prompt }))
      if (!plain.ok) throw new Error(plain.error.message)
      const streamed = await collect(
        await client.stream(forUpstream({ endpoint: 'chat', body: prompt })),
      )
      expect(streamed.error).toBeNull()
      expect(streamed.chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true)
      expect(streamed.chunks[0].choices[0].delta.role).toBe('assistant')
      expect(streamed.content).toBe((plain.body.choices as any[])[0].message.content)
      expect(streamed.finish).toBe('stop')
      expect(streamed.usage).toEqual(plain.usage)
      expect(streamed.chunks.at(-1)).toMatchObject({ choices: [], usage: plain.body.usage })
    })

    test('429: rate_limited with retryAfterMs from retry-after-ms or retry-after', async () => {
      sim.configure({ rate429: 1, retryAfterSeconds: 0.25 })
      const fraction = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(fraction).toMatchObject({
        ok: false,
        error: { kind: 'rate_limited', retryable: true, status: 429, retryAfterMs: 250 },
      })
      sim.configure({ retryAfterSeconds: 3 })
      const whole = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(whole).toMatchObject({ ok: false, error: { retryAfterMs: 3000 } })
      sim.configure({ retryAfterSeconds: null })
      const none = await adapter().stream(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(none).toMatchObject({ ok: false, error: { kind: 'rate_limited', retryAfterMs: null } })
    })

    test('500: server_error, retryable', async () => {
      sim.configure({ errorRate: 1 })
      const outcome = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(outcome).toMatchObject({
        ok: false,
        error: { kind: 'server_error', retryable: true, status: 500 },
      })
    })

    test('no answer within timeoutMs: timeout, also while the body trickles in', async () => {
      sim.configure({ timeoutRate: 1 })
      const client = adapter({ timeoutMs: 150 })
      const started = performance.now()
      const hung = await client.send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(hung).toMatchObject({
        ok: false,
        error: { kind: 'timeout', retryable: true, status: null },
      })
      expect(performance.now() - started).toBeLessThan(1_000)
      sim.configure({ timeoutRate: 0, trickleRate: 1, trickleMs: 1_000 })
      const slow = await client.send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(slow).toMatchObject({ ok: false, error: { kind: 'timeout' } })
      expect(performance.now() - started).toBeLessThan(1_500)
    })

    test('connection reset mid-body: connection, retryable', async () => {
      sim.configure({ resetRate: 1 })
      const outcome = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(outcome).toMatchObject({
        ok: false,
        error: { kind: 'connection', retryable: true, status: null },
      })
    })

    test('2xx that is not JSON: malformed_response, retryable', async () => {
      sim.configure({ malformedRate: 1 })
      const outcome = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(outcome).toMatchObject({
        ok: false,
        error: { kind: 'malformed_response', retryable: true, status: 200 },
      })
    })

    test('an answer without usage: ok with usage null', async () => {
      sim.configure({ noUsageRate: 1 })
      const outcome = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(outcome).toMatchObject({ ok: true, usage: null })
      const streamed = await collect(
        await adapter().stream(forUpstream({ endpoint: 'chat', body: prompt })),
      )
      expect(streamed.error).toBeNull()
      expect(streamed.usage).toBeNull()
    })

    test('wrong key: auth, not retryable, and the key is never in the message', async () => {
      sim.configure({ requireApiKey: 'the-right-key' })
      const outcome = await adapter().send(forUpstream({ endpoint: 'chat', body: prompt }))
      expect(outcome).toMatchObject({
        ok: false,
        error: { kind: 'auth', retryable: false, status: 401 },
      })
      expect(JSON.stringify(outcome)).not.toContain('0123456789abcdef')
      const keyed = await adapter({ apiKey: 'the-right-key' }).send(
        forUpstream({
          endpoint: 'chat',
          body: prompt,
        }),
      )
      expect(keyed.ok).toBe(true)
    })

    test('other 4xx: invalid_request with the upstream body; context length recognised', async () => {
      const refused = await adapter().send(
        forUpstream({
          endpoint: 'chat',
          body: { ...prompt, model: 'fail-400' },
        }),
      )
      expect(refused).toMatchObject({
        ok: false,
        error: { kind: 'invalid_request', retryable: false, status: 400 },
      })
      if (refused.ok) return
      expect(JSON.stringify(refused.error.body)).toContain('refuses model')
      const tooLong = await adapter().send(
        forUpstream({
          endpoint: 'chat',
          body: { ...prompt, model: 'ctx-overflow' },
        }),
      )
      expect(tooLong).toMatchObject({
        ok: false,
        error: { kind: 'context_length_exceeded', retryable: false, status: 400 },
      })
    })

    test('the caller aborts: the call ends at once', async () => {
      sim.configure({ latencyMs: 2_000 })
      const controller = new AbortController()
      setTimeout(() => controller.abort(), 50)
      const started = performance.now()
      const outcome = await adapter().send(
        forUpstream({
          endpoint: 'chat',
          body: prompt,
          signal: controller.signal,
        }),
      )
      expect(outcome.ok).toBe(false)
      expect(performance.now() - started).toBeLessThan(1_000)
    })

    test('nobody listening: connection, retryable', async () => {
      const gone = await startSimulator()
      await gone.stop()
      const outcome = await adapter({ baseUrls: [setup.baseUrl(gone.url)] }).send(
        forUpstream({
          endpoint: 'chat',
          body: prompt,
        }),
      )
      expect(outcome).toMatchObject({ ok: false, error: { kind: 'connection', retryable: true } })
    })

    test('stream failures after 200 are thrown as UpstreamStreamError; usage is null', async () => {
      sim.configure({ resetRate: 1 })
      const reset = await collect(
        await adapter().stream(forUpstream({ endpoint: 'chat', body: prompt })),
      )
      expect(reset.error).toBeInstanceOf(UpstreamStreamError)
      expect((reset.error as UpstreamStreamError).error.kind).toBe('connection')
      expect(reset.usage).toBeNull()
      sim.configure({ resetRate: 0, malformedRate: 1 })
      const garbled = await collect(
        await adapter().stream(forUpstream({ endpoint: 'chat', body: prompt })),
      )
      expect((garbled.error as UpstreamStreamError).error.kind).toBe('malformed_response')
      // Closed cleanly halfway, without its end event: cut off, not over.
      sim.configure({ malformedRate: 0, cutRate: 1 })
      try {
        const cut = await collect(
          await adapter().stream(forUpstream({ endpoint: 'chat', body: prompt })),
        )
        expect(cut.chunks.length).toBeGreaterThan(0)
        expect((cut.error as UpstreamStreamError).error.message).toContain('was cut off')
        expect(cut.usage).toBeNull()
      } finally {
        sim.configure({ cutRate: 0 })
      }
    })

    test('an abandoned stream settles usage and frees its connection', async () => {
      const client = adapter({ connections: 1 })
      const outcome = await client.stream(forUpstream({ endpoint: 'chat', body: prompt }))
      if (!outcome.ok) throw new Error(outcome.error.message)
      const iterator = outcome.chunks[Symbol.asyncIterator]()
      await iterator.next()
      await iterator.return?.()
      // Whatever was known when it was dropped: nothing (OpenAI) or the input so far (Anthropic).
      const usage = await outcome.usage
      if (usage !== null) expect(usage.input_tokens).toBe(promptTokens)
      // One connection: a second call only works if the first one gave it back.
      expect((await client.send(forUpstream({ endpoint: 'chat', body: prompt }))).ok).toBe(true)
    })

    test('a stream still sending outlasts the timeout: it counts the time between bytes once the answer began', async () => {
      // 1 s of stream in small pieces, a timeout of 400 ms: a whole-body timeout would cut it.
      sim.configure({ trickleRate: 1, trickleMs: 1_000 })
      try {
        const outcome = await adapter({ timeoutMs: 400 }).stream(
          forUpstream({ endpoint: 'chat', body: { ...prompt, max_tokens: 200 } }),
        )
        if (!outcome.ok) throw new Error(outcome.error.message)
        const started = performance.now()
        let chunks = 0
        for await (const _ of outcome.chunks) chunks++
        expect(chunks).toBeGreaterThan(1)
        expect(performance.now() - started).toBeGreaterThan(400)
        expect(await outcome.broken).toBeNull()
        expect((await outcome.usage)?.output_tokens).toBeGreaterThan(0)
      } finally {
        sim.configure({ trickleRate: 0 })
      }
    })
  })
}
