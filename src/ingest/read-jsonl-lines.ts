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
export function* readJsonlLines(bytes: Uint8Array): Generator<RawLine> {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // One fast pass over the whole file; only a file with bad bytes is checked line by line.
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
      const text = valid || isUtf8(buffer.subarray(start, stop)) ? buffer.toString('utf8', start, stop) : null
      yield { lineNo, text, start, end: stop }
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
