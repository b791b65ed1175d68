/**
 * A batch's lines as columns, to hand them to a thread in one message: numbers and custom_ids,
 * ceilings, and every input as a range of one byte buffer. Lines still in a body read into
 * shared memory (read-body.ts) keep pointing into it, so nothing is copied; any others are
 * copied into one buffer, handed over rather than cloned.
 */
import type { NewLine } from './batch-store.ts'

export interface LineColumns {
  bytes: Uint8Array
  starts: Int32Array
  ends: Int32Array
  lineNos: Int32Array
  customIds: string[]
  ceilings: (string | undefined)[]
  /** Each line's batch-lane mark (NewLine.batchLane); null when no line has one. */
  batchLanes: (string | undefined)[] | null
}

/** The columns of `lines`, and the buffers to transfer with them. */
export function toColumns(given: Iterable<NewLine>): {
  columns: LineColumns
  transfer: ArrayBuffer[]
} {
  const lines = Array.isArray(given) ? (given as NewLine[]) : [...given]
  const n = lines.length
  const starts = new Int32Array(n)
  const ends = new Int32Array(n)
  const lineNos = new Int32Array(n)
  const customIds = new Array<string>(n)
  const ceilings = new Array<string | undefined>(n)
  let batchLanes: (string | undefined)[] | null = null
  for (let i = 0; i < n; i++) {
    lineNos[i] = lines[i].lineNo
    customIds[i] = lines[i].customId
    ceilings[i] = lines[i].ceilingUsd
    if (lines[i].batchLane !== undefined) (batchLanes ??= new Array(n))[i] = lines[i].batchLane
  }
  const shared = sharedBody(lines)
  let bytes: Uint8Array
  if (shared) {
    bytes = new Uint8Array(shared)
    for (let i = 0; i < n; i++) {
      const input = lines[i].inputBytes!
      starts[i] = input.byteOffset
      ends[i] = input.byteOffset + input.byteLength
    }
  } else {
    const inputs = lines.map((line) => line.inputBytes ?? Buffer.from(line.input, 'utf8'))
    bytes = new Uint8Array(inputs.reduce((sum, input) => sum + input.byteLength, 0))
    let at = 0
    for (let i = 0; i < n; i++) {
      bytes.set(inputs[i], at)
      starts[i] = at
      ends[i] = at += inputs[i].byteLength
    }
  }
  const transfer = [starts.buffer, ends.buffer, lineNos.buffer]
  if (!shared) transfer.push(bytes.buffer as ArrayBuffer)
  return { columns: { bytes, starts, ends, lineNos, customIds, ceilings, batchLanes }, transfer }
}

/** The shared buffer every line's input bytes lie in, or null. */
function sharedBody(lines: NewLine[]): SharedArrayBuffer | null {
  const first = lines[0]?.inputBytes?.buffer
  if (!(first instanceof SharedArrayBuffer)) return null
  for (const line of lines) if (line.inputBytes?.buffer !== first) return null
  return first
}

/** The lines back from their columns, each reading its input where it lies. */
export function fromColumns(columns: LineColumns): NewLine[] {
  const lines = new Array<NewLine>(columns.lineNos.length)
  for (let i = 0; i < lines.length; i++) lines[i] = new ColumnLine(columns, i)
  return lines
}

class ColumnLine implements NewLine {
  readonly lineNo: number
  readonly customId: string
  readonly ceilingUsd?: string
  readonly batchLane?: string
  constructor(
    private readonly columns: LineColumns,
    private readonly at: number,
  ) {
    this.lineNo = columns.lineNos[at]
    this.customId = columns.customIds[at]
    this.ceilingUsd = columns.ceilings[at]
    this.batchLane = columns.batchLanes?.[at]
  }

  get inputBytes(): Uint8Array {
    return this.columns.bytes.subarray(this.columns.starts[this.at], this.columns.ends[this.at])
  }

  get input(): string {
    return Buffer.from(this.inputBytes).toString('utf8')
  }
}
