import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createProvider } from '../../providers/index.ts'
import type { ProviderAdapter } from '../../providers/types.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { collect, prompt, runAdapterContract } from './adapter-contract.ts'

/** The request an adapter is handed: the upstream model is the body's own, as these tests write it. */
const forUpstream = <T extends { body: Record<string, unknown> }>(request: T) => ({
  ...request,
  model: String(request.body.model),
})

runAdapterContract({ kind: 'anthropic', baseUrl: (url) => url })

describe('anthropic adapter specifics', () => {
  let sim: Simulator
  let anthropic: ProviderAdapter
  let openai: ProviderAdapter
  beforeAll(async () => {
    sim = await startSimulator({ requireApiKey: 'sk-ant-test' })
    const common = { apiKey: 'sk-ant-test', timeoutMs: 2_000, connections: 4 }
    // A catalog may spell the base with or without /v1.
    anthropic = createProvider({
      name: 'a',
      kind: 'anthropic',
      baseUrls: [`${sim.url}/v1`],
      ...common,
    })
    openai = createProvider({ name: 'o', kind: 'openai', baseUrls: [`${sim.url}/v1`], ...common })
  })
  afterAll(async () => {
    await Promise.all([anthropic.close(), openai.close()])
    await sim.stop()
  })

  test('the system prompt reaches Anthropic as `system`: same prompt, same tokens', async () => {
    sim.resetStats()
    const viaAnthropic = await anthropic.send(forUpstream({ endpoint: 'chat', body: prompt }))
    const viaOpenAI = await openai.send(forUpstream({ endpoint: 'chat', body: prompt }))
    if (!viaAnthropic.ok || !viaOpenAI.ok) throw new Error('a call failed')
    expect(viaAnthropic.usage).toEqual(viaOpenAI.usage)
    expect((viaAnthropic.body.choices as any[])[0].message.content).toBe(
      (viaOpenAI.body.choices as any[])[0].message.content,
    )
    // Both requests hash to one prompt key: roles and texts arrived identical.
    expect(sim.stats().maxPromptCount).toBe(2)
    expect(sim.stats().byPath['/v1/messages']).toBe(1)
  })

  test("without a limit the model's is sent, within its context window (Anthropic requires one); max_completion_tokens is read", async () => {
    sim.configure({ keepBodies: 2 })
    const sent = async (modelLimits?: { outputTokens: number; contextTokens: number }) => {
      const request = forUpstream({ endpoint: 'chat' as const, body: prompt, modelLimits })
      expect((await anthropic.send(request)).ok).toBe(true)
      const text = sim.received().at(-1)!.text
      return { limit: JSON.parse(text).max_tokens as number, bytes: Buffer.byteLength(text) }
    }
    expect((await sent({ outputTokens: 8192, contextTokens: 200_000 })).limit).toBe(8192)
    // Within the context window, which Anthropic refuses prompt and limit together to pass.
    const tight = await sent({ outputTokens: 8192, contextTokens: 8_250 })
    expect(tight.limit).toBeLessThan(8192)
    // The prompt, a byte a token at most, was measured with a one-digit limit in its place.
    expect(tight.limit + tight.bytes).toBe(8_250 + String(tight.limit).length - 1)
    // Never below 4,096, what was sent before the model's limit was known.
    expect((await sent({ outputTokens: 8192, contextTokens: 1_000 })).limit).toBe(4096)
    expect((await sent()).limit).toBe(4096) // an adapter told no model limit
    sim.configure({ keepBodies: 0 })
    const outcome = await anthropic.send(
      forUpstream({
        endpoint: 'chat',
        body: { ...prompt, max_completion_tokens: 2 },
      }),
    )
    expect(outcome).toMatchObject({ ok: true, usage: { output_tokens: 2 } })
  })

  test('a stop sequence: finish_reason stop, streamed or not', async () => {
    const body = { ...prompt, stop: 'there' }
    const outcome = await anthropic.send(forUpstream({ endpoint: 'chat', body }))
    if (!outcome.ok) throw new Error(outcome.error.message)
    expect((outcome.body.choices as any[])[0]).toMatchObject({
      message: { content: 'sim reply to Hello ' },
      finish_reason: 'stop',
    })
    const streamed = await collect(
      await anthropic.stream(forUpstream({ endpoint: 'chat', body: { ...body, max_tokens: 2 } })),
    )
    expect(streamed.content).toBe('sim reply')
    expect(streamed.finish).toBe('length')
    expect(streamed.usage).toEqual({ input_tokens: 11, output_tokens: 2 })
  })

  test('requests Anthropic cannot serve fail before any call', async () => {
    sim.resetStats()
    const embeddings = await anthropic.send(
      forUpstream({
        endpoint: 'embeddings',
        body: { model: 'x', input: 'y' },
      }),
    )
    expect(embeddings).toMatchObject({
      ok: false,
      error: { kind: 'invalid_request', retryable: false },
    })
    const several = await anthropic.send(
      forUpstream({ endpoint: 'chat', body: { ...prompt, n: 2 } }),
    )
    expect(several).toMatchObject({ ok: false, error: { kind: 'invalid_request' } })
    expect(sim.stats().requests).toBe(0)
  })
})
