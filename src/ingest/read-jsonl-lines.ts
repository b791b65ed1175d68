/**
 * Bytes → numbered lines. Line numbers count every line, blank ones too, so they match what an
 * editor shows. A UTF-8 BOM and CRLF endings are accepted. Invalid UTF-8 is reported per line
 * rather than failing the whole file, so the user learns which line to fix.
 */
import { isUtf8 } from 'node:buffer'

export interface RawLine {
  lineNo: number
  /** The line's text, decoded on its own; null when the line is not valid UTF-8. */
  text: string | null
  /** Where the line's bytes are in the file: BOM, line break and CR left out. */
  start: number
  end: number
}

const NEWLINE = 0x0a
const CR = 0x0d

/**
 * Yields the non-blank lines of a JSONL file. Each line is decoded on its own and can be
 * dropped once checked: decoding the whole file into one string and slicing it kept that string
 * (twice the file's size once any character is outside Latin-1) alive until the last line was
 * stored, and was slower too, since JSON.parse is faster on the one-byte strings most lines give.
 */
/**
 * A part of a file made of whole lines: from a line's first byte to `to` (a line break or the
 * end of the file, not included), whose first line is line `firstLineNo` of the file.
 */
export interface FileSegment {
  from: number
  to: number
  firstLineNo: number
}

export function* readJsonlLines(bytes: Uint8Array, segment?: FileSegment): Generator<RawLine> {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const to = segment?.to ?? buffer.length
  let start = segment?.from ?? 0
  // One fast pass over the whole part; only one with bad bytes is checked line by line.
  const valid = isUtf8(buffer.subarray(start, to))
  let lineNo = (segment?.firstLineNo ?? 1) - 1
  // A byte order mark only at the start of the file, not at the start of a later segment.
  if (
    lineNo === 0 &&
    start === 0 &&
    to >= 3 &&
    buffer[0] === 0xef &&
    buffer[1] === 0xbb &&
    buffer[2] === 0xbf
  )
    start = 3
  while (start <= to) {
    let end = buffer.indexOf(NEWLINE, start)
    if (end === -1 || end > to) end = to
    lineNo++
    let stop = end
    if (stop > start && buffer[stop - 1] === CR) stop--
    if (!isBlank(buffer, start, stop)) {
      const text =
        valid || isUtf8(buffer.subarray(start, stop)) ? buffer.toString('utf8', start, stop) : null
      yield { lineNo, text, start, end: stop }
    }
    if (end === to) break
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
