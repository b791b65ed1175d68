/**
 * The dispatcher's waiting reporter over a real (in-memory) store, its clock passed in: it says
 * why a batch waits once per change, moves a pause's resume time on, and clears only its own
 * code, once the batch moves again (not while the paused provider is still paused).
 */
import { beforeEach, describe, expect, test } from 'bun:test'
import type { OpenedStore } from '../../src/store/store.ts'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { createLogger } from '../../src/telemetry/logger.ts'
import { createWaitingReporter } from '../../src/dispatch/waiting-reporter.ts'
import { newBatch } from '../store/batch-fixtures.ts'

const T0 = 1_764_460_000_000 // ms
let opened: OpenedStore
let now = T0
const logger = createLogger('silent')
/** Lets the reporter's background writes land. */
const settle = () => Bun.sleep(5)
const waitingOf = async () => (await opened.store.getBatch('acct_1', 'batch_01'))!.waiting

beforeEach(async () => {
  now = T0
  opened = createSqliteStore(null)
  await opened.store.createAccount({
    id: 'acct_1',
    name: 'a',
    creditUsd: '100',
    maxOpenBatches: 10,
    rateLimitPerMinute: 600,
    createdAt: 1,
  })
  await opened.store.admitBatch(newBatch('acct_1', 'batch_01', 2))
})

