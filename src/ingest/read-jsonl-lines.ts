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
  // The common case, a valid file, is decoded once and sliced: slices share the decoded text,
  // which is faster and lighter than decoding 50,000 lines one by one.
  if (isUtf8(buffer)) yield* splitText(buffer.toString('utf8'))
  else yield* splitBytes(buffer)
}

function* splitText(text: string): Generator<RawLine> {
  let start = text.charCodeAt(0) === 0xfeff ? 1 : 0
  let lineNo = 0
  while (start <= text.length) {
    let end = text.indexOf('\n', start)
    if (end === -1) end = text.length
    lineNo++
    let stop = end
    if (stop > start && text.charCodeAt(stop - 1) === CR) stop--
    if (!isBlankText(text, start, stop)) yield { lineNo, text: text.slice(start, stop) }
    if (end === text.length) break
    start = end + 1
  }
}

function* splitBytes(buffer: Buffer): Generator<RawLine> {
  let start = buffer.length >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0
  let lineNo = 0
  while (start <= buffer.length) {
    let end = buffer.indexOf(NEWLINE, start)
    if (end === -1) end = buffer.length
    lineNo++
    let stop = end
    if (stop > start && buffer[stop - 1] === CR) stop--
    if (!isBlankBytes(buffer, start, stop)) {
      const line = buffer.subarray(start, stop)
      yield { lineNo, text: isUtf8(line) ? line.toString('utf8') : null }
    }
    if (end === buffer.length) break
    start = end + 1
  }
}

function isBlankText(text: string, start: number, stop: number) {
  for (let i = start; i < stop; i++) {
    const c = text.charCodeAt(i)
    if (c !== 0x20 && c !== 0x09 && c !== CR) return false
  }
  return true
}

function isBlankBytes(buffer: Buffer, start: number, stop: number) {
  for (let i = start; i < stop; i++) {
    const c = buffer[i]
    if (c !== 0x20 && c !== 0x09 && c !== CR) return false
  }
  return true
}
