/**
 * Bulk insert of a batch's lines with `COPY … FROM STDIN`, streamed from the (possibly lazy)
 * iterable in chunks. 50,000 lines of ~300 bytes into sql/0001_init.sql's table, on a shared
 * 2-core machine: COPY 486–663 ms, multi-row INSERTs of 5,000 rows (`sql(rows, …columns)`)
 * 757–793 ms, `unnest` of arrays 708–802 ms. psql's own \copy of such a file took ≈ 200 ms into
 * the bare table and ≈ 475–600 ms with the primary key and the pending-lines index: the indexes,
 * not the client, set the floor.
 */
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type postgres from 'postgres'
import { lineCeiling } from './batch-rows.ts'
import type { NewLine } from './batch-store.ts'

/** What copyLines writes: a batch's lines. */
export interface LinesCopy {
  batchId: string
  lines: Iterable<NewLine>
  collectGarbage?: () => void
  /** Also each line's own ceiling (a batch with a spend cap). */
  withCeilings?: boolean
}

/** About this much COPY data per write. */
const CHUNK_BYTES = 256 * 1024
/** Each chunk is copied once more by the driver: the garbage hook is called every 4 MiB of data. */
const COLLECT_EVERY_CHUNKS = 16

// COPY's text format: backslash, newline, carriage return and tab are escaped; JSON text may
// hold backslashes (string escapes) and tabs (whitespace between tokens).
const BACKSLASH = 0x5c
const TAB = 0x09
const NEWLINE = 0x0a
/** COPY's text format for NULL. */
const NULL_FIELD = Buffer.from('\\N', 'latin1')
/** The letter after the backslash for each byte COPY escapes; 0 for bytes copied as they are. */
const ESCAPED_BYTE = new Uint8Array(256)
ESCAPED_BYTE[0x5c] = 0x5c
ESCAPED_BYTE[0x0a] = 0x6e // n
ESCAPED_BYTE[0x0d] = 0x72 // r
ESCAPED_BYTE[0x09] = 0x74 // t

/** Writes `source` into `target` at `at`, COPY-escaped; returns the new end. */
function putEscaped(target: Buffer, at: number, source: Uint8Array): number {
  for (let i = 0; i < source.length; i++) {
    const byte = source[i]
    const escaped = ESCAPED_BYTE[byte]
    if (escaped === 0) target[at++] = byte
    else {
      target[at++] = BACKSLASH
      target[at++] = escaped
    }
  }
  return at
}

/**
 * Inserts every line of `lines` into `lines` for `batchId`; returns how many. Rows are written
 * as bytes: a line that is still in the submitted body goes from there into the COPY data
 * without being decoded into a string on the way. `collectGarbage`, if given, is called every few
 * megabytes of COPY data, which is short-lived garbage once the driver has sent it.
 */
export async function copyLines(
  tx: postgres.TransactionSql,
  { batchId, lines, collectGarbage, withCeilings = false }: LinesCopy,
): Promise<{ count: number; laneLines: boolean }> {
  let count = 0
  let laneLines = false
  const batchBytes = Buffer.from(batchId, 'utf8')
  function* chunks(): Generator<Buffer> {
    let chunk = Buffer.allocUnsafe(CHUNK_BYTES)
    let used = 0
    let yielded = 0
    for (const line of lines) {
      if (!Number.isSafeInteger(line.lineNo))
        throw new Error(`line number ${line.lineNo} is not an integer`)
      const customId = Buffer.from(line.customId, 'utf8')
      const input = line.inputBytes ?? Buffer.from(line.input, 'utf8')
      const lane = line.batchLane === undefined ? null : Buffer.from(line.batchLane, 'utf8')
      if (lane !== null) laneLines = true
      // Every text byte may double when escaped; a line number is at most 16 digits.
      const ceiling = withCeilings ? lineCeiling(line) : ''
      const texts = batchBytes.length + customId.length + input.length + (lane?.length ?? 2)
      const worst = texts * 2 + 16 + 6 + ceiling.length
      if (used + worst > chunk.length) {
        if (used > 0) yield chunk.subarray(0, used)
        if (++yielded % COLLECT_EVERY_CHUNKS === 0) collectGarbage?.()
        chunk = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, worst))
        used = 0
      }
      used = putEscaped(chunk, used, batchBytes)
      chunk[used++] = TAB
      used += chunk.write(String(line.lineNo), used, 'latin1')
      chunk[used++] = TAB
      used = putEscaped(chunk, used, customId)
      chunk[used++] = TAB
      used = putEscaped(chunk, used, input)
      chunk[used++] = TAB
      used = lane === null ? used + NULL_FIELD.copy(chunk, used) : putEscaped(chunk, used, lane)
      if (withCeilings) {
        chunk[used++] = TAB
        used += chunk.write(ceiling, used, 'latin1')
      }
      chunk[used++] = NEWLINE
      count++
    }
    if (used > 0) yield chunk.subarray(0, used)
  }
  const query = withCeilings
    ? tx`COPY lines (batch_id, line_no, custom_id, input, batch_lane, ceiling_usd) FROM STDIN`
    : tx`COPY lines (batch_id, line_no, custom_id, input, batch_lane) FROM STDIN`
  const rejected = serverRejection(query)
  const writable = await query.writable()
  const copied = pipeline(Readable.from(chunks()), writable)
  copied.catch(() => {}) // may settle after the race below: handled there or moot
  await Promise.race([copied, rejected])
  return { count, laneLines }
}

/**
 * postgres 3.4.9 never settles a COPY's writable when the server rejects the data after the last
 * chunk went out (a duplicate line, a bad byte): the transaction would wait forever holding the
 * account lock, and its connection would be lost (porsager/postgres#1173, unmerged fix #1183).
 * The server's error still reaches the query's `reject`, so we listen there too.
 */
function serverRejection(query: postgres.PendingQuery<postgres.Row[]>): Promise<never> {
  const hooked = query as unknown as { reject: (error: unknown) => void }
  const rejected = new Promise<never>((_, reject) => {
    const original = hooked.reject
    hooked.reject = (error) => {
      reject(error)
      original(error)
    }
  })
  rejected.catch(() => {}) // the race in copyLines reports it; a late one is moot
  return rejected
}
