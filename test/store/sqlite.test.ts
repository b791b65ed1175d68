import { describe, expect, test } from 'bun:test'
import { mkdtempSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { waitFor } from '../helpers/wait.ts'
import type { NewLine } from '../../src/store/store.ts'
import { lineList, newBatch, storeHelpers } from './batch-fixtures.ts'
import { MS } from './every-store.ts'

// The batch and dispatch contracts run on every store: batches.test.ts, dispatch.test.ts.

describe('sqlite file: opening', () => {
  test('connections opening a new file at the same moment all open it: none is refused as locked while another switches it to WAL', async () => {
    const threads = Array.from(
      { length: 4 },
      () => new Worker(new URL('../helpers/open-sqlite-worker.ts', import.meta.url).href),
    )
    try {
      const outcomes: string[] = []
      for (let round = 0; round < 10; round++) {
        const path = join(mkdtempSync(join(tmpdir(), 'mg-open-')), 'multigrid.sqlite')
        const replies = threads.map(
          (thread) =>
            new Promise<string>((resolve) => {
              thread.onmessage = (event) => resolve(event.data)
              thread.postMessage(path)
            }),
        )
        outcomes.push(...(await Promise.all(replies)))
      }
      expect(outcomes).toEqual(Array(40).fill('opened'))
    } finally {
      for (const thread of threads) thread.terminate()
    }
  })
})

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

describe('sqlite file: admission', () => {
  const account = {
    id: 'acct_1',
    name: 'a',
    creditUsd: '100',
    maxOpenBatches: 10,
    rateLimitPerMinute: 600,
    createdAt: 1,
  }

  /** The lines of `lines` as the gateway hands them over: their inputs in one shared body. */
  function inSharedBody(lines: NewLine[], ceilingUsd?: string): NewLine[] {
    const encoded = lines.map((line) => Buffer.from(line.input, 'utf8'))
    const body = new Uint8Array(
      new SharedArrayBuffer(encoded.reduce((sum, bytes) => sum + bytes.byteLength + 1, 0)),
    )
    let at = 0
    return lines.map((line, i) => {
      body.set(encoded[i], at)
      const inputBytes = body.subarray(at, (at += encoded[i].byteLength))
      at++
      return {
        lineNo: line.lineNo,
        customId: line.customId,
        input: line.input,
        inputBytes,
        ceilingUsd,
      }
    })
  }

  test("a batch's lines are stored on a thread of their own: the event loop turns meanwhile, and every line reads back as given", async () => {
    const { store } = createSqliteStore(mkdtempSync(join(tmpdir(), 'mg-admission-')))
    try {
      await store.createAccount(account)
      const plain = lineList(20_000)
      let turns = 0
      const ticking = setInterval(() => turns++, 1)
      const admitted = await store.admitBatch(
        newBatch('acct_1', 'batch_01', 20_000, { lines: plain }),
      )
      clearInterval(ticking)
      expect(admitted.kind).toBe('created')
      // On the event loop the insert would have run to its end before any timer fired.
      expect(turns).toBeGreaterThan(0)
      const shared = inSharedBody(lineList(3_000), '0.000123')
      const capped = await store.admitBatch(
        newBatch('acct_1', 'batch_02', 3_000, { lines: shared, maxCostUsd: '0.5' }),
      )
      expect(capped.kind).toBe('created')
      for (const [id, given] of [
        ['batch_01', plain],
        ['batch_02', shared],
      ] as const) {
        const stored = await store.readLines(id, { afterLineNo: 0, limit: 100_000, statuses: null })
        expect(stored.map((line) => [line.lineNo, line.customId, line.input])).toEqual(
          given.map((line) => [line.lineNo, line.customId, line.input]),
        )
      }
    } finally {
      await store.close()
    }
  })

  test('a refusal and an error come back from the thread as they would on the event loop', async () => {
    const { store } = createSqliteStore(mkdtempSync(join(tmpdir(), 'mg-admission-')))
    try {
      await store.createAccount({ ...account, creditUsd: '0.5' })
      const refused = await store.admitBatch(
        newBatch('acct_1', 'batch_01', 5, { costCeilingUsd: '2' }),
      )
      expect(refused).toEqual({ kind: 'insufficient_quota', availableUsd: '0.5' })
      const failed = await store.admitBatch(newBatch('acct_none', 'batch_02', 5)).then(
        () => null,
        (error: Error) => error.message,
      )
      expect(failed).toBe('account acct_none vanished during admission')
      // Nothing of either was stored.
      expect(await store.getBatch('acct_1', 'batch_01')).toBeNull()
    } finally {
      await store.close()
    }
  })
})

describe('sqlite file: reopened by the gateway that locks the data dir', () => {
  test('hands the lines a dead run leased back to pending at once, but leaves the lines of a provider batch to their chunk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mg-dead-run-'))
    let opened = createSqliteStore(dir)
    const { account, admit, claim, batchOf, allLines } = storeHelpers(() => opened)
    await account('acct_1')
    await admit('acct_1', 'batch_01', 6)
    // A run that died with lines 1–2 upstream, and a chunk of lines 3–4 in a provider batch.
    expect((await claim('batch_01', 'inst_dead', 2)).map((line) => line.lineNo)).toEqual([1, 2])
    expect((await claim('batch_01', 'chunk:c1', 2)).map((line) => line.lineNo)).toEqual([3, 4])
    await opened.store.close()
    const statuses = async () => (await allLines('batch_01')).map((line) => line.status)

    // The admin command line opens the store beside a running gateway: it leaves every lease.
    opened = createSqliteStore(dir)
    expect(await statuses()).toEqual([
      'running',
      'running',
      'running',
      'running',
      'pending',
      'pending',
    ])
    await opened.store.close()

    opened = createSqliteStore(dir, { dataDirLocked: true })
    try {
      expect(await statuses()).toEqual([
        'pending',
        'pending',
        'running',
        'running',
        'pending',
        'pending',
      ])
      // As the reaper leaves them: the attempt kept (the line may have been sent), the counts moved.
      expect((await allLines('batch_01')).map((line) => line.attempts)).toEqual([1, 1, 1, 1, 0, 0])
      expect((await batchOf('acct_1', 'batch_01')).counts).toMatchObject({ pending: 4, running: 2 })
      // The chunk still holds its lines, and the next claim takes the others.
      expect(await opened.dispatch.renewLeases('chunk:c1', MS + 120_000)).toBe(2)
      const next = await claim('batch_01', 'inst_new', 10)
      expect(next.map((line) => line.lineNo)).toEqual([1, 2, 5, 6])
    } finally {
      await opened.store.close()
    }
  })
})
