/**
 * The batch-lane engine (src/dispatch/batch-lane/batch-lane-engine.ts) on the real embedded store
 * against the simulator's batch APIs, without the live dispatcher: a batch with ample time runs
 * wholly through provider batches at the lane's prices, in chunks of at most chunk_lines with
 * upstream ids of the gateway's own, results arriving before the last chunk ends; a second
 * instance takes over the chunks of one that stopped, creating none twice.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import {
  createAnthropicBatchClient,
  createOpenAIBatchClient,
  type AnthropicBatchClient,
  type OpenAIBatchClient,
} from '../../providers/batch-api/index.ts'
import { catalogSchema } from '../../src/catalog/catalog-file.ts'
import { laneMark } from '../../src/catalog/lane-mark.ts'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { createBatchLaneEngine } from '../../src/dispatch/batch-lane/batch-lane-engine.ts'
import { createLaneBatches } from '../../src/dispatch/batch-lane/lane-batches.ts'
import { openBatchLanes } from '../../src/dispatch/batch-lane/choose-batch-lane.ts'
import { DEFAULT_RETRY } from '../../src/dispatch/retry-policy.ts'
import { createWaitingReporter, type WaitingReporter } from '../../src/dispatch/waiting-reporter.ts'
import { createLogger } from '../../src/telemetry/logger.ts'
import { waitFor } from '../helpers/wait.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import type { OpenedStore } from '../../src/store/store.ts'

let sim: Simulator
let opened: OpenedStore
let clients: Record<string, OpenAIBatchClient | AnthropicBatchClient>
let batchNo = 0
const NOW = Math.floor(Date.now() / 1000)

beforeAll(async () => {
  sim = await startSimulator({})
  clients = {
    openai: createOpenAIBatchClient({
      name: 'openai',
      baseUrl: `${sim.url}/v1`,
      apiKey: null,
      timeoutMs: 5000,
    }),
    anthropic: createAnthropicBatchClient({
      name: 'anthropic',
      baseUrl: sim.url,
      apiKey: null,
      timeoutMs: 5000,
    }),
  }
})
afterAll(async () => {
  for (const client of Object.values(clients)) await client.close()
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
  sim.configure({
    batchTurnaroundMs: 300,
    batchErrorRate: 0,
    batchExpireMs: null,
    batchFailCode: null,
  })
})
afterEach(async () => {
  await opened.store.close()
})

/** Anthropic's Message Batches as a lane at half the live price. */
const CLAUDE_LANE = {
  provider: 'anthropic',
  upstream_model: 'claude-sim',
  lane: 'batch',
  input_usd_per_mtok: '0.5',
  output_usd_per_mtok: '2.5',
  poll_s: 0.05,
}

/** A chat model of the test catalog, with these offerings. */
const chatModel = (id: string, offerings: unknown[]) => ({
  id,
  endpoints: ['chat'],
  context_tokens: 8192,
  max_output_tokens: 1024,
  offerings,
})

/** OpenAI's live offering of gpt-sim. */
const GPT_LIVE = {
  provider: 'openai',
  upstream_model: 'gpt-sim',
  input_usd_per_mtok: '0.15',
  output_usd_per_mtok: '0.6',
}

