/**
 * The file and upload store's contract (src/store/files/), on every store (every-store.ts):
 * uploads and rendered files (a rendered file exists once its batch has ended with lines of its
 * kind), file quotas held under racing uploads, reservations that expire.
 */
import { describe, expect } from 'bun:test'
import type {
  DispatchStore,
  FileRecord,
  LineOutcome,
  NewAccount,
  Store,
} from '../../src/store/store.ts'
import { newBatch } from './batch-fixtures.ts'
import { freshStoreEachTest, MS, newAccount, onEveryStore, T0 } from './every-store.ts'

const succeeded = (batchId: string, lineNo: number, costUsd: string): LineOutcome => ({
  batchId,
  lineNo,
  kind: 'succeeded',
  responseStatus: 200,
  response: '{"id":"chatcmpl-1","object":"chat.completion","usage":{"prompt_tokens":9}}',
  costUsd,
  provider: 'openai',
  latencyMs: 812,
})

onEveryStore(({ name, makeStore, it }) => {
  describe.serial(`file store contract: ${name}`, () => {
    let store: Store
    let dispatch: DispatchStore
    freshStoreEachTest(makeStore, (opened) => {
      store = opened.store
      dispatch = opened.dispatch
    })
    const account = (id: string, creditUsd = '100', extra: Partial<NewAccount> = {}) =>
      store.createAccount(newAccount(id, creditUsd, extra))
    const admit = async (accountId: string, id: string, lineCount = 3) => {
      const result = await store.admitBatch(newBatch(accountId, id, lineCount))
      if (result.kind !== 'created') throw new Error(`expected created, got ${result.kind}`)
      return result.batch
    }
    const claim = (batchId: string, owner: string, limit: number) =>
      dispatch.claimLines({ batchId, owner, limit, nowMs: MS, leaseUntilMs: MS + 60_000 })

    describe('files', () => {
      const file = (id: string, extra: Partial<FileRecord> = {}): FileRecord => ({
        id,
        accountId: 'acct_1',
        purpose: 'batch',
        filename: `${id}.jsonl`,
        bytes: 1234,
        createdAt: T0,
        lastUsedAt: T0,
        batchId: null,
        kind: 'upload',
        ...extra,
      })

      it('stores an upload, finds it for its account only, updates and deletes it', async () => {
        await account('acct_1')
        await account('acct_2')
        await store.createFile(file('file_01'))
        expect(await store.getFile('acct_1', 'file_01')).toEqual({
          ...file('file_01'),
          batchStatus: null,
          batchCounts: null,
        })
        expect(await store.getFile('acct_2', 'file_01')).toBeNull()
        expect(await store.getFile('acct_1', 'file_99')).toBeNull()
        await store.setFileBytes('file_01', 20_000_000_000)
        await store.touchFile('file_01', T0 + 50)
        expect(await store.getFile('acct_1', 'file_01')).toMatchObject({
          bytes: 20_000_000_000,
          lastUsedAt: T0 + 50,
        })
        expect(await store.deleteFile('acct_2', 'file_01')).toBe(false)
        expect(await store.deleteFile('acct_1', 'file_01')).toBe(true)
        expect(await store.deleteFile('acct_1', 'file_01')).toBe(false)
        expect(await store.getFile('acct_1', 'file_01')).toBeNull()
      })

      it('lists files newest or oldest first, by purpose, page by page', async () => {
        await account('acct_1')
        await account('acct_2')
        for (const n of [1, 2, 3, 4]) await store.createFile(file(`file_0${n}`))
        await store.createFile(file('file_05', { purpose: 'batch_output', bytes: null }))
        await store.createFile(file('file_06', { accountId: 'acct_2' }))
        const ids = (page: { files: { id: string }[]; hasMore: boolean }) => [
          page.files.map((f) => f.id),
          page.hasMore,
        ]
        const list = (page: Partial<Parameters<Store['listFiles']>[1]>) =>
          store.listFiles('acct_1', {
            limit: 100,
            after: null,
            purpose: null,
            order: 'desc',
            ...page,
          })
        expect(ids(await list({}))).toEqual([
          ['file_05', 'file_04', 'file_03', 'file_02', 'file_01'],
          false,
        ])
        expect(ids(await list({ limit: 2 }))).toEqual([['file_05', 'file_04'], true])
        expect(ids(await list({ limit: 2, after: 'file_04' }))).toEqual([
          ['file_03', 'file_02'],
          true,
        ])
        expect(ids(await list({ limit: 2, order: 'asc' }))).toEqual([['file_01', 'file_02'], true])
        expect(ids(await list({ limit: 3, order: 'asc', after: 'file_02' }))).toEqual([
          ['file_03', 'file_04', 'file_05'],
          false,
        ])
        expect(ids(await list({ purpose: 'batch_output' }))).toEqual([['file_05'], false])
        expect(ids(await list({ purpose: 'batch', limit: 1, after: 'file_02' }))).toEqual([
          ['file_01'],
          false,
        ])
      })

      it('shows a rendered file once its batch has finished with lines of its kind', async () => {
        await account('acct_1')
        await admit('acct_1', 'batch_01', 2)
        const rendered = (id: string, kind: 'output' | 'error') =>
          file(id, { purpose: 'batch_output', bytes: null, batchId: 'batch_01', kind })
        await store.createFile(rendered('file_out', 'output'))
        await store.createFile(rendered('file_err', 'error'))
        expect(await store.getFile('acct_1', 'file_out')).toBeNull()
        const visible = async () =>
          (await store.listFiles('acct_1', { limit: 10, after: null, purpose: null, order: 'asc' }))
            .files
        expect(await visible()).toEqual([])

        await claim('batch_01', 'owner-a', 2)
        await dispatch.recordOutcomes(
          'owner-a',
          [succeeded('batch_01', 1, '0'), succeeded('batch_01', 2, '0')],
          MS,
        )
        await dispatch.advanceBatches(T0 + 1)
        expect(await visible()).toEqual([]) // finalizing is not finished
        await dispatch.advanceBatches(T0 + 2)
        expect(await store.getFile('acct_1', 'file_out')).toEqual({
          ...rendered('file_out', 'output'),
          batchStatus: 'completed',
          batchCounts: { succeeded: 2, unsuccessful: 0 },
        })
        // Nothing failed: there is no error file.
        expect(await store.getFile('acct_1', 'file_err')).toBeNull()
        expect((await visible()).map((f) => f.id)).toEqual(['file_out'])

        await admit('acct_1', 'batch_02', 2)
        await store.createFile(file('file_err2', { batchId: 'batch_02', kind: 'error' }))
        await store.createFile(file('file_out2', { batchId: 'batch_02', kind: 'output' }))
        await store.cancelBatch('acct_1', 'batch_02', T0 + 3)
        expect(await store.getFile('acct_1', 'file_err2')).toMatchObject({
          batchStatus: 'cancelled',
          batchCounts: { succeeded: 0, unsuccessful: 2 },
        })
        expect(await store.getFile('acct_1', 'file_out2')).toBeNull()
      })
    })

    describe('file quotas and uploads in progress', () => {
      const defaults = { maxFiles: 3, maxStoredBytes: 1000 }
      const upload = (id: string, bytes: number, accountId = 'acct_1'): FileRecord => ({
        id,
        accountId,
        purpose: 'batch',
        filename: `${id}.jsonl`,
        bytes,
        createdAt: T0,
        lastUsedAt: T0,
        batchId: null,
        kind: 'upload',
      })
      const reserve = (fileId: string, bytes: number, accountId = 'acct_1', nowMs = MS) =>
        store.reserveUpload({ fileId, accountId, bytes, nowMs }, defaults)

      it('counts stored uploads and uploads in progress against max_files and max_stored_bytes', async () => {
        await account('acct_1')
        await account('acct_2')
        expect(await store.getFileQuota('acct_1')).toEqual({
          maxFiles: null,
          maxStoredBytes: null,
          filesInUse: 0,
          storedBytes: 0,
        })
        expect(await store.getFileQuota('acct_missing')).toBeNull()
        expect(await reserve('file_1', 400)).toEqual({ kind: 'reserved', bytes: 400 })
        expect(await store.commitUpload(upload('file_1', 300))).toBe(true)
        expect(await store.getFile('acct_1', 'file_1')).toMatchObject({ bytes: 300 })
        // Committed once only: the reservation is gone.
        expect(await store.commitUpload(upload('file_1', 300))).toBe(false)
        expect(await reserve('file_2', 600)).toEqual({ kind: 'reserved', bytes: 600 })
        expect(await store.getFileQuota('acct_1')).toMatchObject({
          filesInUse: 2,
          storedBytes: 900,
        })
        expect(await reserve('file_3', 101)).toEqual({
          kind: 'limit_exceeded',
          limit: { stored_bytes: 1000, in_use: 900 },
        })
        expect(await reserve('file_3', 100)).toEqual({ kind: 'reserved', bytes: 100 })
        expect(await reserve('file_4', 0)).toEqual({
          kind: 'limit_exceeded',
          limit: { files: 3, in_use: 3 },
        })
        // Rendered output files do not count; other accounts are not affected.
        await store.createFile({
          ...upload('file_out', 0),
          purpose: 'batch_output',
          bytes: null,
          kind: 'output',
        })
        expect(await reserve('file_5', 1000, 'acct_2')).toEqual({ kind: 'reserved', bytes: 1000 })
        await store.releaseUpload('file_2')
        expect(await store.getFileQuota('acct_1')).toMatchObject({
          filesInUse: 2,
          storedBytes: 400,
        })
        expect(await store.deleteFile('acct_1', 'file_1')).toBe(true)
        expect(await store.getFileQuota('acct_1')).toMatchObject({
          filesInUse: 1,
          storedBytes: 100,
        })
      })

      it('grows a reservation to what it wants if that fits, else to what it needs, else refuses', async () => {
        await account('acct_1')
        await reserve('file_1', 0)
        await store.commitUpload(upload('file_1', 500))
        await reserve('file_2', 100)
        expect(
          await store.growUpload(
            { fileId: 'file_2', need: 200, want: 300, nowMs: MS + 1 },
            defaults,
          ),
        ).toEqual({
          kind: 'reserved',
          bytes: 300,
        })
        expect(
          await store.growUpload(
            { fileId: 'file_2', need: 450, want: 1450, nowMs: MS + 2 },
            defaults,
          ),
        ).toEqual({
          kind: 'reserved',
          bytes: 450,
        })
        expect(
          await store.growUpload(
            { fileId: 'file_2', need: 501, want: 600, nowMs: MS + 3 },
            defaults,
          ),
        ).toEqual({
          kind: 'limit_exceeded',
          limit: { stored_bytes: 1000, in_use: 500 },
        })
        expect(
          await store.growUpload({ fileId: 'file_missing', need: 1, want: 1, nowMs: MS }, defaults),
        ).toEqual({ kind: 'gone' })
        expect(await store.getFileQuota('acct_1')).toMatchObject({
          filesInUse: 2,
          storedBytes: 950,
        })
      })

      it('racing reservations are counted one after another', async () => {
        await account('acct_1')
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) => reserve(`file_${i}`, 250)),
        )
        expect(results.filter((r) => r.kind === 'reserved')).toHaveLength(3)
        expect(await store.getFileQuota('acct_1')).toMatchObject({
          filesInUse: 3,
          storedBytes: 750,
        })
      })

      it('expires reservations not renewed since a time, and tells which ids it knows', async () => {
        await account('acct_1')
        await reserve('file_old', 10, 'acct_1', MS)
        await reserve('file_new', 10, 'acct_1', MS)
        await store.growUpload(
          { fileId: 'file_new', need: 10, want: 10, nowMs: MS + 60_000 },
          defaults,
        )
        await reserve('file_done', 10, 'acct_1', MS)
        await store.commitUpload(upload('file_done', 10))
        expect(
          await store.knownFileIds(['file_old', 'file_new', 'file_done', 'file_none']),
        ).toEqual(new Set(['file_old', 'file_new', 'file_done']))
        expect(await store.knownFileIds([])).toEqual(new Set())
        expect(await store.expireUploads(MS + 30_000, 10)).toEqual(['file_old'])
        expect(await store.expireUploads(MS + 30_000, 10)).toEqual([])
        expect(await store.commitUpload(upload('file_old', 10))).toBe(false)
        expect(await store.knownFileIds(['file_old', 'file_new'])).toEqual(new Set(['file_new']))
      })

      it("sets an account's own limits, and puts them back to the default with null", async () => {
        await account('acct_1')
        expect(await store.setFileQuota('acct_1', { maxFiles: 1 })).toBe(true)
        expect(await store.setFileQuota('acct_1', { maxStoredBytes: 20_000_000_000 })).toBe(true)
        expect(await store.getFileQuota('acct_1')).toMatchObject({
          maxFiles: 1,
          maxStoredBytes: 20_000_000_000,
        })
        expect(await reserve('file_1', 5000)).toEqual({ kind: 'reserved', bytes: 5000 })
        expect(await reserve('file_2', 0)).toEqual({
          kind: 'limit_exceeded',
          limit: { files: 1, in_use: 1 },
        })
        expect(await store.setFileQuota('acct_1', { maxFiles: null })).toBe(true)
        expect(await store.getFileQuota('acct_1')).toMatchObject({
          maxFiles: null,
          maxStoredBytes: 20_000_000_000,
        })
        expect(await store.setFileQuota('acct_missing', { maxFiles: 1 })).toBe(false)
      })
    })
  })
})
