import { describe, expect, test } from 'bun:test'
import { mkdtempSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { waitFor } from '../helpers/wait.ts'
import { newBatch } from './batch-fixtures.ts'

// The batch and dispatch contracts run on every store: batches.test.ts, dispatch.test.ts.

describe('sqlite file: checkpoints', () => {
  test('the checkpoint thread copies the write-ahead log into the database file within seconds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mg-checkpoint-'))
    const { store } = createSqliteStore(dir)
    const file = join(dir, 'multigrid.sqlite')
    try {
      await store.createAccount({
        id: 'acct_1',
        name: 'a',
        creditUsd: '100',
        maxOpenBatches: 10,
        rateLimitPerMinute: 600,
        createdAt: 1,
      })
      // In WAL mode the database file is written only by checkpoints, and every connection but
      // the checkpoint thread's has them off.
      const before = statSync(file).size
      const admitted = await store.admitBatch(newBatch('acct_1', 'batch_01', 5_000))
      expect(admitted.kind).toBe('created')
      const grown = await waitFor(
        'a checkpoint',
        async () => {
          const size = statSync(file).size
          return size >= before + 512 * 1024 ? size : null
        },
        5_000,
      )
      expect(grown).toBeGreaterThanOrEqual(before + 512 * 1024)
    } finally {
      // A second close (a test closing the store, then the gateway's stop) returns at once.
      await store.close()
      await store.close()
    }
  })
})