const catalog = createCatalog(
  catalogSchema.parse({
    providers: {
      openai: { kind: 'openai', base_url: 'http://127.0.0.1:1/v1' },
      anthropic: { kind: 'anthropic', base_url: 'http://127.0.0.1:1' },
      'openai-responses': {
        kind: 'openai',
        base_url: 'http://127.0.0.1:1/v1',
        responses_api: true,
      },
    },
    models: [
      // Live where the Responses API is spoken, its batch lane on Anthropic's Message Batches.
      chatModel('responses-mixed', [
        {
          provider: 'openai-responses',
          upstream_model: 'gpt-sim',
          input_usd_per_mtok: '1',
          output_usd_per_mtok: '5',
        },
        CLAUDE_LANE,
      ]),
      chatModel('gpt-lane', [
        GPT_LIVE,
        {
          ...GPT_LIVE,
          lane: 'batch',
          input_usd_per_mtok: '0.075',
          output_usd_per_mtok: '0.3',
          chunk_lines: 10,
          poll_s: 0.05,
        },
      ]),
      chatModel('gpt-live', [GPT_LIVE]),
      // Two batch lanes, each opening and closing on its own.
      chatModel('two-lanes', [
        { ...GPT_LIVE, input_usd_per_mtok: '1', output_usd_per_mtok: '2' },
        { ...CLAUDE_LANE, upstream_model: 'claude-sim', min_hours_left: 1 },
        {
          ...GPT_LIVE,
          lane: 'batch',
          input_usd_per_mtok: '0.1',
          output_usd_per_mtok: '0.2',
          min_hours_left: 10,
        },
      ]),
      chatModel('claude-lane', [
        {
          provider: 'anthropic',
          upstream_model: 'claude-sim',
          input_usd_per_mtok: '1',
          output_usd_per_mtok: '5',
        },
        CLAUDE_LANE,
      ]),
    ],
  }),
  {},
)

const engineFor = (holder: string, leaseMs = 60_000, waiting?: WaitingReporter) =>
  createBatchLaneEngine(
    {
      chunks: opened.chunks,
      dispatch: opened.dispatch,
      batches: opened.store,
      catalog,
      client: (provider) => clients[provider],
      retry: DEFAULT_RETRY,
      waiting,
    },
    { holder, leaseMs },
  )

/** A batch of chat lines of `model`, admitted as the gateway would. */
const admit = (model: string, count: number) =>
  admitLines(
    '/v1/chat/completions',
    Array.from({ length: count }, (_, index) => ({
      model,
      max_tokens: 16,
      messages: [{ role: 'user', content: `question ${index + 1}` }],
    })),
  )

/** A line's mark for a batch lane, as admission sets it (laneMark). */
function batchLaneOf(body: Record<string, unknown>): string | undefined {
  const model = catalog.find(String(body.model))
  return model ? laneMark(catalog, { model, routing: body.provider as never }, null) : undefined
}

