/**
 * A chunk's life (src/dispatch/batch-lane/chunk-lifecycle.ts) on the real embedded store against
 * the simulator's batch APIs: submitted, followed, read back and billed at the lane's prices;
 * cancelled at the fallback time with what it finished kept; resumed by another instance after a
 * crash without a second create; errored and expired lines back to pending.
 */
import { createLaneFailures } from '../../src/dispatch/batch-lane/lane-failures.ts'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import {
  createAnthropicBatchClient,
  createOpenAIBatchClient,
  openAIBatchInput,
  type AnthropicBatchClient,
  type OpenAIBatchClient,
} from '../../providers/batch-api/index.ts'
import { batchLaneSettings } from '../../src/catalog/batch-lane.ts'
import { modelSchema, offeringSchema } from '../../src/catalog/catalog-file.ts'
import {
  followChunk,
  lineOwnerOf,
  submitChunk,
  type ChunkDeps,
} from '../../src/dispatch/batch-lane/chunk-lifecycle.ts'
import { DEFAULT_RETRY } from '../../src/dispatch/retry-policy.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import type { OpenedStore } from '../../src/store/store.ts'
import { runningLines } from '../../src/dispatch/batch-lane/running-lines.ts'

let sim: Simulator
let opened: OpenedStore
let batchNo = 0
const NOW = Math.floor(Date.now() / 1000)

beforeAll(async () => {
  sim = await startSimulator({ batchTurnaroundMs: 0 })
})
afterAll(async () => {
  await sim.stop()
})
beforeEach(async () => {
  opened = createSqliteStore(null)
  await opened.store.createAccount({
    id: 'acct',
    name: 'acct',
    creditUsd: '100',
    maxOpenBatches: 100,
    rateLimitPerMinute: 600,
    createdAt: NOW,
  })
  sim.configure({ batchTurnaroundMs: 0, batchErrorRate: 0, batchExpireMs: null })
})
afterEach(async () => {
  await opened.store.close()
})

const lane = (provider: string, model: string) =>
  offeringSchema.parse({
    provider,
    upstream_model: model,
    lane: 'batch',
    input_usd_per_mtok: '0.125',
    output_usd_per_mtok: '0.5',
  })

function depsFor(client: OpenAIBatchClient | AnthropicBatchClient, holder: string): ChunkDeps {
  const model = client.kind === 'openai' ? 'gpt-sim' : 'claude-sim'
  return {
    chunks: opened.chunks,
    lines: opened.dispatch,
    client,
    speaks: client.kind === 'anthropic' ? 'messages' : 'responses',
    runningLines: (batchId, lineNos) => runningLines(opened.store, batchId, lineNos),
    // Billed at its price: what a line's ceiling makes of it is the engine tests' (batch-lanes).
    billed: (_line, _usage, costUsd) => ({ costUsd }),
    usageOnBound: () => null,
    offering: lane(client.kind, model),
    model: modelSchema.parse({
      id: `sim/${model}`,
      endpoints: ['chat'],
      context_tokens: 128_000,
      max_output_tokens: 16_384,
      offerings: [lane(client.kind, model)],
    }),
    settings: batchLaneSettings({ poll_s: 0.05 }, client.kind),
    retry: DEFAULT_RETRY,
    holder,
    leaseMs: 60_000,
    failures: createLaneFailures(),
    lineLeaseMs: 120_000,
    now: () => Date.now(),
  }
}

const openai = () =>
  createOpenAIBatchClient({
    name: 'openai',
    baseUrl: `${sim.url}/v1`,
    apiKey: null,
    timeoutMs: 5000,
  })
const anthropic = () =>
  createAnthropicBatchClient({ name: 'anthropic', baseUrl: sim.url, apiKey: null, timeoutMs: 5000 })

