/**
 * The batch store's contract (src/store/batches/), on every store (every-store.ts): admission
 * with its idempotency, limits, credit hold and the wait for credit; reading batches and their
 * lines; cancelling; a retry's parent; a facade batch refused at validation; the daily spend
 * limit; provider shares. Each test gets a store of its own. Lines are claimed and settled through
 * the dispatch role where a batch must have moved on (its own contract: dispatch.test.ts).
 * Longer than most files: it is the batch calls' specification, method by method.
 */
import { describe, expect } from 'bun:test'
import type { DispatchStore, LineOutcome, NewBatch, NewLine, Store } from '../../src/store/store.ts'
import {
  failed,
  inputOf,
  lineList,
  newBatch,
  RESPONSE,
  retry,
  storeHelpers,
  succeeded,
} from './batch-fixtures.ts'
import { DAY, MS, freshStoreEachTest, onEveryStore, T0 } from './every-store.ts'

/**
 * A call's error message, or null if it succeeded. Not `expect(…).rejects`: Bun waits for that
 * promise in a loop of its own that does not hear a thread's reply (the SQLite file store admits
 * on a thread), so the test would hang.
 */
const failureOf = (call: Promise<unknown>) =>
  call.then(
    () => null,
    (error: Error) => error.message,
  )

onEveryStore(({ name, makeStore, it }) => {
  let store: Store
  /** The dispatcher's part, as the gateway hands it to the dispatcher. */
  let dispatch: DispatchStore
  const { account, admit, claim, take, batchOf, allLines } = storeHelpers(() => ({
    store,
    dispatch,
  }))

  describe.serial(`batch store contract: ${name}`, () => {
    freshStoreEachTest(makeStore, (opened) => {
      store = opened.store
      dispatch = opened.dispatch
    })

    it('pings and says which kind it is', async () => {
      await store.ping()
      expect(['sqlite', 'postgres']).toContain(store.kind)
    })

    describe('admitBatch', () => {
      it('stores the batch and its lines and holds the ceiling', async () => {
        await account('acct_1', '10')
        const result = await store.admitBatch(
          newBatch('acct_1', 'batch_01', 3, {
            name: 'nightly',
            costCeilingUsd: '0.000513',
            metadata: { team: 'support' },
            idempotencyKey: 'idem-1',
            requestHash: 'openai:abc',
            inputFileId: 'file_1',
            source: 'openai',
          }),
        )
        expect(result.kind).toBe('created')
        const batch = (result as { batch: any }).batch
        expect(batch).toEqual({
          id: 'batch_01',
          accountId: 'acct_1',
          name: 'nightly',
          endpoint: '/v1/chat/completions',
          status: 'in_progress',
          completionWindowHours: 24,
          createdAt: T0,
          deadlineAt: T0 + DAY,
          startedAt: null,
          finalizingAt: null,
          finishedAt: null,
          cancelRequestedAt: null,
          counts: {
            total: 3,
            pending: 3,
            running: 0,
            succeeded: 0,
            failed: 0,
            cancelled: 0,
            expired: 0,
          },
          costCeilingUsd: '0.000513',
          costUsd: '0',
          heldUsd: '0.000513',
          source: 'openai',
          metadata: { team: 'support' },
          inputFileId: 'file_1',
          idempotencyKey: 'idem-1',
          requestHash: 'openai:abc',
          errors: null,
          purgedAt: null,
          parentBatchId: null,
          retriedBy: [],
          version: 0,
          maxCostUsd: null,
          waiting: null,
          eta: null,
          usage: {
            inputTokens: 0,
            cachedInputTokens: 0,
            cacheWriteTokens: 0,
            outputTokens: 0,
            uncachedCostUsd: '0',
          },
        })
        expect(await store.getBatch('acct_1', 'batch_01')).toEqual(batch)
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '10',
          heldUsd: '0.000513',
          openBatches: 1,
        })
        const lines = await allLines('batch_01')
        expect(
          lines.map((line) => [line.lineNo, line.customId, line.status, line.attempts]),
        ).toEqual([
          [1, 'c-1', 'pending', 0],
          [2, 'c-2', 'pending', 0],
          [3, 'c-3', 'pending', 0],
        ])
        expect(lines[0]).toMatchObject({
          input: inputOf(1),
          response: null,
          responseStatus: null,
          error: null,
          costUsd: null,
          provider: null,
          latencyMs: null,
        })
      })

      it('keeps every input byte: tabs, carriage returns, backslashes, quotes, unicode', async () => {
        await account('acct_1')
        const tricky = [
          '{"custom_id":"t\\tab","body":{"content":"back\\\\slash \\"quoted\\" \\n"}}',
          '{\t"custom_id" :\t"tab-separated"}',
          '{"custom_id":"ünïcødé ✓ 𝄞","x":"\\u0000 \\\\N"}',
          '\\.',
          // A carriage return is whitespace to JSON; backslashes first, last and side by side.
          '{"cr":\r1,"x":"\\\\\\\\"}\\',
          '\\\\{"a":"\\"}',
        ]
        const lines = tricky.map((input, i) => ({ lineNo: i + 1, customId: `id\t${i}\\`, input }))
        await admit('acct_1', 'batch_01', lines.length, { lines })
        const stored = await allLines('batch_01')
        expect(stored.map((line) => line.input)).toEqual(tricky)
        expect(stored.map((line) => line.customId)).toEqual(lines.map((line) => line.customId))
      })

      it('stores a large batch whole, read back in pages', async () => {
        await account('acct_1')
        const count = 5_000
        await admit('acct_1', 'batch_01', count)
        const seen: number[] = []
        let after = 0
        for (;;) {
          const page = await store.readLines('batch_01', {
            afterLineNo: after,
            limit: 1_000,
            statuses: null,
          })
          if (page.length === 0) break
          seen.push(...page.map((line) => line.lineNo))
          after = page.at(-1)!.lineNo
        }
        expect(seen).toEqual(Array.from({ length: count }, (_, i) => i + 1))
        const [last] = await store.readLines('batch_01', {
          afterLineNo: count - 1,
          limit: 1,
          statuses: null,
        })
        expect(last!.input).toBe(inputOf(count))
      }, 30_000)

      it('returns the first batch for a repeated idempotency key, holding no more', async () => {
        await account('acct_1', '10')
        await account('acct_2', '10')
        const first = await admit('acct_1', 'batch_01', 2, {
          idempotencyKey: 'k',
          costCeilingUsd: '1',
        })
        const again = await store.admitBatch(
          newBatch('acct_1', 'batch_02', 5, { idempotencyKey: 'k', costCeilingUsd: '1' }),
        )
        expect(again).toEqual({ kind: 'duplicate', batch: first })
        expect(await store.getBatch('acct_1', 'batch_02')).toBeNull()
        expect((await store.getAccount('acct_1'))!.heldUsd).toBe('1')
        expect(await store.findByIdempotencyKey('acct_1', 'k')).toEqual(first)
        expect(await store.findByIdempotencyKey('acct_1', 'other')).toBeNull()
        // Keys belong to one account.
        expect(await store.findByIdempotencyKey('acct_2', 'k')).toBeNull()
        const other = await store.admitBatch(
          newBatch('acct_2', 'batch_03', 1, { idempotencyKey: 'k' }),
        )
        expect(other.kind).toBe('created')
      })

      it('refuses a ceiling above the available credit, storing and holding nothing', async () => {
        await account('acct_1', '10')
        await admit('acct_1', 'batch_01', 1, { costCeilingUsd: '6' })
        const refused = await store.admitBatch(
          newBatch('acct_1', 'batch_02', 3, { costCeilingUsd: '4.000001' }),
        )
        expect(refused).toEqual({ kind: 'insufficient_quota', availableUsd: '4' })
        expect(await store.getBatch('acct_1', 'batch_02')).toBeNull()
        expect(await allLines('batch_02')).toEqual([])
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '10',
          heldUsd: '6',
          openBatches: 1,
        })
        // Exactly the available amount fits.
        expect(
          (await store.admitBatch(newBatch('acct_1', 'batch_03', 1, { costCeilingUsd: '4' }))).kind,
        ).toBe('created')
        expect((await store.getAccount('acct_1'))!.heldUsd).toBe('10')
      })

      it('refuses a batch over the open-batch limit until one finishes', async () => {
        await account('acct_1', '100', { maxOpenBatches: 2 })
        await admit('acct_1', 'batch_01')
        await admit('acct_1', 'batch_02')
        const refused = await store.admitBatch(newBatch('acct_1', 'batch_03'))
        expect(refused).toEqual({ kind: 'limit_exceeded', limit: 2, inUse: 2 })
        expect(await store.getBatch('acct_1', 'batch_03')).toBeNull()
        expect((await store.getAccount('acct_1'))!.heldUsd).toBe('2')
        await store.cancelBatch('acct_1', 'batch_01', T0 + 1)
        expect((await store.admitBatch(newBatch('acct_1', 'batch_03'))).kind).toBe('created')
      })

      it('stores nothing and holds nothing when writing the lines fails', async () => {
        await account('acct_1', '10')
        function* failing(): Generator<NewLine> {
          yield { lineNo: 1, customId: 'c-1', input: inputOf(1) }
          yield { lineNo: 2, customId: 'c-2', input: inputOf(2) }
          throw new Error('the file went away')
        }
        expect(
          await failureOf(
            store.admitBatch(newBatch('acct_1', 'batch_01', 3, { lines: failing() })),
          ),
        ).toBe('the file went away')
        expect(
          await failureOf(
            store.admitBatch(newBatch('acct_1', 'batch_02', 5, { lines: lineList(4) })),
          ),
        ).not.toBeNull()
        // Refused by the database itself, after every line was sent.
        const twice = [...lineList(2), { lineNo: 2, customId: 'c-2b', input: inputOf(2) }]
        expect(
          await failureOf(store.admitBatch(newBatch('acct_1', 'batch_03', 3, { lines: twice }))),
        ).not.toBeNull()
        for (const id of ['batch_01', 'batch_02', 'batch_03']) {
          expect(await store.getBatch('acct_1', id)).toBeNull()
          expect(await allLines(id)).toEqual([])
        }
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '10',
          heldUsd: '0',
          openBatches: 0,
        })
        // The store is still usable afterwards, on every connection.
        for (const id of ['batch_04', 'batch_05', 'batch_06', 'batch_07', 'batch_08']) {
          expect((await store.admitBatch(newBatch('acct_1', id))).kind).toBe('created')
        }
      })

      it('admits concurrent submits one at a time: limit and credit hold exactly', async () => {
        await account('acct_1', '10', { maxOpenBatches: 1 })
        const limited = await Promise.all([
          store.admitBatch(newBatch('acct_1', 'batch_01', 20)),
          store.admitBatch(newBatch('acct_1', 'batch_02', 20)),
        ])
        expect(limited.map((r) => r.kind).sort()).toEqual(['created', 'limit_exceeded'])

        await account('acct_2', '10')
        const credit = await Promise.all(
          ['batch_03', 'batch_04', 'batch_05'].map((id) =>
            store.admitBatch(newBatch('acct_2', id, 20, { costCeilingUsd: '4' })),
          ),
        )
        expect(credit.map((r) => r.kind).sort()).toEqual([
          'created',
          'created',
          'insufficient_quota',
        ])
        expect((await store.getAccount('acct_2'))!.heldUsd).toBe('8')

        await account('acct_3', '10')
        const retried = await Promise.all(
          ['batch_06', 'batch_07'].map((id) =>
            store.admitBatch(
              newBatch('acct_3', id, 20, { idempotencyKey: 'same', costCeilingUsd: '4' }),
            ),
          ),
        )
        expect(retried.map((r) => r.kind).sort()).toEqual(['created', 'duplicate'])
        const [a, b] = retried as { batch: { id: string } }[]
        expect(a!.batch.id).toBe(b!.batch.id)
        expect((await store.getAccount('acct_3'))!.heldUsd).toBe('4')
      })
    })

    describe('reading batches', () => {
      it('answers null for another account’s batch or a missing one', async () => {
        await account('acct_1')
        await account('acct_2')
        await admit('acct_1', 'batch_01')
        expect(await store.getBatch('acct_2', 'batch_01')).toBeNull()
        expect(await store.getBatch('acct_1', 'batch_99')).toBeNull()
        expect(await store.findByIdempotencyKey('acct_2', 'anything')).toBeNull()
      })

      it('lists an account’s batches newest first, page by page', async () => {
        await account('acct_1')
        await account('acct_2')
        for (const n of [1, 2, 3, 4, 5]) await admit('acct_1', `batch_0${n}`, 1)
        await admit('acct_2', 'batch_06', 1)
        const ids = (page: { batches: { id: string }[] }) => page.batches.map((b) => b.id)

        const all = await store.listBatches('acct_1', { limit: 100, after: null })
        expect(ids(all)).toEqual(['batch_05', 'batch_04', 'batch_03', 'batch_02', 'batch_01'])
        expect(all.hasMore).toBe(false)

        const first = await store.listBatches('acct_1', { limit: 2, after: null })
        expect([ids(first), first.hasMore]).toEqual([['batch_05', 'batch_04'], true])
        const second = await store.listBatches('acct_1', { limit: 2, after: 'batch_04' })
        expect([ids(second), second.hasMore]).toEqual([['batch_03', 'batch_02'], true])
        const third = await store.listBatches('acct_1', { limit: 2, after: 'batch_02' })
        expect([ids(third), third.hasMore]).toEqual([['batch_01'], false])
        const exact = await store.listBatches('acct_1', { limit: 5, after: null })
        expect([ids(exact).length, exact.hasMore]).toEqual([5, false])
        expect(ids(await store.listBatches('acct_2', { limit: 10, after: null }))).toEqual([
          'batch_06',
        ])
        expect((await store.listBatches('acct_9', { limit: 10, after: null })).batches).toEqual([])
      })

      it('reads lines in pages after a line number, optionally by status', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 5)
        const page = async (after: number, limit: number) =>
          (await store.readLines('batch_01', { afterLineNo: after, limit, statuses: null })).map(
            (l) => l.lineNo,
          )
        expect(await page(0, 2)).toEqual([1, 2])
        expect(await page(2, 2)).toEqual([3, 4])
        expect(await page(4, 2)).toEqual([5])
        expect(await page(5, 2)).toEqual([])

        await claim('batch_01', 'owner-a', 2)
        const upstream = { error: { message: 'bad request', type: 'invalid_request_error' } }
        await dispatch.recordOutcomes(
          'owner-a',
          [
            succeeded('batch_01', 1, '0.000001'),
            failed('batch_01', 2, {
              code: 'invalid_request',
              message: 'upstream said 400',
              upstream,
            }),
          ],
          MS + 500,
        )
        const byStatus = async (statuses: any[]) =>
          (await store.readLines('batch_01', { afterLineNo: 0, limit: 10, statuses })).map(
            (l) => l.lineNo,
          )
        expect(await byStatus(['failed', 'cancelled', 'expired'])).toEqual([2])
        expect(await byStatus(['succeeded'])).toEqual([1])
        expect(await byStatus(['pending', 'running'])).toEqual([3, 4, 5])
        const [one, two] = await store.readLines('batch_01', {
          afterLineNo: 0,
          limit: 2,
          statuses: null,
        })
        expect(one).toEqual({
          lineNo: 1,
          customId: 'c-1',
          status: 'succeeded',
          input: inputOf(1),
          response: RESPONSE,
          responseStatus: 200,
          error: null,
          costUsd: '0.000001',
          provider: 'openai',
          attempts: 1,
          latencyMs: 812,
        })
        expect(two).toMatchObject({
          status: 'failed',
          responseStatus: 400,
          error: { code: 'invalid_request', message: 'upstream said 400', upstream },
          costUsd: '0',
          provider: 'openai',
          response: null,
        })
      })
    })

    describe('cancelBatch', () => {
      it('cancels pending lines at once and ends a batch with nothing running', async () => {
        await account('acct_1', '10')
        await admit('acct_1', 'batch_01', 3, { costCeilingUsd: '2' })
        const result = await store.cancelBatch('acct_1', 'batch_01', T0 + 60)
        expect(result.kind).toBe('cancelled')
        const batch = (result as { batch: any }).batch
        expect(batch).toMatchObject({
          status: 'cancelled',
          cancelRequestedAt: T0 + 60,
          finishedAt: T0 + 60,
          heldUsd: '0',
          costUsd: '0',
          counts: {
            total: 3,
            pending: 0,
            running: 0,
            succeeded: 0,
            failed: 0,
            cancelled: 3,
            expired: 0,
          },
        })
        expect(await store.getBatch('acct_1', 'batch_01')).toEqual(batch)
        const lines = await allLines('batch_01')
        expect(lines.map((l) => [l.status, l.error?.code])).toEqual(
          Array(3).fill(['cancelled', 'batch_cancelled']),
        )
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '10',
          heldUsd: '0',
          openBatches: 0,
        })
        expect(await claim('batch_01', 'owner-a', 10)).toEqual([])
      })

      it('is cancelling while lines run, cancelled once they are recorded', async () => {
        await account('acct_1', '10')
        await admit('acct_1', 'batch_01', 3, { costCeilingUsd: '2' })
        await claim('batch_01', 'owner-a', 1)
        const result = await store.cancelBatch('acct_1', 'batch_01', T0 + 60)
        expect(result).toMatchObject({
          kind: 'cancelled',
          batch: {
            status: 'cancelling',
            finishedAt: null,
            counts: { pending: 0, running: 1, cancelled: 2 },
          },
        })
        // Cancelling again answers the same, and no more lines are handed out.
        expect(await store.cancelBatch('acct_1', 'batch_01', T0 + 61)).toMatchObject({
          kind: 'cancelled',
          batch: { status: 'cancelling', cancelRequestedAt: T0 + 60 },
        })
        expect(await claim('batch_01', 'owner-b', 10)).toEqual([])
        expect(await dispatch.runnableBatches(MS, 10)).toEqual([])
        expect((await store.getAccount('acct_1'))!.openBatches).toBe(1)

        // The running line finishes upstream: it is recorded and billed.
        expect(
          await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.25')], MS + 1000),
        ).toMatchObject({ recorded: 1 })
        expect((await dispatch.advanceBatches(T0 + 62)).changed).toEqual(['batch_01'])
        const batch = await batchOf('acct_1', 'batch_01')
        expect(batch).toMatchObject({
          status: 'cancelled',
          finishedAt: T0 + 62,
          costUsd: '0.25',
          heldUsd: '0',
          counts: { pending: 0, running: 0, succeeded: 1, cancelled: 2 },
        })
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '9.75',
          heldUsd: '0',
          openBatches: 0,
        })
      })

      it('ends cancelled the lines of a cancelling batch that come back to pending', async () => {
        await account('acct_1', '10')
        await admit('acct_1', 'batch_01', 3)
        await claim('batch_01', 'owner-a', 1, MS, 1000)
        await claim('batch_01', 'owner-b', 1, MS, 60_000)
        await store.cancelBatch('acct_1', 'batch_01', T0 + 1)
        // One line is retried, the other's instance dies and its lease is reaped.
        expect(
          await dispatch.recordOutcomes('owner-b', [retry('batch_01', 2, MS + 5000)], MS + 500),
        ).toMatchObject({ recorded: 1 })
        expect(await dispatch.reapExpiredLeases(MS + 2000)).toBe(1)
        expect(await claim('batch_01', 'owner-c', 10, MS + 10_000)).toEqual([])
        await dispatch.advanceBatches(T0 + 3)
        const batch = await batchOf('acct_1', 'batch_01')
        expect(batch).toMatchObject({
          status: 'cancelled',
          heldUsd: '0',
          counts: { pending: 0, running: 0, succeeded: 0, cancelled: 3, expired: 0 },
        })
        expect((await allLines('batch_01')).map((l) => l.status)).toEqual([
          'cancelled',
          'cancelled',
          'cancelled',
        ])
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '10', heldUsd: '0' })
      })

      it('answers conflict for a finished batch and not_found for another account’s', async () => {
        await account('acct_1')
        await account('acct_2')
        await admit('acct_1', 'batch_01', 1)
        await store.cancelBatch('acct_1', 'batch_01', T0 + 1)
        expect(await store.cancelBatch('acct_1', 'batch_01', T0 + 2)).toMatchObject({
          kind: 'conflict',
          batch: { status: 'cancelled' },
        })
        await admit('acct_1', 'batch_02', 1)
        await claim('batch_02', 'owner-a', 1)
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_02', 1, '0.1')], MS + 1)
        await dispatch.advanceBatches(T0 + 3)
        expect(await store.cancelBatch('acct_1', 'batch_02', T0 + 4)).toMatchObject({
          kind: 'conflict',
          batch: { status: 'finalizing' },
        })
        await dispatch.advanceBatches(T0 + 5)
        expect(await store.cancelBatch('acct_1', 'batch_02', T0 + 6)).toMatchObject({
          kind: 'conflict',
          batch: { status: 'completed' },
        })
        await admit('acct_1', 'batch_03', 1)
        expect(await store.cancelBatch('acct_2', 'batch_03', T0 + 7)).toEqual({ kind: 'not_found' })
        expect(await store.cancelBatch('acct_1', 'batch_99', T0 + 7)).toEqual({ kind: 'not_found' })
        expect((await batchOf('acct_1', 'batch_03')).status).toBe('in_progress')
      })
    })

    describe('retries and versions (docs/events-and-webhooks.md)', () => {
      it('links a retry to its parent: the child names it, the parent lists each child in order', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 2)
        await store.cancelBatch('acct_1', 'batch_01', T0 + 1)
        const first = await admit('acct_1', 'batch_02', 2, { parentBatchId: 'batch_01' })
        expect(first).toMatchObject({ parentBatchId: 'batch_01', retriedBy: [] })
        expect((await batchOf('acct_1', 'batch_01')).retriedBy).toEqual(['batch_02'])
        await store.cancelBatch('acct_1', 'batch_02', T0 + 2)
        await admit('acct_1', 'batch_03', 2, { parentBatchId: 'batch_01' })
        const parent = await batchOf('acct_1', 'batch_01')
        expect(parent).toMatchObject({ parentBatchId: null, retriedBy: ['batch_02', 'batch_03'] })
        expect((await store.listBatches('acct_1', { limit: 10, after: null })).batches).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ id: 'batch_01', retriedBy: ['batch_02', 'batch_03'] }),
          ]),
        )
      })

      it('admits nothing when the parent is another account’s', async () => {
        await account('acct_1')
        await account('acct_2')
        await admit('acct_1', 'batch_01', 1)
        await store.cancelBatch('acct_1', 'batch_01', T0 + 1)
        expect(
          await failureOf(
            store.admitBatch(newBatch('acct_2', 'batch_02', 1, { parentBatchId: 'batch_01' })),
          ),
        ).toContain('parent')
        expect(await store.getBatch('acct_2', 'batch_02')).toBeNull()
        expect((await store.getAccount('acct_2'))!.heldUsd).toBe('0')
        expect((await batchOf('acct_1', 'batch_01')).retriedBy).toEqual([])
      })

      it('moves the version past every change of counts, cost, status or waiting, and no other', async () => {
        await account('acct_1')
        const admitted = await admit('acct_1', 'batch_01', 2)
        const seen = [admitted.version]
        const now = async () => (await batchOf('acct_1', 'batch_01')).version
        await claim('batch_01', 'owner-a', 1)
        seen.push(await now())
        await dispatch.setWaiting('batch_01', {
          code: 'provider_rate_limited',
          message: 'sim answered 429',
          until: T0 + 60,
        })
        seen.push(await now())
        await dispatch.recordOutcomes('owner-a', [succeeded('batch_01', 1, '0.1')], MS + 1)
        seen.push(await now())
        await store.cancelBatch('acct_1', 'batch_01', T0 + 2)
        seen.push(await now())
        for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1]!)
        // A read, a planner's ETA, or a retry listed on it changes none of what a stream reports.
        const last = seen.at(-1)!
        expect(await now()).toBe(last)
        await admit('acct_1', 'batch_02', 1)
        await dispatch.recordEtas([{ batchId: 'batch_02', eta: T0 + 600 }])
        expect((await batchOf('acct_1', 'batch_02')).version).toBe(0)
        await admit('acct_1', 'batch_03', 1, { parentBatchId: 'batch_01' })
        expect(await now()).toBe(last)
      })
    })

    describe('rejected batches', () => {
      it('stores a refused batch as failed with its errors, holding nothing', async () => {
        await account('acct_1', '10', { maxOpenBatches: 1 })
        const errors = [
          { code: 'invalid_request', message: 'bad model', param: 'body.model', line: 3 },
          { code: 'invalid_request', message: 'too many lines', param: null, line: null },
        ]
        const batch = await store.recordRejectedBatch({
          id: 'batch_01',
          accountId: 'acct_1',
          name: 'weekly',
          endpoint: '/v1/embeddings',
          completionWindowHours: 2,
          createdAt: T0,
          source: 'openai',
          metadata: { k: 'v' },
          inputFileId: 'file_1',
          idempotencyKey: null,
          errors,
        })
        expect(batch).toMatchObject({
          id: 'batch_01',
          status: 'failed',
          endpoint: '/v1/embeddings',
          createdAt: T0,
          deadlineAt: T0 + 7200,
          finishedAt: T0,
          counts: { total: 0, pending: 0, running: 0, succeeded: 0, failed: 0 },
          costCeilingUsd: '0',
          costUsd: '0',
          heldUsd: '0',
          source: 'openai',
          metadata: { k: 'v' },
          inputFileId: 'file_1',
          idempotencyKey: null,
          errors,
        })
        expect(await store.getBatch('acct_1', 'batch_01')).toEqual(batch)
        expect(await store.getAccount('acct_1')).toMatchObject({ heldUsd: '0', openBatches: 0 })
        // It counts against nothing: the one open batch allowed is still free.
        expect((await store.admitBatch(newBatch('acct_1', 'batch_02'))).kind).toBe('created')
        expect((await dispatch.advanceBatches(T0 + 1)).changed).toEqual([])
      })

      it('keeps its idempotency key: a second record with it is the first batch, not another', async () => {
        await account('acct_1', '10')
        const rejected = (id: string) => ({
          id,
          accountId: 'acct_1',
          name: null,
          endpoint: '/v1/chat/completions' as const,
          completionWindowHours: 24,
          createdAt: T0,
          source: 'openai' as const,
          metadata: null,
          inputFileId: 'file_1',
          idempotencyKey: 'openai:abc:1',
          errors: [{ code: 'invalid_request', message: 'bad', param: null, line: 1 }],
        })
        // Two creates racing past the key check: one batch.
        const [first, second] = await Promise.all([
          store.recordRejectedBatch(rejected('batch_01')),
          store.recordRejectedBatch(rejected('batch_02')),
        ])
        expect(second.id).toBe(first.id)
        expect(await store.findByIdempotencyKey('acct_1', 'openai:abc:1')).toEqual(first)
        const { batches } = await store.listBatches('acct_1', { limit: 10, after: null })
        expect(batches.map((batch) => batch.id)).toEqual([first.id])
      })
    })

    describe('daily spend limit (docs/money-and-limits.md)', () => {
      // T0 is 23:46:40 UTC: the next UTC day begins 800 s later.
      const NEXT_DAY = T0 + 800
      it('counts the day’s batch holds and refuses a batch that would pass it; the next UTC day starts at zero, and a deposit does not raise it', async () => {
        await account('acct_1', '100')
        expect(await store.getDailySpend('acct_1', MS)).toEqual({ limitUsd: null, usedUsd: '0' })
        expect(await store.setDailySpendLimit('acct_1', '2.5')).toBe(true)
        expect(await store.setDailySpendLimit('acct_missing', '1')).toBe(false)
        await admit('acct_1', 'batch_01', 1, { costCeilingUsd: '1.5' })
        await admit('acct_1', 'batch_02', 1, { costCeilingUsd: '1' })
        expect(await store.getDailySpend('acct_1', MS)).toEqual({ limitUsd: '2.5', usedUsd: '2.5' })
        const refused = await store.admitBatch(
          newBatch('acct_1', 'batch_03', 1, { costCeilingUsd: '0.000001' }),
        )
        expect(refused).toEqual({ kind: 'daily_limit_exceeded', limitUsd: '2.5', usedUsd: '2.5' })
        expect(await store.getBatch('acct_1', 'batch_03')).toBeNull()
        await store.addCredit('acct_1', '1000')
        expect((await store.admitBatch(newBatch('acct_1', 'batch_03', 1))).kind).toBe(
          'daily_limit_exceeded',
        )
        // 00:00 UTC: yesterday's batches count no more (they still hold their credit).
        await admit('acct_1', 'batch_04', 1, {
          costCeilingUsd: '2.5',
          createdAt: NEXT_DAY,
          deadlineAt: NEXT_DAY + DAY,
        })
        expect(await store.getDailySpend('acct_1', NEXT_DAY * 1000)).toMatchObject({
          usedUsd: '2.5',
        })
        expect((await store.getAccount('acct_1'))!.heldUsd).toBe('5')
        // No limit: anything the credit covers.
        await store.setDailySpendLimit('acct_1', null)
        await admit('acct_1', 'batch_05', 1, { costCeilingUsd: '50', createdAt: NEXT_DAY })
      })

      it('counts a finished batch at what it was charged, not its ceiling', async () => {
        await account('acct_1', '100')
        await store.setDailySpendLimit('acct_1', '1.5')
        await admit('acct_1', 'batch_01', 2, { costCeilingUsd: '1' })
        await claim('batch_01', 'owner-a', 2)
        await dispatch.recordOutcomes(
          'owner-a',
          [succeeded('batch_01', 1, '0.25'), succeeded('batch_01', 2, '0.05')],
          MS + 10,
        )
        // Held 0.7 and charged 0.3 while it runs, charged 0.3 once it ends.
        expect((await store.getDailySpend('acct_1', MS + 20))!.usedUsd).toBe('1')
        await dispatch.advanceBatches(T0 + 1)
        await dispatch.advanceBatches(T0 + 2)
        expect((await batchOf('acct_1', 'batch_01')).status).toBe('completed')
        expect((await store.getDailySpend('acct_1', MS + 3000))!.usedUsd).toBe('0.3')
        await admit('acct_1', 'batch_02', 1, { costCeilingUsd: '1.2' })
      })

      it('bounds live leases by the limit, counts live charges on the day they are written, and says when the limit is what refuses', async () => {
        await account('acct_1', '100')
        await store.setDailySpendLimit('acct_1', '1')
        // Half of what the limit leaves beyond the need, as with credit.
        expect(await take('inst-a', '0.2', '10')).toMatchObject({
          grantedUsd: '0.5',
          availableUsd: '0.5',
        })
        expect((await store.getDailySpend('acct_1', MS))!.usedUsd).toBe('0.5')
        const refused = await take('inst-b', '0.6', '0.6')
        expect(refused).toMatchObject({
          grantedUsd: '0',
          dailyLimit: { limitUsd: '1', usedUsd: '0.5' },
        })
        // A batch cannot take the room a lease holds either.
        expect(
          (await store.admitBatch(newBatch('acct_1', 'batch_01', 1, { costCeilingUsd: '0.6' })))
            .kind,
        ).toBe('daily_limit_exceeded')
        await store.writeLiveCharges({
          id: 'lcg_1',
          instanceId: 'inst-a',
          nowMs: MS + 100,
          entries: [{ accountId: 'acct_1', chargeUsd: '0.25', releaseUsd: '0.25' }],
        })
        expect((await store.getDailySpend('acct_1', MS + 200))!.usedUsd).toBe('0.25')
        expect(await take('inst-b', '0.5', '0.5', MS + 200)).toMatchObject({ grantedUsd: '0.5' })
        expect(await take('inst-b', '0.5', '0.5', MS + 300)).toMatchObject({
          grantedUsd: '0',
          dailyLimit: { limitUsd: '1', usedUsd: '0.75' },
        })
        // The credit, not the limit, in the way: no dailyLimit (a 402, not a 429).
        await store.setDailySpendLimit('acct_1', '1000')
        expect((await take('inst-c', '500', '500', MS + 300)).dailyLimit).toBeUndefined()
        // The next UTC day: yesterday's live charges count no more.
        await store.dropLiveCredit('inst-b')
        expect((await store.getDailySpend('acct_1', NEXT_DAY * 1000))!.usedUsd).toBe('0')
        await store.writeLiveCharges({
          id: 'lcg_2',
          instanceId: 'inst-b',
          nowMs: NEXT_DAY * 1000,
          entries: [{ accountId: 'acct_1', chargeUsd: '0.1', releaseUsd: '0' }],
        })
        expect((await store.getDailySpend('acct_1', NEXT_DAY * 1000))!.usedUsd).toBe('0.1')
      })
    })

    describe('batches waiting for credit (docs/open-models.md)', () => {
      const waitFor = (id: string, ceiling: string, extra: Partial<NewBatch> = {}) =>
        admit('acct_1', id, 2, { costCeilingUsd: ceiling, creditWaitUntil: T0 + 600, ...extra })

      it('admits a batch whose hold does not fit as validating, holding nothing, and starts it once a deposit covers it', async () => {
        await account('acct_1', '1')
        const batch = await waitFor('batch_01', '2.5')
        expect(batch).toMatchObject({
          status: 'validating',
          heldUsd: '0',
          waiting: { code: 'insufficient_credit', until: T0 + 600 },
        })
        expect(batch.waiting!.message).toContain('deposit at least $1.500000 to start it')
        expect(await store.getAccount('acct_1')).toMatchObject({ heldUsd: '0', openBatches: 1 })
        // Not claimable while it waits.
        expect(await dispatch.runnableBatches(MS, 10)).toEqual([])
        expect(await store.admitWaitingBatches(MS)).toEqual({
          started: [],
          failed: [],
          failedLines: 0,
        })
        await store.addCredit('acct_1', '1.49')
        await store.admitWaitingBatches(MS)
        expect((await batchOf('acct_1', 'batch_01')).waiting!.message).toContain(
          'deposit at least $0.010000 to start it',
        )
        await store.addCredit('acct_1', '0.01')
        expect(await store.admitWaitingBatches(MS + 1)).toEqual({
          started: ['batch_01'],
          failed: [],
          failedLines: 0,
        })
        expect(await batchOf('acct_1', 'batch_01')).toMatchObject({
          status: 'in_progress',
          heldUsd: '2.5',
          waiting: null,
        })
        expect(await store.getAccount('acct_1')).toMatchObject({ heldUsd: '2.5' })
        expect(await store.admitWaitingBatches(MS + 2)).toEqual({
          started: [],
          failed: [],
          failedLines: 0,
        })
        expect((await dispatch.runnableBatches(MS, 10)).map((b) => b.id)).toEqual(['batch_01'])
        // Without wait_for_credit, a hold that does not fit is refused as before.
        expect((await store.admitBatch(newBatch('acct_1', 'batch_02', 1))).kind).toBe(
          'insufficient_quota',
        )
      })

      it('starts each batch whose hold the credit left covers, earliest first, also past an earlier one it does not', async () => {
        await account('acct_1', '0')
        await waitFor('batch_a', '2', { createdAt: T0 })
        await waitFor('batch_b', '1', { createdAt: T0 + 1 })
        await waitFor('batch_c', '1', { createdAt: T0 + 2 })
        await store.addCredit('acct_1', '1.5')
        // A does not fit; B does, and takes it; what is left does not cover C.
        expect(await store.admitWaitingBatches(MS + 3000)).toEqual({
          started: ['batch_b'],
          failed: [],
          failedLines: 0,
        })
        const needed = async () =>
          Promise.all(
            ['batch_a', 'batch_c'].map(
              async (id) =>
                /deposit at least \$([\d.]+)/.exec(
                  (await batchOf('acct_1', id)).waiting?.message ?? '',
                )?.[1],
            ),
          )
        // 0.5 is left: A needs 1.5; 0.5 starts C, as A would still not fit.
        expect(await needed()).toEqual(['1.500000', '0.500000'])
        // A submit that may wait starts at once when its own hold fits.
        await waitFor('batch_d', '0.1', { createdAt: T0 + 3 })
        expect((await batchOf('acct_1', 'batch_d')).status).toBe('in_progress')
        await store.addCredit('acct_1', '1')
        expect(await store.admitWaitingBatches(MS + 4000)).toEqual({
          started: ['batch_c'],
          failed: [],
          failedLines: 0,
        })
        expect(await needed()).toEqual(['1.600000', undefined])
        await store.addCredit('acct_1', '10')
        expect((await store.admitWaitingBatches(MS + 5000)).started).toEqual(['batch_a'])
        expect(await store.getAccount('acct_1')).toMatchObject({
          heldUsd: '4.1',
          balanceUsd: '12.5',
        })
      })

      it('fails a batch still short when its wait ends: every line failed, nothing charged, nothing held, its webhook told', async () => {
        await account('acct_1', '1')
        await store.createWebhook(
          {
            id: 'whe_1',
            accountId: 'acct_1',
            url: 'https://hooks.example.com/1',
            events: ['batch.failed'],
            secret: 'whsec_c2VjcmV0',
            disabledAt: null,
            createdAt: T0,
          },
          10,
        )
        await waitFor('batch_01', '2')
        expect(await store.admitWaitingBatches((T0 + 599) * 1000)).toEqual({
          started: [],
          failed: [],
          failedLines: 0,
        })
        expect(await store.admitWaitingBatches((T0 + 600) * 1000)).toEqual({
          started: [],
          failed: ['batch_01'],
          failedLines: 2,
        })
        const batch = await batchOf('acct_1', 'batch_01')
        expect(batch).toMatchObject({
          status: 'failed',
          finishedAt: T0 + 600,
          costUsd: '0',
          heldUsd: '0',
          counts: { total: 2, pending: 0, running: 0, succeeded: 0, failed: 2 },
        })
        expect(batch.errors).toEqual([
          {
            code: 'insufficient_quota',
            message: expect.stringContaining('$2.000000'),
            param: null,
            line: null,
          },
        ])
        const lines = await allLines('batch_01')
        expect(lines.map((line) => [line.status, line.error?.code, line.costUsd])).toEqual([
          ['failed', 'insufficient_quota', '0'],
          ['failed', 'insufficient_quota', '0'],
        ])
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '1',
          heldUsd: '0',
          openBatches: 0,
        })
        const queued = await store.listDeliveries('acct_1', 'whe_1', { limit: 10, after: null })
        expect(queued!.deliveries).toMatchObject([
          { batchId: 'batch_01', type: 'batch.failed', createdAt: T0 + 600, status: 'pending' },
        ])
        expect(await store.admitWaitingBatches((T0 + 601) * 1000)).toEqual({
          started: [],
          failed: [],
          failedLines: 0,
        })
      })

      it('counts a waiting batch’s hold against the daily limit from its submit', async () => {
        await account('acct_1', '0')
        await store.setDailySpendLimit('acct_1', '3')
        await waitFor('batch_01', '2')
        expect((await store.getDailySpend('acct_1', MS))!.usedUsd).toBe('2')
        expect(
          await store.admitBatch(
            newBatch('acct_1', 'batch_02', 1, { costCeilingUsd: '1.5', creditWaitUntil: T0 + 600 }),
          ),
        ).toEqual({ kind: 'daily_limit_exceeded', limitUsd: '3', usedUsd: '2' })
      })

      it('a cancelled waiting batch ends cancelled and waits no more', async () => {
        await account('acct_1', '0')
        await waitFor('batch_01', '2')
        const cancelled = await store.cancelBatch('acct_1', 'batch_01', T0 + 5)
        expect(cancelled).toMatchObject({ kind: 'cancelled', batch: { status: 'cancelled' } })
        await store.addCredit('acct_1', '5')
        expect(await store.admitWaitingBatches(MS + 6000)).toEqual({
          started: [],
          failed: [],
          failedLines: 0,
        })
        expect(await store.getAccount('acct_1')).toMatchObject({ heldUsd: '0', openBatches: 0 })
      })
    })

    describe('providerShares', () => {
      it('counts settled lines, their cost and calls in flight per provider, per batch', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 4)
        await admit('acct_1', 'batch_02', 1)
        expect(await store.providerShares(['batch_01', 'batch_02'])).toEqual(new Map())
        await claim('batch_01', 'owner-a', 4)
        await claim('batch_02', 'owner-b', 1)
        const calls = [
          { batchId: 'batch_01', provider: 'openai', delta: 3 },
          { batchId: 'batch_01', provider: 'gpu-pool', delta: 1 },
        ]
        expect(await dispatch.recordOutcomes('owner-a', [], MS, calls)).toMatchObject({
          recorded: 0,
        })
        await dispatch.recordOutcomes('owner-b', [], MS, [
          { batchId: 'batch_02', provider: 'openai', delta: 1 },
        ])
        const onPool = { ...succeeded('batch_01', 3, '0'), provider: 'gpu-pool' } as LineOutcome
        await dispatch.recordOutcomes(
          'owner-a',
          [
            succeeded('batch_01', 1, '0.25'),
            failed('batch_01', 2, { code: 'invalid_request', message: 'bad' }, '0.000001'),
            onPool,
            retry('batch_01', 4, MS + 5000),
          ],
          MS + 10,
          [
            { batchId: 'batch_01', provider: 'openai', delta: -3 },
            { batchId: 'batch_01', provider: 'gpu-pool', delta: -1 },
            { batchId: 'batch_01', provider: 'openai', delta: 1 },
          ],
        )
        const shares = await store.providerShares(['batch_01', 'batch_02', 'batch_99'])
        expect(shares.get('batch_01')).toEqual({
          'gpu-pool': { succeeded: 1, failed: 0, running: 0, costUsd: '0' },
          openai: { succeeded: 1, failed: 1, running: 1, costUsd: '0.250001' },
        })
        expect(shares.get('batch_02')).toEqual({
          openai: { succeeded: 0, failed: 0, running: 1, costUsd: '0' },
        })
        expect(shares.has('batch_99')).toBe(false)
      })

      it('zeroes the calls in flight of an owner whose leases were reaped or released', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 2)
        await claim('batch_01', 'owner-a', 1, MS, 1000)
        await claim('batch_01', 'owner-b', 1, MS, 60_000)
        await dispatch.recordOutcomes('owner-a', [], MS, [
          { batchId: 'batch_01', provider: 'openai', delta: 1 },
        ])
        await dispatch.recordOutcomes('owner-b', [], MS, [
          { batchId: 'batch_01', provider: 'openai', delta: 1 },
        ])
        expect((await store.providerShares(['batch_01'])).get('batch_01')!.openai!.running).toBe(2)
        expect(await dispatch.reapExpiredLeases(MS + 2000)).toBe(1)
        expect((await store.providerShares(['batch_01'])).get('batch_01')!.openai!.running).toBe(1)
        expect(await dispatch.releaseLeases('owner-b')).toBe(1)
        expect((await store.providerShares(['batch_01'])).get('batch_01')!.openai!.running).toBe(0)
      })
    })
  })
})
