/**
 * Retention's own deletes (src/store/retention/), on every store (every-store.ts): the results of
 * batches that ended before the cutoff go (lines, rendered files; the batch stays, marked purged),
 * once; unused uploads' records go, rendered files and used uploads stay.
 */
import { afterEach, beforeEach, describe, expect } from 'bun:test'
import type { FileRecord, Store } from '../../src/store/store.ts'
import { newBatch } from './batch-fixtures.ts'
import { newAccount, onEveryStore, T0 } from './every-store.ts'

const file = (id: string, extra: Partial<FileRecord> = {}): FileRecord => ({
  id,
  accountId: 'acct_1',
  purpose: 'batch',
  filename: `${id}.jsonl`,
  bytes: 10,
  createdAt: T0,
  lastUsedAt: T0,
  batchId: null,
  kind: 'upload',
  ...extra,
})

onEveryStore(({ name, makeStore, it }) => {
  describe.serial(`retention store contract: ${name}`, () => {
    let store: Store
    beforeEach(async () => {
      store = (await makeStore()).store
    })
    afterEach(async () => {
      await store.close()
    })
    const admit = async (id: string) => {
      const result = await store.admitBatch(newBatch('acct_1', id, 3))
      if (result.kind !== 'created') throw new Error(`expected created, got ${result.kind}`)
    }
    const lines = (batchId: string) =>
      store.readLines(batchId, { afterLineNo: 0, limit: 100, statuses: null })

    it('purges the lines and rendered files of batches ended before the cutoff, each once', async () => {
      await store.createAccount(newAccount('acct_1'))
      await admit('batch_01')
      await admit('batch_02')
      // Cancelled with every line pending: ended at once, at T0 + 3.
      expect((await store.cancelBatch('acct_1', 'batch_01', T0 + 3)).kind).toBe('cancelled')
      await store.createFile(
        file('file_err', {
          purpose: 'batch_output',
          bytes: null,
          batchId: 'batch_01',
          kind: 'error',
        }),
      )
      await store.createFile(
        file('file_out2', {
          purpose: 'batch_output',
          bytes: null,
          batchId: 'batch_02',
          kind: 'output',
        }),
      )
      expect(await store.purgeResults(T0 + 2, 10, T0 + 20)).toEqual([])
      expect(await store.purgeResults(T0 + 10, 10, T0 + 20)).toEqual(['batch_01'])
      expect(await lines('batch_01')).toEqual([])
      expect(await lines('batch_02')).toHaveLength(3)
      expect(await store.knownFileIds(['file_err', 'file_out2'])).toEqual(new Set(['file_out2']))
      expect((await store.getBatch('acct_1', 'batch_01'))?.status).toBe('cancelled')
      expect(await store.purgeResults(T0 + 10, 10, T0 + 30)).toEqual([])
    })

    it('purges at most `limit` batches a call, the earliest ended first', async () => {
      await store.createAccount(newAccount('acct_1'))
      for (const [id, at] of [
        ['batch_01', T0 + 5],
        ['batch_02', T0 + 3],
        ['batch_03', T0 + 4],
      ] as const) {
        await admit(id)
        await store.cancelBatch('acct_1', id, at)
      }
      expect(await store.purgeResults(T0 + 10, 2, T0 + 20)).toEqual(['batch_02', 'batch_03'])
      expect(await store.purgeResults(T0 + 10, 2, T0 + 20)).toEqual(['batch_01'])
    })

    it('deletes the records of uploads unused since the cutoff, not rendered files', async () => {
      await store.createAccount(newAccount('acct_1'))
      await store.createFile(file('file_old'))
      await store.createFile(file('file_new', { lastUsedAt: T0 + 100 }))
      await store.createFile(
        file('file_out', {
          purpose: 'batch_output',
          bytes: null,
          batchId: 'batch_x',
          kind: 'output',
        }),
      )
      expect(await store.deleteStaleUploads(T0 + 50, 10, T0 + 60)).toEqual(['file_old'])
      expect(await store.deleteStaleUploads(T0 + 50, 10, T0 + 60)).toEqual([])
      expect(await store.knownFileIds(['file_old', 'file_new', 'file_out'])).toEqual(
        new Set(['file_new', 'file_out']),
      )
    })

    it('an upload past its own expiry is gone for its account, then deleted; one before it stays', async () => {
      await store.createAccount(newAccount('acct_1'))
      const used = { lastUsedAt: T0 + 100 }
      await store.createFile(file('file_soon', { ...used, expiresAt: T0 + 3600 }))
      await store.createFile(file('file_later', { ...used, expiresAt: T0 + 7200 }))
      expect((await store.getFile('acct_1', 'file_soon', T0 + 3599))?.expiresAt).toBe(T0 + 3600)
      expect(await store.getFile('acct_1', 'file_soon', T0 + 3600)).toBeNull()
      const listed = await store.listFiles('acct_1', {
        limit: 10,
        after: null,
        purpose: null,
        order: 'asc',
        now: T0 + 3600,
      })
      expect(listed.files.map((f) => f.id)).toEqual(['file_later'])
      expect(await store.deleteStaleUploads(T0, 10, T0 + 3600)).toEqual(['file_soon'])
      expect(await store.knownFileIds(['file_soon', 'file_later'])).toEqual(new Set(['file_later']))
    })
  })
})
