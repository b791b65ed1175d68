/**
 * The dispatch store's contract (src/store/dispatch/), on every store (every-store.ts; on a file
 * the dispatcher's calls run on their own thread, as in the gateway): runnable batches, claims
 * under leases, recorded outcomes and their charges, renewed, released and reaped leases, spend
 * caps, why a batch waits, and the batch life cycle (advanceBatches). Each test gets a store of
 * its own, so the dispatcher's store-wide calls (advance, reap) see only its data. Longer than
 * most files: it is the dispatcher's calls' specification, method by method.
 */
import { describe, expect } from 'bun:test'
import type { LineError } from '../../src/domain.ts'
import { Money, moneyText } from '../../src/money/decimal.ts'
import type {
  DispatchStore,
  LineClaim,
  LineOutcome,
  LineUsage,
  NewLine,
  Store,
} from '../../src/store/store.ts'
import {
  failed,
  inputOf,
  lineList,
  newBatch,
  retry,
  storeHelpers,
  succeeded,
} from './batch-fixtures.ts'
import { freshStoreEachTest, MS, onEveryStore, T0 } from './every-store.ts'
import { runProgressContract } from './progress-contract.ts'

onEveryStore(({ name, makeStore, it }) => {
  let store: Store
  /** The dispatcher's part, as the gateway hands it to the dispatcher. */
  let dispatch: DispatchStore
  const { account, admit, claim, batchOf, allLines } = storeHelpers(() => ({
    store,
    dispatch,
  }))

  describe.serial(`dispatch store contract: ${name}`, () => {
    freshStoreEachTest(makeStore, (opened) => {
      store = opened.store
      dispatch = opened.dispatch
    })

    describe('dispatch', () => {
      it('lists runnable batches earliest deadline first', async () => {
        await account('acct_1')
        await account('acct_2')
        await admit('acct_1', 'batch_01', 2, { deadlineAt: T0 + 3 * 3600 })
        await admit('acct_2', 'batch_02', 3, { deadlineAt: T0 + 3600 })
        await admit('acct_1', 'batch_03', 1, { deadlineAt: T0 + 2 * 3600 })
        await admit('acct_1', 'batch_04', 1) // cancelled: not runnable
        await store.cancelBatch('acct_1', 'batch_04', T0)
        await admit('acct_1', 'batch_05', 1) // every line claimed: not runnable
        await claim('batch_05', 'owner-a', 1)
        expect(await dispatch.runnableBatches(MS, 10)).toEqual([
          {
            id: 'batch_02',
            accountId: 'acct_2',
            createdAt: T0,
            deadlineAt: T0 + 3600,
            endpoint: '/v1/chat/completions',
            pending: 3,
            running: 0,
            laneLines: false,
          },
          {
            id: 'batch_03',
            accountId: 'acct_1',
            createdAt: T0,
            deadlineAt: T0 + 7200,
            endpoint: '/v1/chat/completions',
            pending: 1,
            running: 0,
            laneLines: false,
          },
          {
            id: 'batch_01',
            accountId: 'acct_1',
            createdAt: T0,
            deadlineAt: T0 + 10_800,
            endpoint: '/v1/chat/completions',
            pending: 2,
            running: 0,
            laneLines: false,
          },
        ])
        expect((await dispatch.runnableBatches(MS, 1)).map((b) => b.id)).toEqual(['batch_02'])
        // Past its deadline a batch is no longer runnable.
        expect((await dispatch.runnableBatches((T0 + 3600) * 1000, 10)).map((b) => b.id)).toEqual([
          'batch_03',
          'batch_01',
        ])
      })

      it('tells the statuses of the batches asked for, leaving out missing ones', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 1)
        await admit('acct_1', 'batch_02', 1)
        await store.cancelBatch('acct_1', 'batch_02', T0)
        expect(await dispatch.batchStatuses(['batch_01', 'batch_02', 'batch_99'])).toEqual({
          batch_01: 'in_progress',
          batch_02: 'cancelled',
        })
        expect(await dispatch.batchStatuses([])).toEqual({})
      })

      it('looks at the first due pending line without claiming it or starting the batch', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 3)
        const next = (lineNo: number) => ({ lineNo, input: inputOf(lineNo), batchLane: null })
        expect(await dispatch.nextLine('batch_01', MS)).toEqual(next(1))
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          startedAt: null,
          counts: { pending: 3, running: 0 },
        })
        // Line 1 claimed, then back with a later not_before: line 2 is next until then.
        await claim('batch_01', 'owner-a', 1)
        expect(await dispatch.nextLine('batch_01', MS)).toEqual(next(2))
        await dispatch.recordOutcomes('owner-a', [retry('batch_01', 1, MS + 5000)], MS)
        expect(await dispatch.nextLine('batch_01', MS + 1000)).toEqual(next(2))
        expect(await dispatch.nextLine('batch_01', MS + 5000)).toEqual(next(1))
        await claim('batch_01', 'owner-a', 3, MS + 5000)
        expect(await dispatch.nextLine('batch_01', MS + 5000)).toBeNull()
        expect(await dispatch.nextLine('batch_99', MS)).toBeNull()
      })

      it('keeps a look or a claim to lines marked for a batch lane, or to the others, and unmarks lines', async () => {
        await account('acct_1')
        // Lines 2, 3 and 5 of model m-lane, marked for its batch lane; 1 and 4 not.
        const marked = new Set([2, 3, 5])
        const lanes = (own: Partial<NewLine> = {}) =>
          lineList(5).map((line) => ({
            ...line,
            ...own,
            ...(marked.has(line.lineNo) ? { batchLane: 'm-lane' } : {}),
          }))
        await admit('acct_1', 'batch_01', 5, { lines: lanes() })
        await admit('acct_1', 'batch_03', 2)
        // The batch says whether admission marked any of its lines.
        const runnable = await dispatch.runnableBatches(MS, 10)
        expect(runnable.map((batch) => [batch.id, batch.laneLines])).toEqual([
          ['batch_01', true],
          ['batch_03', false],
        ])
        const nos = (lines: { lineNo: number }[]) => lines.map((line) => line.lineNo)
        expect(await dispatch.nextLine('batch_01', MS)).toEqual({
          lineNo: 1,
          input: inputOf(1),
          batchLane: null,
        })
        expect(await dispatch.nextLine('batch_01', MS, ['m-lane'])).toEqual({
          lineNo: 2,
          input: inputOf(2),
          batchLane: 'm-lane',
        })
        expect(await dispatch.nextLine('batch_01', MS, ['other'])).toBeNull()
        const lane = (limit: number, lanes: LineClaim['lanes'], owner = 'owner-a') =>
          dispatch.claimLines({
            batchId: 'batch_01',
            owner,
            limit,
            nowMs: MS,
            leaseUntilMs: MS + 60_000,
            lanes,
          })
        expect(nos(await lane(2, { only: 'm-lane' }))).toEqual([2, 3])
        // Line 5 is the lane's no more, nor line 3, claimed meanwhile and handed back: a live
        // claim leaving m-lane's lines now takes them.
        await dispatch.leaveLane('batch_01', [5, 3])
        await dispatch.recordOutcomes('owner-a', [retry('batch_01', 3, MS)], MS)
        expect(await dispatch.nextLine('batch_01', MS, ['m-lane'])).toBeNull()
        expect(nos(await lane(10, { except: ['m-lane'] }, 'owner-b'))).toEqual([1, 3, 4, 5])
        expect(nos(await lane(10, undefined))).toEqual([])
        // A capped batch's claims keep to them too.
        await admit('acct_1', 'batch_02', 5, {
          maxCostUsd: '10',
          lines: lanes({ ceilingUsd: '0.1' }),
        })
        const capped = (lanes: LineClaim['lanes']) =>
          dispatch.claimLines({
            batchId: 'batch_02',
            owner: 'owner-c',
            limit: 10,
            nowMs: MS,
            leaseUntilMs: MS + 60_000,
            lanes,
          })
        expect(nos(await capped({ except: ['m-lane'] }))).toEqual([1, 4])
        expect(nos(await capped({ only: 'm-lane' }))).toEqual([2, 3, 5])
      })

      it('looks for the earliest line marked for any of several batch-lane models', async () => {
        await account('acct_1')
        const model = (lineNo: number) => (lineNo === 2 ? 'm-b' : lineNo === 4 ? 'm-a' : undefined)
        const lines = lineList(4).map((line) => {
          const batchLane = model(line.lineNo)
          return batchLane ? { ...line, batchLane } : line
        })
        await admit('acct_1', 'batch_01', 4, { lines })
        const first = (models: string[]) =>
          dispatch
            .nextLine('batch_01', MS, models)
            .then((line) => line && [line.lineNo, line.batchLane])
        expect(await first(['m-a', 'm-b'])).toEqual([2, 'm-b'])
        expect(await first(['m-a'])).toEqual([4, 'm-a'])
        expect(await first([])).toBeNull()
      })

      it('claims pending lines in line order, leased, counted, once', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 5, { deadlineAt: T0 + 7200 })
        const first = await dispatch.claimLines({
          batchId: 'batch_01',
          owner: 'owner-a',
          limit: 2,
          nowMs: MS + 1500,
          leaseUntilMs: MS + 61_500,
        })
        expect(first).toEqual([
          {
            batchId: 'batch_01',
            accountId: 'acct_1',
            lineNo: 1,
            customId: 'c-1',
            input: inputOf(1),
            attempts: 1,
            deadlineAt: T0 + 7200,
          },
          {
            batchId: 'batch_01',
            accountId: 'acct_1',
            lineNo: 2,
            customId: 'c-2',
            input: inputOf(2),
            attempts: 1,
            deadlineAt: T0 + 7200,
          },
        ])
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          startedAt: T0 + 1,
          counts: { pending: 3, running: 2 },
        })
        expect((await allLines('batch_01')).map((l) => l.status)).toEqual([
          'running',
          'running',
          'pending',
          'pending',
          'pending',
        ])
        expect((await claim('batch_01', 'owner-b', 2, MS + 9000)).map((l) => l.lineNo)).toEqual([
          3, 4,
        ])
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([5])
        expect(await claim('batch_01', 'owner-a', 10)).toEqual([])
        // started_at is the first claim's.
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          startedAt: T0 + 1,
          counts: { pending: 0, running: 5 },
        })
        expect(await claim('batch_99', 'owner-a', 10)).toEqual([])
      })

      it('never gives one line to two owners claiming at the same time', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 100)
        const [a, b] = await Promise.all([
          claim('batch_01', 'owner-a', 30),
          claim('batch_01', 'owner-b', 30),
        ])
        expect(a).toHaveLength(30)
        expect(b).toHaveLength(30)
        const aNos = new Set(a.map((l) => l.lineNo))
        expect(b.filter((l) => aNos.has(l.lineNo))).toEqual([])
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 40,
          running: 60,
        })

        // Many owners until the batch is drained: every line exactly once.
        const claimed = [...a, ...b]
        for (;;) {
          const round = await Promise.all(
            ['c', 'd', 'e', 'f'].map((o) => claim('batch_01', `owner-${o}`, 7)),
          )
          if (round.every((lines) => lines.length === 0)) break
          claimed.push(...round.flat())
        }
        expect(claimed.map((l) => l.lineNo).sort((x, y) => x - y)).toEqual(
          Array.from({ length: 100 }, (_, i) => i + 1),
        )
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 0,
          running: 100,
        })
      })

      it('renews only the owner’s leases', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 5)
        await claim('batch_01', 'owner-a', 3, MS, 1000)
        await claim('batch_01', 'owner-b', 2, MS, 1000)
        expect(await dispatch.renewLeases('owner-a', MS + 60_000)).toBe(3)
        expect(await dispatch.renewLeases('owner-z', MS + 60_000)).toBe(0)
        // Only owner-b's leases ran out.
        expect(await dispatch.reapExpiredLeases(MS + 2000)).toBe(2)
        expect((await allLines('batch_01')).map((l) => l.status)).toEqual([
          'running',
          'running',
          'running',
          'pending',
          'pending',
        ])
        expect(
          await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0')], MS + 3000),
        ).toMatchObject({ recorded: 1 })
      })

      it('bills a success exactly, from the batch hold first', async () => {
        await account('acct_1', '1')
        await admit('acct_1', 'batch_01', 4, { costCeilingUsd: '0.5' })
        await claim('batch_01', 'owner-a', 4)
        const recorded = await dispatch.recordOutcomes(
          'owner-a',
          [
            succeeded('batch_01', 1, '0.000000123'),
            succeeded('batch_01', 2, '0.000000456'),
            succeeded('batch_01', 3, '0.1'),
          ],
          MS + 2000,
        )
        expect(recorded).toMatchObject({ recorded: 3 })
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          costUsd: '0.100000579',
          heldUsd: '0.399999421',
          counts: { pending: 0, running: 1, succeeded: 3 },
        })
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '0.899999421',
          heldUsd: '0.399999421',
        })
        const lines = await allLines('batch_01')
        expect(lines.map((l) => [l.status, l.costUsd])).toEqual([
          ['succeeded', '0.000000123'],
          ['succeeded', '0.000000456'],
          ['succeeded', '0.1'],
          ['running', null],
        ])
        // A line that costs more than what is left of the hold takes the rest from the balance.
        expect(
          await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 4, '0.45')], MS + 3000),
        ).toMatchObject({ recorded: 1 })
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          costUsd: '0.550000579',
          heldUsd: '0',
        })
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '0.449999421',
          heldUsd: '0',
        })
      })

      it('records a failure with its error, billing what it cost', async () => {
        await account('acct_1', '1')
        await admit('acct_1', 'batch_01', 2, { costCeilingUsd: '0.5' })
        await claim('batch_01', 'owner-a', 2)
        const error: LineError = { code: 'upstream_error', message: 'retries exhausted' }
        expect(
          await dispatch.recordOutcomes(
            'owner-a',
            [
              failed('batch_01', 1, error, '0.000002'),
              failed('batch_01', 2, { code: 'context_length_exceeded', message: 'too long' }),
            ],
            MS + 100,
          ),
        ).toMatchObject({ recorded: 2 })
        const [one, two] = await allLines('batch_01')
        expect(one).toMatchObject({
          status: 'failed',
          error,
          costUsd: '0.000002',
          responseStatus: 400,
        })
        expect(one!.error).not.toHaveProperty('upstream')
        expect(two).toMatchObject({
          status: 'failed',
          error: { code: 'context_length_exceeded' },
          costUsd: '0',
        })
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          costUsd: '0.000002',
          counts: { running: 0, failed: 2, succeeded: 0 },
        })
        expect((await store.getAccount('acct_1'))!.balanceUsd).toBe('0.999998')
      })

      it('puts a retried line back to pending, not claimed before its time', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 2)
        await claim('batch_01', 'owner-a', 1)
        expect(
          await dispatch.recordOutcomes('owner-a', [retry('batch_01', 1, MS + 5000)], MS + 100),
        ).toMatchObject({ recorded: 1 })
        const [line] = await allLines('batch_01')
        expect(line).toMatchObject({ status: 'pending', attempts: 1, costUsd: null })
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 2,
          running: 0,
        })
        expect((await claim('batch_01', 'owner-a', 10, MS + 4999)).map((l) => l.lineNo)).toEqual([
          2,
        ])
        const again = await claim('batch_01', 'owner-b', 10, MS + 5000)
        expect(again.map((l) => [l.lineNo, l.attempts])).toEqual([[1, 2]])
        expect((await store.getAccount('acct_1'))!.balanceUsd).toBe('100')
      })

      it('gives back the attempt of a line handed back unsent', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 2)
        await claim('batch_01', 'owner-a', 2)
        const unsent = { ...retry('batch_01', 1, MS), unsent: true }
        expect(
          await dispatch.recordOutcomes('owner-a', [unsent, retry('batch_01', 2, MS)], MS + 100),
        ).toEqual({ recorded: 2, charged: ['0', '0'] })
        expect((await allLines('batch_01')).map((l) => [l.status, l.attempts])).toEqual([
          ['pending', 0],
          ['pending', 1],
        ])
        // Claimed again, the unsent line is on its first attempt, the other on its second.
        const again = await claim('batch_01', 'owner-b', 10, MS + 200)
        expect(again.map((l) => [l.lineNo, l.attempts])).toEqual([
          [1, 1],
          [2, 2],
        ])
      })

      it('records the planner’s projected finish of open batches only', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 1)
        await admit('acct_1', 'batch_02', 1)
        await store.cancelBatch('acct_1', 'batch_02', T0)
        await dispatch.recordEtas([
          { batchId: 'batch_01', eta: T0 + 120 },
          { batchId: 'batch_02', eta: T0 + 60 },
          { batchId: 'batch_missing', eta: T0 },
        ])
        expect((await batchOf('acct_1', 'batch_01')).eta).toBe(T0 + 120)
        expect((await batchOf('acct_1', 'batch_02')).eta).toBeNull()
        await dispatch.recordEtas([{ batchId: 'batch_01', eta: null }])
        expect((await batchOf('acct_1', 'batch_01')).eta).toBeNull()
        await dispatch.recordEtas([])
      })

      it('takes times with fractions of a millisecond, never acting sooner', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 1)
        await dispatch.claimLines({
          batchId: 'batch_01',
          owner: 'owner-a',
          limit: 1,
          nowMs: MS + 0.25,
          leaseUntilMs: MS + 1000.5,
        })
        expect(await dispatch.renewLeases('owner-a', MS + 2000.5)).toBe(1)
        expect(await dispatch.reapExpiredLeases(MS + 2000.25)).toBe(0)
        expect(
          await dispatch.recordOutcomes('owner-a', [retry('batch_01', 1, MS + 5000.5)], MS),
        ).toMatchObject({ recorded: 1 })
        expect(await claim('batch_01', 'owner-a', 1, MS + 5000)).toEqual([])
        expect((await claim('batch_01', 'owner-a', 1, MS + 5001)).map((l) => l.lineNo)).toEqual([1])
        await store.cancelBatch('acct_1', 'batch_01', T0 + 10.5)
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0')], MS + 6000)
        expect((await dispatch.advanceBatches(T0 + 11.75)).changed).toEqual(['batch_01'])
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({ status: 'cancelled' })
      })

      it("adds each recorded line's tokens by class to its batch's usage, once (docs/pricing.md)", async () => {
        await account('acct_1', '1')
        await admit('acct_1', 'batch_01', 3, { costCeilingUsd: '0.5' })
        await claim('batch_01', 'owner-a', 3, MS, 60_000)
        const withUsage = (lineNo: number, usage: LineUsage): LineOutcome => ({
          ...(succeeded('batch_01', lineNo, '0.01') as Extract<LineOutcome, { kind: 'succeeded' }>),
          usage,
        })
        const first = withUsage(1, {
          input: 1000,
          cached: 600,
          written: 300,
          output: 50,
          uncachedCostUsd: '0.02',
        })
        const second = withUsage(2, {
          input: 10,
          cached: 0,
          written: 0,
          output: 5,
          uncachedCostUsd: '0.01',
        })
        // The same outcome twice counts once; a failure adds no tokens.
        expect(await dispatch.recordOutcomes('owner-a', [first, first, second], MS + 1)).toEqual({
          recorded: 2,
          charged: ['0.01', null, '0.01'],
        })
        await dispatch.recordOutcomes(
          'owner-a',
          [failed('batch_01', 3, { code: 'invalid_request', message: 'x' })],
          MS + 2,
        )
        expect((await batchOf('acct_1', 'batch_01')).usage).toEqual({
          inputTokens: 1010,
          cachedInputTokens: 600,
          cacheWriteTokens: 300,
          outputTokens: 55,
          uncachedCostUsd: '0.03',
        })
      })

      it('ignores and does not bill outcomes of a lease that was lost', async () => {
        await account('acct_1', '1')
        await admit('acct_1', 'batch_01', 1, { costCeilingUsd: '0.5' })
        await claim('batch_01', 'owner-a', 1, MS, 1000)
        expect(await dispatch.reapExpiredLeases(MS + 2000)).toBe(1)
        expect((await claim('batch_01', 'owner-b', 1, MS + 3000)).map((l) => l.attempts)).toEqual([
          2,
        ])
        // owner-a comes back from a pause: its result is not recorded, nor billed.
        expect(
          await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.3')], MS + 4000),
        ).toEqual({ recorded: 0, charged: [null] })
        expect(
          await dispatch.recordOutcomes(
            'owner-z',
            [failed('batch_01', 1, { code: 'upstream_error', message: 'x' }, '0.1')],
            MS + 4000,
          ),
        ).toMatchObject({ recorded: 0 })
        expect((await allLines('batch_01'))[0]).toMatchObject({ status: 'running', costUsd: null })
        expect((await store.getAccount('acct_1'))!.balanceUsd).toBe('1')
        // The holder's result counts, once, even when sent twice.
        const twice = [succeeded('batch_01', 1, '0.2'), succeeded('batch_01', 1, '0.2')]
        expect(await dispatch.recordOutcomes('owner-b', twice, MS + 5000)).toMatchObject({
          recorded: 1,
        })
        expect(
          await dispatch.recordOutcomes('owner-b', [succeeded('batch_01', 1, '0.2')], MS + 6000),
        ).toMatchObject({ recorded: 0 })
        expect((await batchOf('acct_1', 'batch_01')).costUsd).toBe('0.2')
        expect((await store.getAccount('acct_1'))!.balanceUsd).toBe('0.8')
        expect(await dispatch.recordOutcomes('owner-b', [], MS + 7000)).toMatchObject({
          recorded: 0,
        })
      })

      it('never charges more than the balance, in order, across batches', async () => {
        await account('acct_1', '1')
        await admit('acct_1', 'batch_01', 2, { costCeilingUsd: '0.5' })
        await admit('acct_1', 'batch_02', 2, { costCeilingUsd: '0.5' })
        await claim('batch_01', 'owner-a', 2)
        await claim('batch_02', 'owner-a', 2)
        // Credit taken away after admission leaves less than the holds.
        expect((await store.addCredit('acct_1', '-0.9999995'))!.balanceUsd).toBe('0.0000005')
        const recorded = await dispatch.recordOutcomes(
          'owner-a',
          [
            succeeded('batch_02', 1, '0.0000003'),
            succeeded('batch_01', 1, '0.000001'),
            succeeded('batch_02', 2, '0.000001'),
            failed('batch_01', 2, { code: 'upstream_error', message: 'x' }, '0.000001'),
          ],
          MS + 100,
        )
        // What each was charged, in the order given, is what usage and metrics count.
        expect(recorded).toEqual({
          recorded: 4,
          charged: ['0.0000003', '0.0000002', '0', '0'],
        })
        const costs = async (id: string) => (await allLines(id)).map((l) => l.costUsd)
        expect(await costs('batch_02')).toEqual(['0.0000003', '0'])
        expect(await costs('batch_01')).toEqual(['0.0000002', '0'])
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '0',
          heldUsd: '0.9999995',
        })
        expect((await batchOf('acct_1', 'batch_01')).costUsd).toBe('0.0000002')
        expect((await batchOf('acct_1', 'batch_02')).costUsd).toBe('0.0000003')
        await dispatch.advanceBatches(T0 + 1)
        await dispatch.advanceBatches(T0 + 2)
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '0',
          heldUsd: '0',
          openBatches: 0,
        })
      })

      it('a line over its ceiling is billed in full, but takes no more than its ceiling from the hold', async () => {
        await account('acct_1', '1')
        await admit('acct_1', 'batch_01', 3, { costCeilingUsd: '0.3' })
        await claim('batch_01', 'owner-a', 1)
        // Ceiling 0.1, upstream billed 0.25: the batch keeps 0.2 held for its other two lines and
        // the 0.15 excess comes out of free credit (0.7 of it).
        const over: LineOutcome = {
          ...succeeded('batch_01', 1, '0.25'),
          ceilingUsd: '0.1',
        } as LineOutcome
        expect(await dispatch.recordOutcomes('owner-a', [over], MS + 100)).toMatchObject({
          recorded: 1,
        })
        expect((await allLines('batch_01'))[0]).toMatchObject({
          status: 'succeeded',
          costUsd: '0.25',
        })
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          costUsd: '0.25',
          heldUsd: '0.2',
        })
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '0.75',
          heldUsd: '0.2',
        })
        // Still covered: the next line is dispatched.
        expect((await claim('batch_01', 'owner-a', 1, MS + 200)).map((l) => l.lineNo)).toEqual([2])
      })

      it('keeps the money exact when two owners settle one account, within holds and past a ceiling', async () => {
        await account('acct_1', '10')
        await admit('acct_1', 'batch_01', 5, { costCeilingUsd: '1' })
        await admit('acct_1', 'batch_02', 2, { costCeilingUsd: '0.6' })
        await claim('batch_01', 'owner-a', 3)
        await claim('batch_01', 'owner-b', 2)
        await claim('batch_02', 'owner-b', 2)
        const record = (owner: string, outcomes: LineOutcome[], at: number) =>
          dispatch.recordOutcomes(owner, outcomes, MS + at)
        expect(await record('owner-a', [succeeded('batch_01', 1, '0.1')], 100)).toMatchObject({
          recorded: 1,
        })
        expect(await record('owner-b', [succeeded('batch_01', 4, '0.2')], 110)).toMatchObject({
          recorded: 1,
        })
        expect(
          await record(
            'owner-a',
            [succeeded('batch_01', 2, '0.15'), succeeded('batch_01', 3, '0.05')],
            120,
          ),
        ).toMatchObject({ recorded: 2 })
        // Ceiling 0.3, billed 0.5: 0.3 from batch_02's hold, 0.2 from free credit.
        const over = { ...succeeded('batch_02', 2, '0.5'), ceilingUsd: '0.3' } as LineOutcome
        expect(
          await record(
            'owner-b',
            [succeeded('batch_01', 5, '0.12'), succeeded('batch_02', 1, '0.3'), over],
            130,
          ),
        ).toMatchObject({ recorded: 3 })
        // Recorded twice: billed once.
        expect(await record('owner-a', [succeeded('batch_01', 1, '0.1')], 140)).toMatchObject({
          recorded: 0,
        })
        const costs = [...(await allLines('batch_01')), ...(await allLines('batch_02'))].map(
          (line) => line.costUsd,
        )
        expect(costs).toEqual(['0.1', '0.15', '0.05', '0.2', '0.12', '0.3', '0.5'])
        const total = costs.reduce((sum, cost) => sum.plus(cost!), new Money(0))
        // Held: 1.6 admitted, 0.62 and 0.6 of it released. Charged 1.42, the lines' sum.
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '8.58',
          heldUsd: '0.38',
        })
        expect(moneyText(new Money('10').minus('8.58'))).toBe(moneyText(total))
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          costUsd: '0.62',
          heldUsd: '0.38',
        })
        expect(await batchOf('acct_1', 'batch_02')).toMatchObject({ costUsd: '0.8', heldUsd: '0' })
        // What is free: a deposit and a hold computed against it see the true balance.
        expect((await store.addCredit('acct_1', '-8.5'))!).toMatchObject({
          balanceUsd: '0.08',
          heldUsd: '0.38',
        })
        expect((await store.addCredit('acct_1', '-1'))!).toMatchObject({
          balanceUsd: '0',
          heldUsd: '0.38',
        })
        expect((await store.addCredit('acct_1', '8.58'))!.balanceUsd).toBe('8.58')
        await dispatch.advanceBatches(T0 + 1)
        await dispatch.advanceBatches(T0 + 2)
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '8.58',
          heldUsd: '0',
          openBatches: 0,
        })
      })

      it('never takes the balance below zero when owners settle past a ceiling and past the balance', async () => {
        await account('acct_1', '1.5')
        await admit('acct_1', 'batch_01', 3, { costCeilingUsd: '1.5' })
        await claim('batch_01', 'owner-a', 1)
        await claim('batch_01', 'owner-b', 1)
        await claim('batch_01', 'owner-a', 1)
        expect(
          await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.4')], MS + 1),
        ).toMatchObject({ recorded: 1 })
        // Ceiling 0.5, billed 1.5: only the 1.1 left is charged, 0.5 of it from the hold.
        const over = { ...succeeded('batch_01', 2, '1.5'), ceilingUsd: '0.5' } as LineOutcome
        expect(await dispatch.recordOutcomes('owner-b', [over], MS + 2)).toMatchObject({
          recorded: 1,
        })
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '0', heldUsd: '0.6' })
        // Within its hold, but the balance is gone: nothing is charged.
        expect(
          await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 3, '0.2')], MS + 3),
        ).toMatchObject({ recorded: 1 })
        expect((await allLines('batch_01')).map((line) => line.costUsd)).toEqual([
          '0.4',
          '1.1',
          '0',
        ])
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '0', heldUsd: '0.6' })
        expect((await batchOf('acct_1', 'batch_01')).costUsd).toBe('1.5')
        await dispatch.advanceBatches(T0 + 1)
        await dispatch.advanceBatches(T0 + 2)
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '0', heldUsd: '0' })
      })

      it('an account whose balance no longer covers its holds is not dispatched until a deposit covers them', async () => {
        await account('acct_1', '1')
        await admit('acct_1', 'batch_01', 3, { costCeilingUsd: '0.3' })
        await admit('acct_1', 'batch_02', 2, { costCeilingUsd: '0.2' })
        await claim('batch_01', 'owner-a', 1)
        // Ceiling 0.1, billed 0.9: 0.1 from batch_01's hold, 0.5 free, 0.3 from what batch_01's
        // other lines and batch_02 hold. Balance 0.1 against 0.4 held.
        const over: LineOutcome = {
          ...succeeded('batch_01', 1, '0.9'),
          ceilingUsd: '0.1',
        } as LineOutcome
        expect(await dispatch.recordOutcomes('owner-a', [over], MS + 100)).toMatchObject({
          recorded: 1,
        })
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '0.1',
          heldUsd: '0.4',
        })
        expect((await allLines('batch_01'))[0]).toMatchObject({ costUsd: '0.9' })
        expect(await claim('batch_01', 'owner-a', 5, MS + 200)).toEqual([])
        expect(await claim('batch_02', 'owner-a', 5, MS + 200)).toEqual([])
        expect((await dispatch.runnableBatches(MS + 200, 10)).map((b) => b.id)).toEqual([])
        // Its running batches say why, with the shortfall; their pending lines are still queued.
        expect((await dispatch.advanceBatches(T0 + 1)).waited?.sort()).toEqual([
          'batch_01',
          'batch_02',
        ])
        for (const id of ['batch_01', 'batch_02']) {
          const batch = await batchOf('acct_1', id)
          expect(batch.status).toBe('in_progress')
          expect(batch.waiting?.code).toBe('insufficient_credit')
          expect(batch.waiting?.message).toContain('deposit of at least $0.300000')
        }
        expect(await dispatch.queuedLines(MS + 200)).toBe(4)
        // Said once: a pass that finds nothing new writes nothing.
        expect((await dispatch.advanceBatches(T0 + 1)).waited).toBeUndefined()
        // Its batches do not take the places of another account's in the list.
        await account('acct_2', '1')
        await admit('acct_2', 'batch_03', 1, { costCeilingUsd: '0.1' })
        expect((await dispatch.runnableBatches(MS + 200, 1)).map((b) => b.id)).toEqual(['batch_03'])
        // A deposit that covers the holds again resumes dispatch, and the reason clears.
        await store.addCredit('acct_1', '0.3')
        await dispatch.advanceBatches(T0 + 1)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toBeNull()
        expect((await batchOf('acct_1', 'batch_02')).waiting).toBeNull()
        expect((await dispatch.runnableBatches(MS + 300, 10)).map((b) => b.id).sort()).toEqual([
          'batch_01',
          'batch_02',
          'batch_03',
        ])
        expect((await claim('batch_02', 'owner-a', 5, MS + 300)).map((l) => l.lineNo)).toEqual([
          1, 2,
        ])
      })

      it('releases an owner’s leases untouched on shutdown', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 3)
        await admit('acct_1', 'batch_02', 2)
        await claim('batch_01', 'owner-a', 2)
        await claim('batch_02', 'owner-a', 1)
        await claim('batch_02', 'owner-b', 1)
        expect(await dispatch.releaseLeases('owner-a')).toBe(3)
        expect(await dispatch.releaseLeases('owner-a')).toBe(0)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 3,
          running: 0,
        })
        expect((await batchOf('acct_1', 'batch_02')).counts).toMatchObject({
          pending: 1,
          running: 1,
        })
        expect((await allLines('batch_02')).map((l) => [l.status, l.costUsd])).toEqual([
          ['pending', null],
          ['running', null],
        ])
        expect(
          await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.1')], MS + 1),
        ).toMatchObject({ recorded: 0 })
        expect((await claim('batch_01', 'owner-c', 10)).map((l) => l.lineNo)).toEqual([1, 2, 3])
      })

      it('hands back the attempt of the lines released unsent, and only theirs', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 4)
        await claim('batch_01', 'owner-a', 3)
        // Line 4: another owner's, given back by it with its attempt used.
        await claim('batch_01', 'owner-b', 1)
        await dispatch.releaseLeases('owner-b')
        // Line 1 was sent; lines 2 and 3 waited for a slot. Line 4 is no line of owner-a's now.
        const unsent = [
          { batchId: 'batch_01', lineNo: 2 },
          { batchId: 'batch_01', lineNo: 3 },
          { batchId: 'batch_01', lineNo: 4 },
        ]
        expect(await dispatch.releaseLeases('owner-a', unsent)).toBe(3)
        expect((await allLines('batch_01')).map((l) => [l.status, l.attempts])).toEqual([
          ['pending', 1],
          ['pending', 0],
          ['pending', 0],
          ['pending', 1],
        ])
        // Released lines claimed again count their attempt from there.
        expect((await claim('batch_01', 'owner-c', 4)).map((l) => l.attempts)).toEqual([2, 1, 1, 2])
      })

      it('reaps only leases that ran out', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 3)
        await claim('batch_01', 'owner-a', 2, MS, 1000)
        await claim('batch_01', 'owner-b', 1, MS, 5000)
        expect(await dispatch.reapExpiredLeases(MS + 1000)).toBe(0)
        expect(await dispatch.reapExpiredLeases(MS + 1001)).toBe(2)
        expect((await allLines('batch_01')).map((l) => l.status)).toEqual([
          'pending',
          'pending',
          'running',
        ])
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 2,
          running: 1,
        })
        expect(await dispatch.reapExpiredLeases(MS + 1002)).toBe(0)
      })
    })

    describe('spend caps', () => {
      /** A capped batch whose lines have these ceilings. */
      const capped = (id: string, maxCostUsd: string, ceilings: string[], extra = {}) =>
        admit('acct_1', id, ceilings.length, {
          maxCostUsd,
          costCeilingUsd: moneyText(ceilings.reduce((sum, c) => sum.plus(c), new Money(0))),
          lines: lineList(ceilings.length).map((line, i) => ({ ...line, ceilingUsd: ceilings[i] })),
          ...extra,
        })

      it('holds min(ceiling, cap) and admits under a cap that fits the credit', async () => {
        await account('acct_1', '1')
        // A ceiling of 3 does not fit a credit of 1; under a cap of 0.5 the batch is admitted.
        const batch = await capped('batch_01', '0.5', ['1', '1', '1'])
        expect(batch).toMatchObject({ costCeilingUsd: '3', heldUsd: '0.5', maxCostUsd: '0.5' })
        expect(await store.getAccount('acct_1')).toMatchObject({ heldUsd: '0.5' })
        const uncapped = await store.admitBatch(
          newBatch('acct_1', 'batch_02', 1, { costCeilingUsd: '3' }),
        )
        expect(uncapped.kind).toBe('insufficient_quota')
        // A cap above the ceiling holds the ceiling.
        expect(await capped('batch_03', '9', ['0.1', '0.2'])).toMatchObject({ heldUsd: '0.3' })
        const tooDear = await store.admitBatch(
          newBatch('acct_1', 'batch_04', 1, {
            maxCostUsd: '0.6',
            costCeilingUsd: '1',
            lines: [{ ...lineList(1)[0]!, ceilingUsd: '1' }],
          }),
        )
        expect(tooDear).toEqual({ kind: 'insufficient_quota', availableUsd: '0.2' })
      })

      it('claims only lines that fit the cap with those in flight, and carries their ceilings', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['0.4', '0.4', '0.1', '0.3', '0.05'])
        // 0.4 + 0.4 fit; 0.1 too (0.9); 0.3 would pass 1: the prefix stops there.
        const first = await claim('batch_01', 'owner-a', 10)
        expect(first.map((l) => [l.lineNo, l.ceilingUsd])).toEqual([
          [1, '0.4'],
          [2, '0.4'],
          [3, '0.1'],
        ])
        expect((await batchOf('acct_1', 'batch_01')).waiting).toMatchObject({
          code: 'max_cost_reached',
        })
        // Room 0.1 left: only line 5 (0.05) fits on its own now.
        expect((await claim('batch_01', 'owner-b', 10)).map((l) => l.lineNo)).toEqual([5])
        // Line 1 settles cheaper than its ceiling: 0.35 of room comes back, line 4 fits.
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.1')], MS + 1)
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([4])
        // Lines claimed with none held back: the cap's waiting is cleared.
        expect((await batchOf('acct_1', 'batch_01')).waiting).toBeNull()
      })

      it('leaves a batch the cap holds back out of runnableBatches until room comes back', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['0.6', '0.6', '0.6'])
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([1])
        expect((await batchOf('acct_1', 'batch_01')).waiting?.code).toBe('max_cost_reached')
        expect(await dispatch.runnableBatches(MS, 10)).toEqual([])
        // Line 1 cost 0.1: room is back, the wait ends and line 2 is claimed.
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.1')], MS + 1)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toBeNull()
        expect((await dispatch.runnableBatches(MS, 10)).map((b) => b.id)).toEqual(['batch_01'])
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([2])
        // Held back again (0.3 left); a retry gives room back too.
        expect((await batchOf('acct_1', 'batch_01')).waiting?.code).toBe('max_cost_reached')
        await dispatch.recordOutcomes('owner-a', [retry('batch_01', 2, MS)], MS + 2)
        expect((await dispatch.runnableBatches(MS, 10)).map((b) => b.id)).toEqual(['batch_01'])
      })

      it('concurrent claims of one capped batch never reserve past its cap', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', Array(40).fill('0.15'))
        // 6 × 0.15 = 0.9 fits a cap of 1, a seventh would not: 40 claimers at once take 6.
        const claims = await Promise.all(
          Array.from({ length: 40 }, (_, i) => claim('batch_01', `owner-${i}`, 1)),
        )
        expect(claims.flat()).toHaveLength(6)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          running: 6,
          pending: 34,
        })
      })

      it('gives the reservation back when a line is retried, reaped or released', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['0.6', '0.6'])
        expect((await claim('batch_01', 'owner-a', 2, MS, 1000)).map((l) => l.lineNo)).toEqual([1])
        expect(await claim('batch_01', 'owner-b', 2)).toEqual([])
        await dispatch.recordOutcomes('owner-a', [retry('batch_01', 1, MS)], MS + 1)
        expect((await claim('batch_01', 'owner-b', 2, MS, 1000)).map((l) => l.lineNo)).toEqual([1])
        expect(await dispatch.reapExpiredLeases(MS + 5000)).toBe(1)
        expect((await claim('batch_01', 'owner-a', 2, MS + 5000)).map((l) => l.lineNo)).toEqual([1])
        expect(await dispatch.releaseLeases('owner-a')).toBe(1)
        expect((await claim('batch_01', 'owner-b', 2, MS + 5000)).map((l) => l.lineNo)).toEqual([1])
      })

      it('once nothing is in flight, cancels the lines that do not fit with max_cost_reached, then completes', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['0.5', '0.5', '0.5', '0.2'])
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([1, 2])
        // In flight: nothing is cancelled yet.
        await dispatch.advanceBatches(T0 + 1)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 2,
          cancelled: 0,
        })
        await dispatch.recordOutcomes(
          'owner-a',
          [succeeded('batch_01', 1, '0.5'), succeeded('batch_01', 2, '0.35')],
          MS + 1,
        )
        // 0.15 left: line 4 (0.2) and line 3 (0.5) can never fit.
        expect((await dispatch.advanceBatches(T0 + 2)).ended).toEqual({ cancelled: 2, expired: 0 })
        await dispatch.advanceBatches(T0 + 3)
        const batch = await batchOf('acct_1', 'batch_01')
        expect(batch).toMatchObject({
          status: 'completed',
          costUsd: '0.85',
          heldUsd: '0',
          counts: { succeeded: 2, cancelled: 2, pending: 0, running: 0 },
        })
        expect(batch.waiting?.code).toBe('max_cost_reached')
        expect(batch.waiting?.message).toContain('2 lines did not run')
        const lines = await allLines('batch_01')
        expect(lines.map((l) => [l.status, l.error?.code ?? null])).toEqual([
          ['succeeded', null],
          ['succeeded', null],
          ['cancelled', 'max_cost_reached'],
          ['cancelled', 'max_cost_reached'],
        ])
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '9.15', heldUsd: '0' })
      })

      it('ends completed, not failed, when its cap lets no line run', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '0.1', ['0.5', '0.5'])
        expect(await claim('batch_01', 'owner-a', 10)).toEqual([])
        await dispatch.advanceBatches(T0 + 1)
        await dispatch.advanceBatches(T0 + 2)
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          status: 'completed',
          costUsd: '0',
          counts: { succeeded: 0, cancelled: 2 },
          waiting: { code: 'max_cost_reached' },
        })
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '10', heldUsd: '0' })
      })

      it('keeps a line that still fits while it waits for a retry, and ends it once it cannot', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['0.3', '0.9'])
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([1])
        await dispatch.recordOutcomes('owner-a', [retry('batch_01', 1, MS + 60_000)], MS + 1)
        // Nothing in flight, and both lines fit the cap on their own: none is cancelled.
        await dispatch.advanceBatches(T0 + 1)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 2,
          cancelled: 0,
        })
        // Line 1 is not due yet; line 2 is, and fits.
        expect((await claim('batch_01', 'owner-a', 10, MS + 2)).map((l) => l.lineNo)).toEqual([2])
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 2, '0.9')], MS + 3)
        // 0.1 left: line 1 can never fit, though its retry is not due yet.
        await dispatch.advanceBatches(T0 + 2)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 0,
          cancelled: 1,
          succeeded: 1,
        })
      })

      it('a pass before the first claim cancels nothing while a line still fits: the fitting lines run, the one over the cap ends last', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['0.3', '2', '0.3'])
        // Nothing in flight yet, and line 2 alone is over the cap; lines 1 and 3 fit.
        await dispatch.advanceBatches(T0 + 1)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 3,
          cancelled: 0,
        })
        expect((await dispatch.runnableBatches(MS, 10)).map((b) => b.id)).toEqual(['batch_01'])
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([1, 3])
        await dispatch.recordOutcomes(
          'owner-a',
          [succeeded('batch_01', 1, '0.1'), succeeded('batch_01', 3, '0.1')],
          MS + 1,
        )
        expect((await dispatch.advanceBatches(T0 + 2)).ended).toEqual({ cancelled: 1, expired: 0 })
        await dispatch.advanceBatches(T0 + 3)
        const batch = await batchOf('acct_1', 'batch_01')
        expect(batch).toMatchObject({
          status: 'completed',
          counts: { succeeded: 2, cancelled: 1, pending: 0 },
          waiting: { code: 'max_cost_reached' },
        })
        expect(batch.waiting?.message).toContain('1 line did not run')
        expect(batch.waiting?.message).toContain('To run it, submit')
      })

      it('a free line (a ceiling of 0) still runs once the cap has no room left', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['1', '0'])
        expect((await claim('batch_01', 'owner-a', 1)).map((l) => l.lineNo)).toEqual([1])
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '1')], MS + 1)
        // Room 0: the free line fits it, and is neither cancelled nor left pending.
        await dispatch.advanceBatches(T0 + 1)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({ cancelled: 0 })
        expect((await claim('batch_01', 'owner-a', 10, MS + 2)).map((l) => l.lineNo)).toEqual([2])
      })

      it('while its one fitting line waits out a retry, the cap does not hold the batch back: no max_cost_reached, nothing cancelled, the line claimed once due', async () => {
        await account('acct_1', '10')
        await capped('batch_01', '1', ['0.3', '2'])
        expect((await claim('batch_01', 'owner-a', 10)).map((l) => l.lineNo)).toEqual([1])
        await dispatch.recordOutcomes('owner-a', [retry('batch_01', 1, MS + 60_000)], MS + 1)
        // Line 1 is not due and line 2 never fits: the claim takes nothing, and it is the retry's
        // backoff, not the cap, that holds the batch.
        expect(await claim('batch_01', 'owner-a', 10, MS + 2)).toEqual([])
        expect((await batchOf('acct_1', 'batch_01')).waiting?.code).not.toBe('max_cost_reached')
        // Line 1 still fits: the pass ends nothing.
        await dispatch.advanceBatches(T0 + 1)
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 2,
          cancelled: 0,
        })
        expect((await dispatch.runnableBatches(MS + 60_001, 10)).map((b) => b.id)).toEqual([
          'batch_01',
        ])
        expect((await claim('batch_01', 'owner-a', 10, MS + 60_001)).map((l) => l.lineNo)).toEqual([
          1,
        ])
      })
    })

    describe('waiting', () => {
      const paused = {
        code: 'provider_rate_limited',
        message:
          'openai answered 429; dispatch resumes at 12:04:10 UTC. Nothing to do: do not resubmit.',
        until: T0 + 10,
      } as const

      it('stores why a batch waits with the batch, and clears it', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 2)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toBeNull()
        expect(await dispatch.setWaiting('batch_01', paused)).toBe(true)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toEqual(paused)
        // The same again changes nothing; a listing shows it too.
        expect(await dispatch.setWaiting('batch_01', paused)).toBe(false)
        const page = await store.listBatches('acct_1', { limit: 10, after: null })
        expect(page.batches[0]!.waiting).toEqual(paused)
        // `until` is left out when it is not known.
        const busy = { code: 'capacity_busy', message: 'busy' } as const
        expect(await dispatch.setWaiting('batch_01', busy)).toBe(true)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toEqual(busy)
        expect(await dispatch.setWaiting('batch_01', null)).toBe(true)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toBeNull()
      })

      it("clears or replaces only the codes it is told to, leaving another part's", async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 2)
        const credit = { code: 'insufficient_credit', message: 'add credit' } as const
        await dispatch.setWaiting('batch_01', credit)
        expect(await dispatch.setWaiting('batch_01', null, ['provider_rate_limited'])).toBe(false)
        expect(await dispatch.setWaiting('batch_01', paused, ['provider_rate_limited'])).toBe(false)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toEqual(credit)
        expect(await dispatch.setWaiting('batch_01', null, ['insufficient_credit'])).toBe(true)
        // Nothing set: any part may set its code.
        expect(await dispatch.setWaiting('batch_01', paused, ['provider_rate_limited'])).toBe(true)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toEqual(paused)
      })

      it('is not written on an ended batch, and an ending batch drops it', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 1)
        await admit('acct_1', 'batch_02', 1)
        await store.cancelBatch('acct_1', 'batch_01', T0)
        expect(await dispatch.setWaiting('batch_01', paused)).toBe(false)
        expect((await batchOf('acct_1', 'batch_01')).waiting).toBeNull()
        await dispatch.setWaiting('batch_02', paused)
        await claim('batch_02', 'owner-a', 1)
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_02', 1, '0.01')], MS)
        await dispatch.advanceBatches(T0 + 1)
        await dispatch.advanceBatches(T0 + 2)
        expect(await batchOf('acct_1', 'batch_02')).toMatchObject({
          status: 'completed',
          waiting: null,
        })
      })
    })

    describe('advanceBatches', () => {
      it('finalizes a done batch for one tick, then completes it, releasing the hold', async () => {
        await account('acct_1', '5')
        await admit('acct_1', 'batch_01', 3, { costCeilingUsd: '1' })
        await claim('batch_01', 'owner-a', 3)
        expect((await dispatch.advanceBatches(T0 + 1)).changed).toEqual([])
        await dispatch.recordOutcomes(
          'owner-a',
          [
            succeeded('batch_01', 1, '0.000000123'),
            failed('batch_01', 2, { code: 'invalid_request', message: 'bad' }, '0.00001'),
            succeeded('batch_01', 3, '0.000000456'),
          ],
          MS + 100,
        )
        expect((await dispatch.advanceBatches(T0 + 2)).changed).toEqual(['batch_01'])
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          status: 'finalizing',
          finalizingAt: T0 + 2,
          finishedAt: null,
        })
        expect((await store.getAccount('acct_1'))!.openBatches).toBe(1)
        expect((await dispatch.advanceBatches(T0 + 3)).changed).toEqual(['batch_01'])
        const batch = await batchOf('acct_1', 'batch_01')
        expect(batch).toMatchObject({
          status: 'completed',
          finalizingAt: T0 + 2,
          finishedAt: T0 + 3,
          heldUsd: '0',
          costUsd: '0.000010579',
          counts: { total: 3, pending: 0, running: 0, succeeded: 2, failed: 1 },
        })
        const lineCosts = (await allLines('batch_01')).reduce(
          (sum, line) => sum.plus(line.costUsd ?? 0),
          new Money(0),
        )
        expect(moneyText(lineCosts)).toBe(batch.costUsd)
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: moneyText(new Money(5).minus(lineCosts)),
          heldUsd: '0',
          openBatches: 0,
        })
        expect((await dispatch.advanceBatches(T0 + 4)).changed).toEqual([])
      })

      it('fails a batch in which nothing succeeded', async () => {
        await account('acct_1', '5')
        await admit('acct_1', 'batch_01', 2, { costCeilingUsd: '1' })
        await claim('batch_01', 'owner-a', 2)
        const error: LineError = { code: 'invalid_request', message: 'bad' }
        await dispatch.recordOutcomes(
          'owner-a',
          [failed('batch_01', 1, error), failed('batch_01', 2, error)],
          MS,
        )
        await dispatch.advanceBatches(T0 + 1)
        expect((await dispatch.advanceBatches(T0 + 2)).changed).toEqual(['batch_01'])
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          status: 'failed',
          heldUsd: '0',
        })
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '5', heldUsd: '0' })
      })

      it('expires the lines not yet run at the deadline, then the batch', async () => {
        await account('acct_1', '5')
        const deadline = T0 + 3600
        await admit('acct_1', 'batch_01', 4, { costCeilingUsd: '1', deadlineAt: deadline })
        await claim('batch_01', 'owner-a', 2)
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.01')], MS + 100)
        expect((await dispatch.advanceBatches(deadline - 1)).changed).toEqual([])
        expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({
          pending: 2,
          expired: 0,
        })

        // At the deadline: pending lines expire, the running one may still finish; the pass says
        // how many it ended (/metrics counts them).
        expect(await dispatch.advanceBatches(deadline)).toEqual({
          changed: [],
          ended: { cancelled: 0, expired: 2 },
        })
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          status: 'in_progress',
          counts: { pending: 0, running: 1, succeeded: 1, expired: 2 },
        })
        const lines = await allLines('batch_01')
        expect(lines.map((l) => [l.status, l.error?.code ?? null])).toEqual([
          ['succeeded', null],
          ['running', null],
          ['expired', 'batch_expired'],
          ['expired', 'batch_expired'],
        ])
        await dispatch.recordOutcomes(
          'owner-a',
          [succeeded('batch_01', 2, '0.02')],
          (deadline + 5) * 1000,
        )
        expect(await dispatch.advanceBatches(deadline + 10)).toEqual({
          changed: ['batch_01'],
          ended: { cancelled: 0, expired: 0 },
        })
        expect((await batchOf('acct_1', 'batch_01')).status).toBe('finalizing')
        expect((await dispatch.advanceBatches(deadline + 11)).changed).toEqual(['batch_01'])
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          status: 'expired',
          finishedAt: deadline + 11,
          costUsd: '0.03',
          heldUsd: '0',
          counts: { succeeded: 2, expired: 2 },
        })
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '4.97',
          heldUsd: '0',
          openBatches: 0,
        })
      })

      it('expires a batch with nothing running on the tick after its deadline', async () => {
        await account('acct_1', '5')
        await admit('acct_1', 'batch_01', 2, { deadlineAt: T0 + 60 })
        await admit('acct_1', 'batch_02', 2, { deadlineAt: T0 + 600 })
        expect((await dispatch.advanceBatches(T0 + 60)).changed).toEqual(['batch_01'])
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          status: 'finalizing',
          counts: { pending: 0, expired: 2 },
        })
        expect((await dispatch.advanceBatches(T0 + 61)).changed).toEqual(['batch_01'])
        expect((await batchOf('acct_1', 'batch_01')).status).toBe('expired')
        expect((await batchOf('acct_1', 'batch_02')).status).toBe('in_progress')
        expect(await store.getAccount('acct_1')).toMatchObject({ heldUsd: '1', openBatches: 1 })
      })
    })
  })
})

// The progress shards the dispatcher writes, read back as the batch's counters and money.
onEveryStore(({ name, makeStore }) => runProgressContract(name, makeStore))