describe('waiting reporter', () => {
  test('a 429 pause is said with its resume time, moved on by a later pause, and cleared once the batch moves after it', async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    reporter.rateLimited('batch_01', 'openai', T0 + 3_500)
    await settle()
    expect(await waitingOf()).toEqual({
      code: 'provider_rate_limited',
      message: `openai answered 429; dispatch resumes at ${new Date(Math.ceil((T0 + 3_500) / 1000) * 1000).toISOString().slice(11, 19)} UTC. Nothing to do: do not resubmit.`,
      until: Math.ceil((T0 + 3_500) / 1000),
    })
    reporter.rateLimited('batch_01', 'openai', T0 + 9_000)
    await settle()
    expect((await waitingOf())!.until).toBe(Math.ceil((T0 + 9_000) / 1000))
    // A line of the same provider ending before the resume time is not the batch moving.
    now = T0 + 5_000
    reporter.progressed('batch_01', 'openai')
    await settle()
    expect((await waitingOf())!.code).toBe('provider_rate_limited')
    // Another provider serving the batch is.
    reporter.progressed('batch_01', 'anthropic')
    await settle()
    expect(await waitingOf()).toBeNull()
  })

  test("a batch lane's refusal says when its lines move, and the next line that ends anywhere clears it", async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    const refusal = { reason: 'the provider batch failed: token_limit_exceeded' }
    reporter.laneRefused('batch_01', 'openai:batch', {
      ...refusal,
      retryAtMs: T0 + 4_000,
      fallbackAtMs: T0 + 3_600_000,
    })
    await settle()
    expect(await waitingOf()).toEqual({
      code: 'provider_unavailable',
      message:
        "openai:batch refused this batch's lines (the provider batch failed: token_limit_exceeded). " +
        `They go to it again at ${new Date(T0 + 4_000).toISOString().slice(0, 19).replace('T', ' ')} UTC, ` +
        `and run on the live offerings from ${new Date(T0 + 3_600_000).toISOString().slice(0, 19).replace('T', ' ')} UTC ` +
        'if it keeps refusing them. Nothing to do: do not resubmit.',
      until: (T0 + 4_000) / 1000,
    })
    // Sent again at the fallback time: they go live then.
    reporter.laneRefused('batch_01', 'openai:batch', {
      ...refusal,
      retryAtMs: T0 + 3_600_000,
      fallbackAtMs: T0 + 3_600_000,
    })
    await settle()
    expect((await waitingOf())!.message).toContain('). They run on the live offerings from ')
    // A line of the batch ending on its live offering.
    reporter.progressed('batch_01', 'openai')
    await settle()
    expect(await waitingOf()).toBeNull()
  })

  test('lines kept to a closed batch lane: said until the deadline, whatever other lines do', async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    const at = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`
    const when = { closedAtMs: T0 - 60_000, deadlineMs: T0 + 7_200_000 }
    reporter.laneClosed('batch_01', 'openai:batch', when)
    await settle()
    expect(await waitingOf()).toEqual({
      code: 'provider_unavailable',
      message:
        'Lines of this batch keep to openai:batch (provider.allow_fallbacks false), which took no ' +
        `lines after ${at(when.closedAtMs)}; no other offering may run them, so they end expired ` +
        `at ${at(when.deadlineMs)}. To run them sooner, cancel the batch and submit its unfinished ` +
        'lines again (GET /v1/batches/batch_01/results?filter=failed&format=input) after ' +
        'setting provider.allow_fallbacks to true in each.',
      until: when.deadlineMs / 1000,
    })
    // Its other lines ending, on the lane or live, do not make it untrue.
    now = T0 + 1_000
    reporter.progressed('batch_01', 'openai')
    reporter.progressed('batch_01', 'openai:batch')
    reporter.capacityBusy('batch_01', 'openai')
    // Nor do other reasons its other lines wait for, which would then be cleared by progress.
    reporter.unavailable('batch_01', 'pool')
    reporter.rateLimited('batch_01', 'openai', now + 5_000)
    reporter.laneRefused('batch_01', 'openai:batch', {
      reason: 'failed',
      retryAtMs: now + 1_000,
      fallbackAtMs: now + 2_000,
    })
    reporter.progressed('batch_01', 'pool')
    await settle()
    expect((await waitingOf())!.message).toStartWith('Lines of this batch keep to openai:batch')
    // Past the deadline it is no longer the reason.
    now = when.deadlineMs + 1
    reporter.progressed('batch_01', null)
    await settle()
    expect(await waitingOf()).toBeNull()
  })

  test('capacity freed clears capacity_busy only: a 429 said since stays', async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    reporter.capacityBusy('batch_01', 'pool')
    await settle()
    expect((await waitingOf())!.code).toBe('capacity_busy')
    reporter.capacityFreed('batch_01')
    await settle()
    expect(await waitingOf()).toBeNull()
    reporter.capacityBusy('batch_01', 'pool')
    reporter.rateLimited('batch_01', 'pool', T0 + 30_000)
    reporter.capacityFreed('batch_01')
    await settle()
    expect((await waitingOf())!.code).toBe('provider_rate_limited')
  })

  test('429s on both providers: a line ending on either while it is paused leaves the reason', async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    reporter.rateLimited('batch_01', 'openai', T0 + 2_000)
    reporter.rateLimited('batch_01', 'anthropic', T0 + 4_000)
    await settle()
    expect((await waitingOf())!.message).toStartWith('anthropic answered 429')
    // A line given up on openai while openai is paused: the pause's doing, not progress.
    now = T0 + 1_000
    reporter.progressed('batch_01', 'openai')
    await settle()
    expect((await waitingOf())!.code).toBe('provider_rate_limited')
    // Once openai is past its pause, a line ending there is the batch moving.
    now = T0 + 2_500
    reporter.progressed('batch_01', 'openai')
    await settle()
    expect(await waitingOf()).toBeNull()
  })

  test('clears only its own code, leaving another part’s', async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    reporter.unavailable('batch_01', 'gpu-pool')
    await settle()
    expect((await waitingOf())!.code).toBe('provider_unavailable')
    // Another part (the claim under a cap, say) replaces it; progress then leaves that standing.
    await opened.dispatch.setWaiting('batch_01', { code: 'max_cost_reached', message: 'cap' })
    reporter.progressed('batch_01', 'gpu-pool')
    await settle()
    expect(await waitingOf()).toEqual({ code: 'max_cost_reached', message: 'cap' })
  })
})

describe('waiting reporter, busy (flex out of capacity)', () => {
  test('said while no line of the batch moves, cleared by the next that does, silent while lines move', async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    reporter.busy('batch_01', 'openai:flex', T0 + 1_000)
    await settle()
    expect(await waitingOf()).toMatchObject({
      code: 'provider_rate_limited',
      message: expect.stringMatching(/^openai:flex answered 429/),
    })
    // A line that ends, on that very provider too: no pause to wait out, the batch moves.
    now += 100
    reporter.progressed('batch_01', 'openai:flex')
    await settle()
    expect(await waitingOf()).toBeNull()
    // Busy answers among lines that move (some refused, most served): nothing to say.
    now += 1_000
    reporter.busy('batch_01', 'openai:flex', now + 1_000)
    await settle()
    expect(await waitingOf()).toBeNull()
    // Once nothing has moved for a while, it is said again.
    now += 6_000
    reporter.busy('batch_01', 'openai:flex', now + 1_000)
    await settle()
    expect((await waitingOf())?.code).toBe('provider_rate_limited')
  })

  test('while it stays busy, the resume time said moves on once it has passed', async () => {
    const reporter = createWaitingReporter(opened.dispatch, logger, () => now)
    reporter.busy('batch_01', 'openai:flex', T0 + 1_000)
    await settle()
    expect((await waitingOf())?.until).toBe(T0 / 1000 + 1)
    // Busy again before that time: nothing new to say.
    now += 500
    reporter.busy('batch_01', 'openai:flex', now + 1_000)
    await settle()
    expect((await waitingOf())?.until).toBe(T0 / 1000 + 1)
    // Past it, still busy: the time said is the next one, not one gone by.
    now += 1_500
    reporter.busy('batch_01', 'openai:flex', now + 1_000)
    await settle()
    expect((await waitingOf())?.until).toBe(Math.ceil((now + 1_000) / 1000))
    expect((await waitingOf())?.code).toBe('provider_rate_limited')
  })
})
