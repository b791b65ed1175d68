/**
 * The batch lane's pure parts (docs/batch-lanes.md): grouping lines into chunks, the follow schedule and
 * the fallback, and mapping a provider batch's results (read from the simulator through the real
 * batch clients) back to line outcomes billed at the lane's prices.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import {
  createAnthropicBatchClient,
  createOpenAIBatchClient,
  anthropicBatchInput,
  mapAnthropicBatchResults,
  mapOpenAIBatchOutput,
  openAIBatchInput,
  type ChunkLineResult,
  type ChunkRequest,
} from '../../providers/batch-api/index.ts'
import { modelSchema, offeringSchema } from '../../src/catalog/catalog-file.ts'
import { createCatalog } from '../../src/catalog/catalog.ts'
import {
  chooseBatchLane,
  heldForLane,
  laneForLine,
  liveOfferings,
} from '../../src/dispatch/batch-lane/choose-batch-lane.ts'
import { followAction, nextPollAt } from '../../src/dispatch/batch-lane/follow-schedule.ts'
import { groupIntoChunks, type ChunkCandidate } from '../../src/dispatch/batch-lane/group-chunks.ts'
import { mapChunkResults } from '../../src/dispatch/batch-lane/map-chunk-results.ts'
import { DEFAULT_RETRY } from '../../src/dispatch/retry-policy.ts'
import { lineRequest, type LineRequest } from '../../src/dispatch/line-request.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { oneLaneCatalog } from '../helpers/lane-catalog.ts'

const CHAT = '/v1/chat/completions'
const limits = { chunkLines: 3, maxLines: 50_000, maxBytes: 1000 }
const candidate = (lineNo: number, upstreamModel = 'a', bytes = 10): ChunkCandidate => ({
  lineNo,
  upstreamModel,
  endpoint: 'chat',
  bytes,
})

describe('grouping', () => {
  test('chunks hold one model and endpoint, at most chunk_lines, in submitted order', () => {
    const lines = [1, 2, 3, 4, 5, 6, 7].map((n) => candidate(n, n % 2 ? 'a' : 'b'))
    lines.push({ ...candidate(8, 'a'), endpoint: 'embeddings' })
    const { chunks, tooBig } = groupIntoChunks(lines.reverse(), limits)
    expect(tooBig).toEqual([])
    expect(chunks.map((chunk) => [chunk.upstreamModel, chunk.endpoint, chunk.lineNos])).toEqual([
      ['a', 'chat', [1, 3, 5]],
      ['b', 'chat', [2, 4, 6]],
      ['a', 'chat', [7]],
      ['a', 'embeddings', [8]],
    ])
  })

  test("the provider's caps cut chunks too; a line over the byte cap stays for the live lanes", () => {
    const lines = [candidate(1, 'a', 600), candidate(2, 'a', 600), candidate(3, 'a', 1001)]
    const { chunks, tooBig } = groupIntoChunks(lines, limits)
    expect(chunks.map((chunk) => chunk.lineNos)).toEqual([[1], [2]])
    expect(tooBig).toEqual([3])
    const capped = groupIntoChunks(
      [1, 2, 3].map((n) => candidate(n)),
      { ...limits, maxLines: 2 },
    )
    expect(capped.chunks.map((chunk) => chunk.lineNos)).toEqual([[1, 2], [3]])
  })
})

describe('following', () => {
  const times = { pollMs: 60_000, fallbackAtMs: 10_000_000 }

  test('polls every poll_s, backing off on failures, never past the fallback time', () => {
    expect(nextPollAt(times, 0, 0)).toBe(60_000)
    expect(nextPollAt(times, 3, 0)).toBe(480_000)
    expect(nextPollAt(times, 10, 0)).toBe(960_000)
    expect(nextPollAt(times, 0, 9_990_000)).toBe(10_000_000)
    expect(nextPollAt(times, 0, 10_000_000)).toBe(10_060_000)
  })

  test('cancels at the fallback time or on a cancel, reads once ended, returns a failed batch', () => {
    const at = (nowMs: number, cancelRequested = false) => ({
      nowMs,
      fallbackAtMs: times.fallbackAtMs,
      cancelRequested,
    })
    expect(followAction('running', at(0))).toBe('wait')
    expect(followAction('running', at(10_000_000))).toBe('cancel')
    expect(followAction('running', at(0, true))).toBe('cancel')
    expect(followAction('cancelling', at(10_000_000))).toBe('wait')
    expect(followAction('ended', at(10_000_000))).toBe('read')
    expect(followAction('failed', at(0))).toBe('return_all')
  })
})

describe('mapping back', () => {
  let sim: Simulator
  beforeAll(async () => {
    sim = await startSimulator({ batchTurnaroundMs: 0 })
  })
  afterAll(async () => {
    await sim.stop()
  })

  const lane = offeringSchema.parse({
    provider: 'openai',
    upstream_model: 'gpt-sim',
    lane: 'batch',
    input_usd_per_mtok: '0.075',
    output_usd_per_mtok: '0.3',
  })
  const live = offeringSchema.parse({
    provider: 'openai',
    upstream_model: 'gpt-sim',
    input_usd_per_mtok: '0.15',
    output_usd_per_mtok: '0.6',
  })
  const model = modelSchema.parse({
    id: 'sim/gpt',
    endpoints: ['chat'],
    context_tokens: 128_000,
    max_output_tokens: 16_384,
    offerings: [live, lane],
  })
  const chunk = (model: string): ChunkRequest => ({
    chunkId: 'chk_map',
    endpoint: 'chat',
    model,
    lines: ['a fine line', 'a bad line [sim:batch-invalid]', 'another fine line'].map(
      (text, index) => ({
        position: index + 1,
        body: { model: 'm', max_tokens: 16, messages: [{ role: 'user', content: text }] },
      }),
    ),
  })
  const states = [
    { position: 1, batchId: 'b', lineNo: 10, attempts: 1 },
    { position: 2, batchId: 'b', lineNo: 4, attempts: 1 },
    { position: 3, batchId: 'b', lineNo: 7, attempts: 1 },
  ]

  async function openAIResults(): Promise<ChunkLineResult[]> {
    const client = createOpenAIBatchClient({
      name: 'openai',
      baseUrl: `${sim.url}/v1`,
      apiKey: null,
      timeoutMs: 5000,
    })
    const request = chunk('gpt-sim')
    const file = await client.upload(request.chunkId, openAIBatchInput(request))
    if (!file.ok) throw new Error('upload failed')
    const created = await client.create(request, file.value)
    if (!created.ok) throw new Error('create failed')
    const batch = await client.getBatch(created.value.id)
    if (!batch.ok) throw new Error('read failed')
    const results: ChunkLineResult[] = []
    for (const id of [batch.value.outputFileId, batch.value.errorFileId]) {
      if (id === null) continue
      const text = await client.readFile(id)
      if (text.ok) results.push(...mapOpenAIBatchOutput(text.value, null))
    }
    await client.close()
    return results
  }

  test('succeeded lines are billed from their own usage at the lane prices; a 400 is final', async () => {
    const results = await openAIResults()
    const outcomes = mapChunkResults(states, results, {
      offering: lane,
      model,
      retry: DEFAULT_RETRY,
      nowMs: 1000,
      latencyMs: 5,
    })
    expect(outcomes.map((outcome) => [outcome.lineNo, outcome.kind])).toEqual([
      [10, 'succeeded'],
      [4, 'failed'],
      [7, 'succeeded'],
    ])
    const first = outcomes[0]
    if (first.kind !== 'succeeded') throw new Error('not a success')
    expect(first.provider).toBe('openai:batch')
    const usage = JSON.parse(first.response).usage
    const expected = new Decimal(usage.prompt_tokens)
      .mul('0.075')
      .plus(new Decimal(usage.completion_tokens).mul('0.3'))
      .div(1_000_000)
    expect(new Decimal(first.costUsd).equals(expected)).toBe(true)
    // Its tokens join its batch's usage, and the usage report counts it under its model.
    expect(first.usage).toMatchObject({
      input: usage.prompt_tokens,
      output: usage.completion_tokens,
    })
    expect(first.accounting).toMatchObject({
      model: 'sim/gpt',
      inputTokens: usage.prompt_tokens,
      outputTokens: usage.completion_tokens,
      firstOfferingCostUsd: new Decimal(usage.prompt_tokens)
        .mul('0.15')
        .plus(new Decimal(usage.completion_tokens).mul('0.6'))
        .div(1_000_000)
        .toFixed(),
    })
    const failed = outcomes[1]
    expect(failed.kind === 'failed' && failed.error.code).toBe('invalid_request')
  })

  test('errored 5xx lines retry with backoff; canceled, expired and missing lines go back unsent', async () => {
    const results: ChunkLineResult[] = [
      { position: 1, type: 'canceled' },
      { position: 2, type: 'expired' },
    ]
    sim.configure({ batchErrorRate: 1 })
    const client = createAnthropicBatchClient({
      name: 'anthropic',
      baseUrl: sim.url,
      apiKey: null,
      timeoutMs: 5000,
    })
    const created = await client.create(
      anthropicBatchInput(
        { ...chunk('claude-sim'), lines: chunk('x').lines.slice(0, 1) },
        'anthropic',
      ),
    )
    if (!created.ok) throw new Error('create failed')
    const text = await client.readResults(created.value.id)
    if (!text.ok) throw new Error('results unread')
    const [errored] = mapAnthropicBatchResults(text.value, null, 0)
    await client.close()
    sim.configure({ batchErrorRate: 0 })
    expect(errored.type).toBe('errored')
    const outcomes = mapChunkResults(
      [...states, { position: 4, batchId: 'b', lineNo: 11, attempts: 1 }],
      [...results, { ...errored, position: 3 }],
      { offering: lane, model, retry: DEFAULT_RETRY, nowMs: 1000, latencyMs: 5, random: () => 0.5 },
    )
    expect(outcomes[0]).toEqual({
      batchId: 'b',
      lineNo: 10,
      kind: 'retry',
      notBefore: 1000,
      unsent: true,
    })
    expect(outcomes[1]).toEqual({
      batchId: 'b',
      lineNo: 4,
      kind: 'retry',
      notBefore: 1000,
      unsent: true,
    })
    // Attempt 1 of a 5xx: a quarter second's backoff, half of it with this draw.
    expect(outcomes[2]).toEqual({ batchId: 'b', lineNo: 7, kind: 'retry', notBefore: 1125 })
    expect(outcomes[3]).toEqual({
      batchId: 'b',
      lineNo: 11,
      kind: 'retry',
      notBefore: 1000,
      unsent: true,
    })
    const spent = mapChunkResults(
      [{ ...states[2], attempts: DEFAULT_RETRY.maxAttempts }],
      [{ ...errored, position: 3 }],
      {
        offering: lane,
        model,
        retry: DEFAULT_RETRY,
        nowMs: 1000,
        latencyMs: 5,
      },
    )
    expect(spent[0].kind === 'failed' && spent[0].error.code).toBe('upstream_error')
  })
})

describe('choosing the batch lane', () => {
  const offering = (lane: string | undefined, price: string, extra: object = {}) =>
    offeringSchema.parse({
      provider: 'openai',
      upstream_model: 'gpt-sim',
      input_usd_per_mtok: price,
      ...(lane ? { lane } : {}),
      ...extra,
    })
  const kindOf = (provider: string) => (provider === 'openai' ? ('openai' as const) : undefined)
  const HOUR = 3_600_000
  const deadline = 100 * HOUR

  test('the cheapest offering, when a batch lane, takes lines while it is open', () => {
    const ordered = [
      offering('batch', '0.5', { min_hours_left: 4, fallback_hours: 2 }),
      offering(undefined, '1'),
    ]
    expect(chooseBatchLane(ordered, deadline, deadline - 24 * HOUR, kindOf)?.offering).toBe(
      ordered[0],
    )
    expect(chooseBatchLane(ordered, deadline, deadline - 3 * HOUR, kindOf)).toBeNull()
  })

  test('a cheaper live offering first, or an unknown kind, keeps lines live; live calls never see batch lanes', () => {
    const pool = offering(undefined, '0')
    const lane = offering('batch', '0.5')
    expect(chooseBatchLane([pool, lane], deadline, 0, kindOf)).toBeNull()
    expect(chooseBatchLane([{ ...lane, provider: 'other' }], deadline, 0, kindOf)).toBeNull()
    expect(liveOfferings([lane, pool])).toEqual([pool])
  })

  test("a claimed line's lane is its mark's while the lane is open, its provider has a batch client and it takes the line's form", () => {
    const catalog = createCatalog(
      oneLaneCatalog({ lane: 'batch', min_hours_left: 4, fallback_hours: 2 }),
      {},
    )
    const chat = { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }
    const day = deadline - 24 * HOUR
    const lane = (
      body: Record<string, unknown>,
      options: { url?: string; nowMs?: number; client?: boolean } = {},
    ) =>
      laneForLine(catalog, JSON.stringify({ url: options.url ?? CHAT, body }), {
        deadlineMs: deadline,
        nowMs: options.nowMs ?? day,
        hasClient: () => options.client ?? true,
      })
    const taken = lane(chat)
    expect(taken?.offering.lane).toBe('batch')
    expect(taken?.model.id).toBe('m')
    // The lane has closed, or no batch client for its provider: the live lanes'.
    expect(lane(chat, { nowMs: deadline - 3 * HOUR })).toBeNull()
    expect(lane(chat, { client: false })).toBeNull()
    // Its routing names the live offering first, or its model is no longer in the catalog.
    expect(lane({ ...chat, provider: { order: ['up'], allow_fallbacks: false } })).toBeNull()
    expect(lane({ ...chat, model: 'gone' })).toBeNull()
    // A Responses line goes as its chat translation, unless it has fields outside it that this
    // provider's API does not take, or no longer translates at all.
    const responses = { model: 'm', input: 'hi', max_output_tokens: 8 }
    expect(lane(responses, { url: '/v1/responses' })?.offering.lane).toBe('batch')
    expect(
      lane({ ...responses, reasoning: { effort: 'low' } }, { url: '/v1/responses' }),
    ).toBeNull()
    expect(lane({ ...responses, input: 42 }, { url: '/v1/responses' })).toBeNull()
  })

  test('allow_fallbacks false keeps a line to the lane that was open for its batch, then to the deadline', () => {
    const catalog = createCatalog(
      oneLaneCatalog({ lane: 'batch', min_hours_left: 4, fallback_hours: 2 }),
      {},
    )
    const model = catalog.find('m')!
    const chat = { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }
    const held = (
      routing: object | undefined,
      createdAtMs: number,
      nowMs: number,
      url = CHAT,
      body: Record<string, unknown> = chat,
    ) =>
      heldForLane(
        catalog,
        { request: lineRequest({ url, body }) as LineRequest, model, routing: routing as never },
        { createdAt: createdAtMs / 1000, deadlineAt: deadline / 1000 },
        nowMs,
      )
    const strict = { allow_fallbacks: false }
    const day = deadline - 24 * HOUR
    // While the lane takes lines: looked at again soon, for the lane to take it.
    expect(held(strict, day, day + HOUR)).toEqual({ untilMs: day + HOUR + 1_000 })
    // Once it no longer does: not before the deadline, which ends it; the lane named, and when
    // it closed (min_hours_left, the larger of its two bounds, before the deadline).
    expect(held(strict, day, deadline - 3 * HOUR)).toEqual({
      untilMs: deadline,
      closed: { lane: 'up:batch', closedAtMs: deadline - 4 * HOUR },
    })
    // Fallbacks allowed, a window the lane was never open for: live.
    expect(held(undefined, day, deadline - 3 * HOUR)).toBeNull()
    expect(held(strict, deadline - 3 * HOUR, deadline - 3 * HOUR)).toBeNull()
    // A window of just min_hours_left: the lane is open at the instant of creation only, too
    // short for it to take a line, so the first live offering is the one (as without the flag).
    const exact = deadline - 4 * HOUR
    expect(held(strict, exact, exact + 5)).toBeNull()
    // A Responses line goes to the lane as its chat translation, unless it has fields outside
    // it, which only an offering speaking the Responses API takes: this provider does not.
    const responses = { model: 'm', input: 'hi', max_output_tokens: 8 }
    expect(held(strict, day, day + HOUR, '/v1/responses', responses)).toEqual({
      untilMs: day + HOUR + 1_000,
    })
    const reasoning = { ...responses, reasoning: { effort: 'low' } }
    expect(held(strict, day, day + HOUR, '/v1/responses', reasoning)).toBeNull()
    // Its live offering named first: that one alone.
    expect(held({ ...strict, order: ['up'] }, day, day + HOUR)).toBeNull()
  })
})
