/**
 * Bytes → numbered lines. Line numbers count every line, blank ones too, so they match what an
 * editor shows. A UTF-8 BOM and CRLF endings are accepted. Invalid UTF-8 is reported per line
 * rather than failing the whole file, so the user learns which line to fix.
 */
import { isUtf8 } from 'node:buffer'

export interface RawLine {
  lineNo: number
  /** null when the line is not valid UTF-8. */
  text: string | null
}

const NEWLINE = 0x0a
const CR = 0x0d

/** Yields the non-blank lines of a JSONL file. */
export function* readJsonlLines(bytes: Uint8Array): Generator<RawLine> {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // One vectorised check for the whole file; only a file that fails it is checked line by line.
  const valid = isUtf8(buffer)
  let start = buffer.length >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0
  let lineNo = 0
  while (start <= buffer.length) {
    let end = buffer.indexOf(NEWLINE, start)
    if (end === -1) end = buffer.length
    lineNo++
    let stop = end
    if (stop > start && buffer[stop - 1] === CR) stop--
    if (!isBlank(buffer, start, stop)) {
      const ok = valid || isUtf8(buffer.subarray(start, stop))
      yield { lineNo, text: ok ? buffer.toString('utf8', start, stop) : null }
    }
    if (end === buffer.length) break
    start = end + 1
  }
}

function isBlank(buffer: Buffer, start: number, stop: number) {
  for (let i = start; i < stop; i++) {
    const c = buffer[i]
    if (c !== 0x20 && c !== 0x09 && c !== CR) return false
  }
  return true
}
