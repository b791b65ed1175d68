/**
 * A batch's progress off its row (docs/scale.md): whatever mix of claims by several instances,
 * settlements, retries, a reaped lease and a cancel, the batch as read (its row plus its progress
 * shards) says exactly what its lines say — counts by status, cost, usage — while it runs and
 * once it has ended and its shards were folded into its row. Both stores run it.
 */
import { describe, expect, test } from 'bun:test'
import type { BatchRecord, LineRecord } from '../../src/domain.ts'
import { Money, moneyText } from '../../src/money/decimal.ts'
import type { DispatchStore, LineOutcome, OpenedStore, Store } from '../../src/store/store.ts'
import { newBatch } from './batch-fixtures.ts'
import { freshStoreEachTest } from './every-store.ts'

const T0 = 1_764_460_000
const MS = T0 * 1000

/** What the lines of a batch say about it, in the batch object's terms. */
function fromLines(lines: readonly LineRecord[]) {
  const counts = { pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0, expired: 0 }
  let cost = new Money(0)
  for (const line of lines) {
    counts[line.status]++
    if (line.costUsd !== null) cost = cost.plus(line.costUsd)
  }
  return { counts: { total: lines.length, ...counts }, costUsd: moneyText(cost) }
}

const success = (batchId: string, lineNo: number, owner: number): LineOutcome => {
  const costUsd = moneyText(new Money('0.000001').times(lineNo))
  const usage = { input: 10 + lineNo, cached: 2, written: 1, output: 3, uncachedCostUsd: costUsd }
  return {
    batchId,
    lineNo,
    kind: 'succeeded',
    responseStatus: 200,
    response: '{"ok":true}',
    costUsd,
    provider: `p${owner}`,
    latencyMs: 5,
    usage,
  }
}

/** Every 7th line is retried, every 5th fails, the others succeed at a cost of their own. */
const outcome = (batchId: string, lineNo: number, owner: number): LineOutcome => {
  if (lineNo % 7 === 0) return { batchId, lineNo, kind: 'retry', notBefore: MS }
  if (lineNo % 5 === 0)
    return {
      batchId,
      lineNo,
      kind: 'failed',
      error: { code: 'invalid_request', message: 'bad' },
      responseStatus: 400,
      costUsd: '0',
      provider: `p${owner}`,
      latencyMs: 5,
    }
  return success(batchId, lineNo, owner)
}

export function runProgressContract(name: string, makeStore: () => Promise<OpenedStore>) {
  let store: Store
  let dispatch: DispatchStore

  describe.serial(`batch progress: ${name}`, () => {
    freshStoreEachTest(makeStore, (opened) => {
      store = opened.store
      dispatch = opened.dispatch
    })

    const expectAgrees = async (batch: BatchRecord) => {
      const lines = await store.readLines(batch.id, {
        afterLineNo: 0,
        limit: 10_000,
        statuses: null,
      })
      expect({ counts: batch.counts, costUsd: batch.costUsd }).toEqual(fromLines(lines))
      const account = (await store.getAccount('acct_1'))!
      // The account was charged what the lines cost, no more and no less.
      expect(new Money('10').minus(account.balanceUsd).toFixed()).toBe(
        new Money(batch.costUsd).toFixed(),
      )
      return lines
    }

    test('the batch as read says what its lines say, while it runs and once it has ended', async () => {
      await store.createAccount({
        id: 'acct_1',
        name: 'a',
        creditUsd: '10',
        maxOpenBatches: 10,
        rateLimitPerMinute: 600,
        createdAt: T0,
      })
      const admitted = await store.admitBatch(
        newBatch('acct_1', 'batch_01', 120, { costCeilingUsd: '1' }),
      )
      expect(admitted.kind).toBe('created')
      let version = admitted.kind === 'created' ? admitted.batch.version : 0
      const read = async () => {
        const batch = (await store.getBatch('acct_1', 'batch_01'))!
        // The progress version only grows, and grows with every change.
        expect(batch.version).toBeGreaterThanOrEqual(version)
        version = batch.version
        return batch
      }
      // Three instances claim side by side, then settle what they took, outcomes of all kinds.
      const owners = ['a', 'b', 'c']
      const claimed = await Promise.all(
        owners.map((owner) =>
          dispatch.claimLines({
            batchId: 'batch_01',
            owner,
            limit: 30,
            nowMs: MS,
            leaseUntilMs: MS + 60_000,
          }),
        ),
      )
      expect(claimed.flat()).toHaveLength(90)
      await expectAgrees(await read())
      await Promise.all(
        claimed.map((lines, i) =>
          dispatch.recordOutcomes(
            owners[i]!,
            lines.map((line) => outcome('batch_01', line.lineNo, i)),
            MS + 1_000,
          ),
        ),
      )
      const settled = await read()
      await expectAgrees(settled)
      const summed = await store.getBatch('acct_1', 'batch_01')
      expect(summed!.usage.outputTokens).toBe(3 * settled.counts.succeeded)
      // One instance dies with lines leased: they come back to pending when its lease runs out.
      await dispatch.claimLines({
        batchId: 'batch_01',
        owner: 'd',
        limit: 10,
        nowMs: MS + 2_000,
        leaseUntilMs: MS + 3_000,
      })
      expect(await dispatch.reapExpiredLeases(MS + 4_000)).toBe(10)
      await expectAgrees(await read())
      // A listing says the same as a read.
      const listed = await store.listBatches('acct_1', { limit: 10, after: null })
      expect(listed.batches[0]!.counts).toEqual((await read()).counts)
      // Cancelled with lines running: those finish and are billed, the rest end cancelled.
      const running = await dispatch.claimLines({
        batchId: 'batch_01',
        owner: 'a',
        limit: 5,
        nowMs: MS + 5_000,
        leaseUntilMs: MS + 65_000,
      })
      const cancelled = await store.cancelBatch('acct_1', 'batch_01', T0 + 5)
      expect(cancelled.kind).toBe('cancelled')
      await expectAgrees(await read())
      await dispatch.recordOutcomes(
        'a',
        running.map((line) => success('batch_01', line.lineNo, 0)),
        MS + 6_000,
      )
      await dispatch.advanceBatches(T0 + 7)
      const ended = await read()
      expect(ended.status).toBe('cancelled')
      expect(ended.heldUsd).toBe('0')
      await expectAgrees(ended)
      expect((await store.getAccount('acct_1'))!.heldUsd).toBe('0')
      // Folded into the row: the same figures, the version past every one before.
      const again = await read()
      expect(again).toEqual(ended)
    })
  })
}