/** A batch of these bodies, each a line to `url`; its id. */
async function admitLines(
  url: '/v1/chat/completions' | '/v1/responses',
  bodies: readonly Record<string, unknown>[],
) {
  const id = `batch_e${++batchNo}`
  const lines = bodies.map((body, index) => ({
    lineNo: index + 1,
    customId: `user-line-${index + 1}`,
    input: JSON.stringify({ custom_id: `user-line-${index + 1}`, method: 'POST', url, body }),
    batchLane: batchLaneOf(body),
  }))
  const admitted = await opened.store.admitBatch({
    id,
    accountId: 'acct',
    name: null,
    endpoint: url,
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
  return id
}

const readAll = (batchId: string) =>
  opened.store.readLines(batchId, { afterLineNo: 0, limit: 1000, statuses: null })

describe('the batch-lane engine', () => {
  test('a batch with ample time runs wholly through provider batches at the lane prices', async () => {
    const id = await admit('gpt-lane', 25)
    const engine = engineFor('inst-a')
    let earlyResults = false
    for (let i = 0; i < 400; i++) {
      await engine.tick()
      // The first chunk answers in 300 ms, the later ones take 2 s: its results must show first.
      if (i === 0) sim.configure({ batchTurnaroundMs: 2000 })
      const lines = await readAll(id)
      const done = lines.filter((line) => line.status === 'succeeded').length
      const running = sim.batches().jobs.some((job) => job.status === 'in_progress')
      if (done > 0 && done < 25 && running) earlyResults = true
      if (done === 25) break
      await Bun.sleep(20)
    }
    const lines = await readAll(id)
    expect(lines.map((line) => line.status)).toEqual(Array(25).fill('succeeded'))
    expect(earlyResults).toBe(true)
    let total = new Decimal(0)
    for (const line of lines) {
      expect(line.provider).toBe('openai:batch')
      const usage = JSON.parse(line.response!).usage
      const cost = new Decimal(usage.prompt_tokens)
        .mul('0.075')
        .plus(new Decimal(usage.completion_tokens).mul('0.3'))
        .div(1_000_000)
      expect(new Decimal(line.costUsd!).equals(cost)).toBe(true)
      total = total.plus(line.costUsd!)
    }
    const jobs = sim.batches().jobs.filter((job) => job.dialect === 'openai')
    expect(jobs.map((job) => job.customIds.length)).toEqual([10, 10, 5])
    for (const job of jobs) {
      expect(job.customIds.every((customId) => /^mg-\d+$/.test(customId))).toBe(true)
    }
    const batch = await opened.store.getBatch('acct', id)
    expect(new Decimal(batch!.costUsd).equals(total)).toBe(true)
  })

  test('a provider batch failed as a whole: its lines wait longer each time, then run on the lane', async () => {
    sim.configure({ batchTurnaroundMs: 100, batchFailCode: 'token_limit_exceeded' })
    const id = await admit('gpt-lane', 5)
    const waiting = createWaitingReporter(opened.dispatch, createLogger('error'))
    const engine = engineFor('inst-a', 60_000, waiting)
    const before = sim.batches().created
    const started = Date.now()
    // 2 s of ticks every 20 ms; without a wait each failure was uploaded again a poll (50 ms) later.
    while (Date.now() - started < 2_000) {
      await engine.tick()
      await Bun.sleep(20)
    }
    const failedCreates = sim.batches().created - before
    // Waits of 2, 4, 8 and 16 × poll_s after the failures in a row: five creates in 2 s.
    expect(failedCreates).toBeGreaterThanOrEqual(2)
    expect(failedCreates).toBeLessThanOrEqual(6)
    const pending = await readAll(id)
    expect(pending.map((line) => [line.status, line.attempts])).toEqual(
      Array(5).fill(['pending', 0]),
    )
    // The batch says why it waits, what was refused, and when its lines move.
    const refused = (await opened.store.getBatch('acct', id))!.waiting
    expect(refused?.code).toBe('provider_unavailable')
    expect(refused?.message).toStartWith(
      "openai:batch refused this batch's lines (the provider batch failed: token_limit_exceeded). They go to it again at ",
    )
    expect(refused?.message).toContain('and run on the live offerings from ')
    expect(refused?.until).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000))
    sim.configure({ batchFailCode: null })
    for (let i = 0; i < 300; i++) {
      await engine.tick()
      if ((await readAll(id)).every((line) => line.status === 'succeeded')) break
      await Bun.sleep(20)
    }
    const lines = await readAll(id)
    expect(lines.map((line) => [line.status, line.provider, line.attempts])).toEqual(
      Array(5).fill(['succeeded', 'openai:batch', 1]),
    )
    // Lines that ran on the lane clear the reason.
    await waitFor('the reason to clear', async () =>
      (await opened.store.getBatch('acct', id))!.waiting === null ? true : null,
    )
  })

  test('another instance takes over the chunks of one that stopped, creating none twice', async () => {
    sim.configure({ batchTurnaroundMs: 400 })
    const id = await admit('claude-lane', 6)
    const first = engineFor('inst-a', 300)
    // The first instance submits the chunk, then stops (as if killed) before it ends.
    expect((await first.tick()).submitted).toBe(1)
    const created = sim.batches().created
    const taker = engineFor('inst-b', 300)
    for (let i = 0; i < 400; i++) {
      await taker.tick()
      const lines = await readAll(id)
      if (lines.every((line) => line.status === 'succeeded')) break
      await Bun.sleep(20)
    }
    const lines = await readAll(id)
    expect(lines.map((line) => [line.status, line.provider])).toEqual(
      Array(6).fill(['succeeded', 'anthropic:batch']),
    )
    expect(sim.batches().created).toBe(created)
  })

  test('an Anthropic create a crash cut off is found and cancelled; the lines run once more, in a new chunk', async () => {
    sim.configure({ batchTurnaroundMs: 5_000 })
    const id = await admit('claude-lane', 4)
    const before = sim.batches()
    // The first instance dies right after its create reached Anthropic, before it wrote the id.
    const real = clients.anthropic as AnthropicBatchClient
    const dying: AnthropicBatchClient = {
      ...real,
      async create(input) {
        await real.create(input)
        throw new Error('killed')
      },
    }
    const first = createBatchLaneEngine(
      {
        chunks: opened.chunks,
        dispatch: opened.dispatch,
        batches: opened.store,
        catalog,
        client: (provider) => (provider === 'anthropic' ? dying : clients[provider]),
        retry: DEFAULT_RETRY,
      },
      { holder: 'inst-a', leaseMs: 300 },
    )
    await expect(first.tick()).rejects.toThrow('killed')
    await Bun.sleep(350)
    const copy = sim.batches().jobs.at(-1)!
    expect(sim.batches().created - before.created).toBe(1)
    sim.configure({ batchTurnaroundMs: 200 })
    const taker = engineFor('inst-b', 300)
    for (let i = 0; i < 400; i++) {
      await taker.tick()
      const lines = await readAll(id)
      if (lines.every((line) => line.status === 'succeeded')) break
      await Bun.sleep(20)
    }
    expect((await readAll(id)).map((line) => line.status)).toEqual(Array(4).fill('succeeded'))
    const after = sim.batches()
    expect(after.cancelled - before.cancelled).toBe(1)
    expect(after.jobs.find((job) => job.id === copy.id)?.status).toBe('cancelled')
    // The copy and one new chunk: nothing else was sent.
    expect(after.created - before.created).toBe(2)
  })

  test("a Responses line with fields only the Responses API takes is left to the live lanes, not refused by Anthropic's", async () => {
    const bodies = [
      { model: 'responses-mixed', input: 'q1', max_output_tokens: 16 },
      {
        model: 'responses-mixed',
        input: 'q2',
        max_output_tokens: 16,
        reasoning: { effort: 'low' },
      },
    ]
    const id = await admitLines('/v1/responses', bodies)
    const engine = engineFor('inst-a')
    for (let i = 0; i < 200; i++) {
      await engine.tick()
      if ((await readAll(id))[0]!.status === 'succeeded') break
      await Bun.sleep(20)
    }
    const [first, second] = await readAll(id)
    // The first as its chat translation through Anthropic's batch, kept as its Response.
    expect(first).toMatchObject({ status: 'succeeded', provider: 'anthropic:batch' })
    expect(JSON.parse(first!.response!).object).toBe('response')
    // The second back to pending, unsent, for an offering that speaks the Responses API.
    expect(second).toMatchObject({ status: 'pending', attempts: 0, error: null })
  })

  test('the live dispatcher is left the batches the lane does not serve, and the rest after the lane closes', async () => {
    const laneId = await admit('gpt-lane', 3)
    const liveId = await admit('gpt-live', 3)
    const lanes = createLaneBatches(opened.dispatch, catalog, (provider) => provider in clients)
    const runnable = await opened.dispatch.runnableBatches(Date.now(), 100)
    const ids = (list: { id: string }[]) => list.map((batch) => batch.id).sort()
    expect(ids(runnable)).toEqual([laneId, liveId].sort())
    const [live] = await lanes.liveOnly(runnable, Date.now())
    expect(live?.id).toBe(liveId)
    // Admission marked none of its lines: its claims need leave nothing to the lanes.
    expect(runnable.find((batch) => batch.id === laneId)?.laneLines).toBe(true)
    expect(live?.laneLines).toBe(false)
    expect(live?.leaveToLanes).toBeUndefined()
    // Four hours before the deadline (min_hours_left) the lane takes its last lines.
    const closes = (NOW + 86_400) * 1000 - 4 * 3_600_000
    expect(ids(await lanes.liveOnly(runnable, closes - 10_000))).toEqual([liveId])
    expect(ids(await lanes.liveOnly(runnable, closes + 1))).toEqual([laneId, liveId].sort())
    for (const batch of await lanes.liveOnly(runnable, closes + 1))
      expect(batch.leaveToLanes ?? []).not.toContain('gpt-lane|openai')
  })

  test('a batch without marked lines costs the lanes no look at its lines, from the engine or the live dispatcher’s filter', async () => {
    const liveId = await admit('gpt-live', 3)
    const looked: string[] = []
    const dispatch = {
      ...opened.dispatch,
      nextLine: (...args: Parameters<typeof opened.dispatch.nextLine>) => {
        looked.push(args[0])
        return opened.dispatch.nextLine(...args)
      },
      laneLinesPending: (...args: Parameters<typeof opened.dispatch.laneLinesPending>) => {
        looked.push(args[0])
        return opened.dispatch.laneLinesPending(...args)
      },
    }
    const engine = createBatchLaneEngine(
      {
        chunks: opened.chunks,
        dispatch,
        batches: opened.store,
        catalog,
        client: (provider) => clients[provider],
        retry: DEFAULT_RETRY,
      },
      { holder: 'inst-a', leaseMs: 60_000 },
    )
    expect(await engine.tick()).toEqual({ submitted: 0, followed: 0 })
    const lanes = createLaneBatches(dispatch, catalog, (provider) => provider in clients)
    const runnable = await opened.dispatch.runnableBatches(Date.now(), 100)
    expect(await lanes.liveOnly(runnable, Date.now())).toEqual(runnable)
    expect(looked).toEqual([])
    // A batch with a marked line is looked at by both.
    const laneId = await admit('gpt-lane', 1)
    await engine.tick()
    await lanes.liveOnly(await opened.dispatch.runnableBatches(Date.now(), 100), Date.now())
    expect(looked.length).toBeGreaterThan(0)
    expect(new Set(looked)).toEqual(new Set([laneId]))
    expect((await readAll(liveId)).map((line) => line.status)).toEqual(Array(3).fill('pending'))
  })

  test('a line is marked for the first batch lane of its order, and each of a model’s batch lanes opens and closes on its own', () => {
    const model = catalog.find('two-lanes')!
    // The cheapest lane first: its lines are marked for OpenAI's batch lane.
    expect(laneMark(catalog, { model, routing: undefined }, null)).toBe('two-lanes|openai')
    const open = (hoursLeft: number) =>
      openBatchLanes(catalog, {
        deadlineMs: NOW * 1000 + hoursLeft * 3_600_000,
        nowMs: NOW * 1000,
        hasClient: () => true,
      }).filter((lane) => lane.startsWith('two-lanes|'))
    expect(open(12).sort()).toEqual(['two-lanes|anthropic', 'two-lanes|openai'])
    expect(open(5)).toEqual(['two-lanes|anthropic'])
    expect(open(0.5)).toEqual([])
  })

  test('a batch whose first line is live is the live dispatcher’s, counting only the lines the lanes do not hold', async () => {
    const body = (model: string) => ({
      model,
      max_tokens: 16,
      messages: [{ role: 'user', content: 'question' }],
    })
    const id = await admitLines('/v1/chat/completions', [
      body('gpt-live'),
      body('gpt-lane'),
      body('gpt-live'),
      body('gpt-lane'),
      body('gpt-lane'),
    ])
    const lanes = createLaneBatches(opened.dispatch, catalog, (provider) => provider in clients)
    const runnable = await opened.dispatch.runnableBatches(Date.now(), 100)
    expect(runnable.find((batch) => batch.id === id)?.pending).toBe(5)
    const live = (await lanes.liveOnly(runnable, Date.now())).find((batch) => batch.id === id)
    expect(live?.pending).toBe(2)
    const leave = live!.leaveToLanes!
    expect(leave).toContain('gpt-lane|openai')
    // Its live claims take the two live lines, never the lane's.
    const claimed = await opened.dispatch.claimLines({
      batchId: id,
      owner: 'live',
      limit: 10,
      nowMs: Date.now(),
      leaseUntilMs: Date.now() + 60_000,
      lanes: { except: leave },
    })
    expect(claimed.map((line) => line.lineNo)).toEqual([1, 3])
  })
})