/** A batch of `texts` admitted, and its lines claimed for chunk `chunkId`. */
async function claimedBatch(texts: string[], chunkId: string) {
  const id = `batch_${++batchNo}`
  const lines = texts.map((text, index) => ({
    lineNo: index + 1,
    customId: `user-${index + 1}`,
    input: JSON.stringify({
      custom_id: `user-${index + 1}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'm', max_tokens: 16, messages: [{ role: 'user', content: text }] },
    }),
  }))
  const admitted = await opened.store.admitBatch({
    id,
    accountId: 'acct',
    name: null,
    endpoint: '/v1/chat/completions',
    completionWindowHours: 24,
    createdAt: NOW,
    deadlineAt: NOW + 86_400,
    costCeilingUsd: '1',
    lineCount: lines.length,
    source: 'native',
    metadata: null,
    inputFileId: null,
    idempotencyKey: null,
    lines,
  })
  expect(admitted.kind).toBe('created')
  const now = Date.now()
  const claimed = await opened.dispatch.claimLines({
    batchId: id,
    owner: lineOwnerOf(chunkId),
    limit: 100,
    nowMs: now,
    leaseUntilMs: now + 60_000,
  })
  return { id, claimed }
}

const readAll = (batchId: string) =>
  opened.store.readLines(batchId, { afterLineNo: 0, limit: 100, statuses: null })

async function followUntil(deps: ChunkDeps, chunkId: string, state: string) {
  for (let i = 0; i < 200; i++) {
    const chunk = await opened.chunks.getChunk(chunkId)
    if (chunk?.state === state) return chunk
    const [claimed] = await opened.chunks.claimChunks(
      deps.holder,
      1,
      Date.now(),
      Date.now() + 60_000,
    )
    if (claimed) await followChunk(deps, claimed)
    else await Bun.sleep(20)
  }
  throw new Error(`chunk ${chunkId} never reached ${state}`)
}

const later = () => Date.now() + 3_600_000

describe('a chunk through OpenAI', () => {
  test('runs to its end: lines billed from their own usage at the lane prices, upstream ids ours', async () => {
    const { id, claimed } = await claimedBatch(
      ['one', 'two', 'three [sim:batch-invalid]'],
      'chk_o1',
    )
    const deps = depsFor(openai(), 'inst-a')
    await submitChunk(deps, {
      id: 'chk_o1',
      batchId: id,
      accountId: 'acct',
      endpoint: 'chat',
      fallbackAtMs: later(),
      lines: claimed,
    })
    const job = sim.batches().jobs.find((item) => item.metadata?.mg_chunk === 'chk_o1')
    expect(job?.customIds).toEqual(['mg-1', 'mg-2', 'mg-3'])
    await followUntil(deps, 'chk_o1', 'ended')
    const lines = await readAll(id)
    expect(lines.map((line) => line.status)).toEqual(['succeeded', 'succeeded', 'failed'])
    for (const line of lines.slice(0, 2)) {
      expect(line.provider).toBe('openai:batch')
      const usage = JSON.parse(line.response!).usage
      const cost = new Decimal(usage.prompt_tokens)
        .mul('0.125')
        .plus(new Decimal(usage.completion_tokens).mul('0.5'))
        .div(1_000_000)
      expect(new Decimal(line.costUsd!).equals(cost)).toBe(true)
    }
    expect(lines[2].error?.code).toBe('invalid_request')
    await deps.client.close()
  })

  test('not ended at the fallback time: cancelled upstream, the rest back to pending unsent', async () => {
    sim.configure({ batchTurnaroundMs: 60_000 })
    const { id, claimed } = await claimedBatch(['slow one', 'slow two'], 'chk_o2')
    const deps = depsFor(openai(), 'inst-a')
    // The fallback time is already here: the first look cancels.
    await submitChunk(deps, {
      id: 'chk_o2',
      batchId: id,
      accountId: 'acct',
      endpoint: 'chat',
      fallbackAtMs: Date.now(),
      lines: claimed,
    })
    const cancelsBefore = sim.batches().cancelled
    await followUntil(deps, 'chk_o2', 'ended')
    expect(sim.batches().cancelled).toBe(cancelsBefore + 1)
    const lines = await readAll(id)
    expect(lines.map((line) => [line.status, line.attempts])).toEqual([
      ['pending', 0],
      ['pending', 0],
    ])
    await deps.client.close()
  })

  test('a create cut off by a crash is found by mg_chunk by the next holder, not made twice', async () => {
    const { id, claimed } = await claimedBatch(['crash one', 'crash two'], 'chk_o3')
    const client = openai()
    // The first holder stores the intent, uploads, creates, and dies before it can write the
    // provider batch id: the steps of submitChunk up to its create, done here by hand.
    await opened.chunks.createChunk(
      {
        id: 'chk_o3',
        batchId: id,
        fallbackAtMs: later(),
        offering: 'openai:batch',
        provider: 'openai',
        upstreamModel: 'gpt-sim',
        endpoint: 'chat',
        lineNos: claimed.map((line) => line.lineNo),
      },
      Date.now(),
      { owner: 'inst-a', untilMs: Date.now() + 60_000 },
    )
    const request = {
      chunkId: 'chk_o3',
      endpoint: 'chat' as const,
      model: 'gpt-sim',
      lines: claimed.map((line, index) => ({
        position: index + 1,
        body: JSON.parse(line.input).body,
      })),
    }
    const file = await client.upload('chk_o3', openAIBatchInput(request))
    if (!file.ok) throw new Error('upload failed')
    await opened.chunks.updateChunk('inst-a', 'chk_o3', { inputFileId: file.value }, Date.now())
    expect((await client.create(request, file.value)).ok).toBe(true)
    // Its lease runs out; another instance takes the chunk over.
    await opened.chunks.releaseChunk('inst-a', 'chk_o3')
    const createdBefore = sim.batches().created
    const intent = await opened.chunks.getChunk('chk_o3')
    expect(intent?.state).toBe('intent')
    expect(intent?.inputFileId).not.toBeNull()
    const taker = depsFor(client, 'inst-b')
    await followUntil(taker, 'chk_o3', 'ended')
    expect(sim.batches().created).toBe(createdBefore)
    expect(sim.batches().jobs.filter((job) => job.metadata?.mg_chunk === 'chk_o3')).toHaveLength(1)
    expect((await readAll(id)).map((line) => line.status)).toEqual(['succeeded', 'succeeded'])
    await client.close()
  })

  test('a cancel of the Multigrid batch reaches the provider', async () => {
    sim.configure({ batchTurnaroundMs: 60_000 })
    const { id, claimed } = await claimedBatch(['to cancel'], 'chk_o4')
    const deps = depsFor(openai(), 'inst-a')
    await submitChunk(deps, {
      id: 'chk_o4',
      batchId: id,
      accountId: 'acct',
      endpoint: 'chat',
      fallbackAtMs: later(),
      lines: claimed,
    })
    const before = sim.batches().cancelled
    expect(await opened.chunks.requestCancel(id, Date.now())).toBe(1)
    await followUntil(deps, 'chk_o4', 'ended')
    expect(sim.batches().cancelled).toBe(before + 1)
    await deps.client.close()
  })
})

describe('a chunk through Anthropic', () => {
  test('errored lines retry by the live rules, expired ones go back unsent, successes are billed', async () => {
    sim.configure({ batchTurnaroundMs: 400, batchExpireMs: 150 })
    const { id, claimed } = await claimedBatch(['a', 'b', 'c', 'd'], 'chk_a1')
    const deps = depsFor(anthropic(), 'inst-a')
    await submitChunk(deps, {
      id: 'chk_a1',
      batchId: id,
      accountId: 'acct',
      endpoint: 'chat',
      fallbackAtMs: later(),
      lines: claimed,
    })
    await followUntil(deps, 'chk_a1', 'ended')
    const lines = await readAll(id)
    // 4 lines over 400 ms, expired at 150 ms: the first done, the rest expired.
    expect(lines[0].status).toBe('succeeded')
    expect(lines[0].provider).toBe('anthropic:batch')
    expect(lines.slice(1).map((line) => [line.status, line.attempts])).toEqual([
      ['pending', 0],
      ['pending', 0],
      ['pending', 0],
    ])
    sim.configure({ batchTurnaroundMs: 0, batchExpireMs: null, batchErrorRate: 1 })
    const again = await opened.dispatch.claimLines({
      batchId: id,
      owner: lineOwnerOf('chk_a2'),
      limit: 100,
      nowMs: Date.now(),
      leaseUntilMs: Date.now() + 60_000,
    })
    expect(again).toHaveLength(3)
    await submitChunk(deps, {
      id: 'chk_a2',
      batchId: id,
      accountId: 'acct',
      endpoint: 'chat',
      fallbackAtMs: later(),
      lines: again,
    })
    await followUntil(deps, 'chk_a2', 'ended')
    // A 5xx line is retried: pending again with its attempt counted.
    expect((await readAll(id)).slice(1).map((line) => [line.status, line.attempts])).toEqual([
      ['pending', 1],
      ['pending', 1],
      ['pending', 1],
    ])
    await deps.client.close()
  })
})
