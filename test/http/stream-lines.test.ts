/**
 * A batch's lines streamed a page at a time (src/http/stream-lines.ts) give the event loop's
 * other work a turn between pages: on the embedded store a page's read answers at once, and a
 * download that read and rendered page after page held every other call of the instance until
 * it ended (bench/results.ts: /healthz waited 23 s behind 32 downloads at once).
 */
import { expect, test } from 'bun:test'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { streamLines } from '../../src/http/stream-lines.ts'
import { newBatch } from '../store/batch-fixtures.ts'

test('a download lets other work run between its pages, and still gives every line in order', async () => {
  const { store } = createSqliteStore(null)
  await store.createAccount({
    id: 'acct_1',
    name: 'a',
    creditUsd: '100',
    maxOpenBatches: 10,
    rateLimitPerMinute: 600,
    createdAt: 1,
  })
  expect((await store.admitBatch(newBatch('acct_1', 'batch_01', 3_000))).kind).toBe('created')
  // Work another call would queue: a macrotask that queues itself again while the download runs.
  let turns = 0
  let downloading = true
  const other = () => {
    if (!downloading) return
    turns++
    setImmediate(other)
  }
  setImmediate(other)
  const stream = streamLines(store, 'batch_01', null, (line) => String(line.lineNo))
  const text = await new Response(stream).text()
  downloading = false
  expect(text).toBe(Array.from({ length: 3_000 }, (_, i) => `${i + 1}\n`).join(''))
  // 3,000 lines are a dozen pages: the other work ran between them, not only after the last.
  expect(turns).toBeGreaterThanOrEqual(10)
})
