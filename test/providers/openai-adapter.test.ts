import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createProvider } from '../../providers/index.ts'
import { mapOpenAIUsage } from '../../providers/openai/map-openai-usage.ts'
import {
  prepareOpenAIBody,
  prepareOpenAIStreamBody,
} from '../../providers/openai/prepare-openai-body.ts'
import type { ProviderAdapter } from '../../providers/types.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { collect, prompt, runAdapterContract } from './adapter-contract.ts'

/** The request an adapter is handed: the upstream model is the body's own, as these tests write it. */
const forUpstream = <T extends { body: Record<string, unknown> }>(request: T) => ({
  ...request,
  model: String(request.body.model),
})

runAdapterContract({ kind: 'openai', baseUrl: (url) => `${url}/v1` })

describe('openai adapter specifics', () => {
  let sim: Simulator
  let adapter: ProviderAdapter
  beforeAll(async () => {
    sim = await startSimulator()
    adapter = createProvider({
      name: 'openai',
      kind: 'openai',
      baseUrls: [`${sim.url}/v1`],
      apiKey: null,
      timeoutMs: 2_000,
      connections: 4,
    })
  })
  afterAll(async () => {
    await adapter.close()
    await sim.stop()
  })

  test('embeddings: the list passes through, prompt tokens are the usage', async () => {
    const outcome = await adapter.send(
      forUpstream({
        endpoint: 'embeddings',
        body: { model: 'sim-embed', input: ['hello world', 'again'] },
      }),
    )
    if (!outcome.ok) throw new Error(outcome.error.message)
    expect((outcome.body.data as unknown[]).length).toBe(2)
    expect(outcome.usage).toEqual({ input_tokens: 5, output_tokens: 0 })
  })

  test('a stream of n choices cut off after the first finished is cut off, not over', async () => {
    sim.configure({ cutRate: 1 })
    try {
      const cut = await collect(
        await adapter.stream(forUpstream({ endpoint: 'chat', body: { ...prompt, n: 2 } })),
      )
      // The simulator streams choice by choice and keeps half the events: the first choice's end.
      const ended = cut.chunks.flatMap((chunk) =>
        (chunk.choices as { index: number; finish_reason: string | null }[])
          .filter((choice) => choice.finish_reason !== null)
          .map((choice) => choice.index),
      )
      expect(ended).toEqual([0])
      expect((cut.error as { error?: { message: string } } | null)?.error?.message).toContain(
        'was cut off',
      )
      expect(cut.usage).toBeNull()
    } finally {
      sim.configure({ cutRate: 0 })
    }
    // Whole, both choices end and it is over.
    const whole = await collect(
      await adapter.stream(forUpstream({ endpoint: 'chat', body: { ...prompt, n: 2 } })),
    )
    expect(whole.error).toBeNull()
  })

  test('n choices are all counted', async () => {
    const outcome = await adapter.send(
      forUpstream({
        endpoint: 'chat',
        body: { ...prompt, n: 3, max_tokens: 2 },
      }),
    )
    if (!outcome.ok) throw new Error(outcome.error.message)
    expect((outcome.body.choices as unknown[]).length).toBe(3)
    expect(outcome.usage).toEqual({ input_tokens: 11, output_tokens: 6 })
  })

  test('a stream asks for usage even when the caller did not', async () => {
    const streamed = await collect(
      await adapter.stream(forUpstream({ endpoint: 'chat', body: prompt })),
    )
    expect(streamed.usage).toEqual({ input_tokens: 11, output_tokens: 6 })
  })

  test('send() drops stream: true so the answer is one JSON body', async () => {
    const outcome = await adapter.send(
      forUpstream({ endpoint: 'chat', body: { ...prompt, stream: true } }),
    )
    expect(outcome.ok).toBe(true)
  })

  test('embeddings cannot stream', async () => {
    const outcome = await adapter.stream(
      forUpstream({
        endpoint: 'embeddings',
        body: { model: 'e', input: 'x' },
      }),
    )
    expect(outcome).toMatchObject({ ok: false, error: { kind: 'invalid_request' } })
  })
})

describe('openai body and usage mapping', () => {
  // The offering's side of the request: its model id and the limit's name it wants, if any.
  const target = (maxTokensParam?: 'max_tokens' | 'max_completion_tokens') => ({
    model: 'up',
    maxTokensParam,
  })

  test('the body gets the upstream model id and loses the gateway routing object', () => {
    expect(
      prepareOpenAIBody({ model: 'gateway/id', provider: { only: ['x'] }, messages: [] }, target()),
    ).toEqual({
      model: 'up',
      messages: [],
    })
  })

  test('max_tokens is renamed to the name the upstream wants', () => {
    const limit = (
      body: Record<string, unknown>,
      wanted?: 'max_tokens' | 'max_completion_tokens',
    ) => {
      const { model: _model, ...rest } = prepareOpenAIBody(body, target(wanted))
      return rest
    }
    expect(limit({ max_tokens: 5 }, 'max_completion_tokens')).toEqual({ max_completion_tokens: 5 })
    expect(limit({ max_completion_tokens: 5 }, 'max_tokens')).toEqual({ max_tokens: 5 })
    expect(limit({ max_tokens: 5 })).toEqual({ max_tokens: 5 })
    // Both given: one limit goes out, max_completion_tokens's value (what the ceiling priced),
    // under the name the upstream wants, or under max_completion_tokens without a preference.
    expect(limit({ max_tokens: 5, max_completion_tokens: 7 }, 'max_completion_tokens')).toEqual({
      max_completion_tokens: 7,
    })
    expect(limit({ max_tokens: 5, max_completion_tokens: 7 }, 'max_tokens')).toEqual({
      max_tokens: 7,
    })
    expect(limit({ max_tokens: 64000, max_completion_tokens: 1 })).toEqual({
      max_completion_tokens: 1,
    })
    expect(
      prepareOpenAIStreamBody({ max_tokens: 5 }, target('max_completion_tokens')),
    ).toMatchObject({ max_completion_tokens: 5 })
  })

  test('streaming bodies keep the caller stream_options and add include_usage', () => {
    expect(prepareOpenAIStreamBody({ stream_options: { x: 1 } }, target())).toEqual({
      model: 'up',
      stream: true,
      stream_options: { x: 1, include_usage: true },
    })
    expect(prepareOpenAIBody({ stream: true, stream_options: {}, model: 'm' }, target())).toEqual({
      model: 'up',
    })
  })

  test('usage: missing or garbled is null, embeddings have no output', () => {
    expect(mapOpenAIUsage({ prompt_tokens: 3, completion_tokens: 4 })).toEqual({
      input_tokens: 3,
      output_tokens: 4,
    })
    expect(mapOpenAIUsage({ prompt_tokens: 3, total_tokens: 3 })).toEqual({
      input_tokens: 3,
      output_tokens: 0,
    })
    expect(mapOpenAIUsage(undefined)).toBeNull()
    expect(mapOpenAIUsage({ prompt_tokens: '3' })).toBeNull()
    expect(mapOpenAIUsage({ prompt_tokens: 3, completion_tokens: -1 })).toBeNull()
  })
})
