/**
 * Validates a big file on two cores: the event loop checks the first half while a thread of its
 * own (validation-worker.ts) checks the second. Parsing 50,000 lines is most of an admission's
 * time, and the other core is usually idle while a file arrives.
 *
 * Only a file that turns out clean is put together from the halves: both halves without issues,
 * one endpoint, no custom_id in both, at most the line limit. Anything else is validated again
 * in one pass on the event loop, so the issues reported, their order and their count are exactly
 * those of validateBatchFile (a file with issues is refused, and its speed matters less).
 */
import { availableParallelism } from 'node:os'
import { NO_FINE_TUNES, type FineTuneLookup } from '../catalog/fine-tunes.ts'
import type { CatalogFile } from '../catalog/catalog-file.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { Money } from '../money/decimal.ts'
import { createThreadCalls, type ThreadCalls } from '../threads/thread-calls.ts'
import type { NewLine } from '../store/store.ts'
import { inlineSchemaChecks } from '../schemas/inline-checks.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import { fineTunesOverLimits } from './fine-tune-tally.ts'
import { compileFileSchemas } from './file-schemas.ts'
import { MAX_WARNINGS } from './issues.ts'
import type { BodyBuffers } from './read-body.ts'
import {
  checkLines,
  FileLine,
  fileVerdict,
  validateBatchFile,
  type CheckOptions,
  type FileLimits,
  type FileSchemas,
  type FileVerdict,
} from './validate-batch-file.ts'
import type { SegmentReply, ValidationRequest } from './validation-worker.ts'

export interface FileValidator {
  /**
   * `fineTunes`: the submitting account's active fine-tunes (none unless given). `options`: also
   * each line's own ceiling (a batch with a spend cap); `owner`, the submitting account, whose
   * schemas wait their turn on the schema threads with every other account's.
   */
  validate(
    bytes: Uint8Array,
    limits: FileLimits,
    fineTunes?: FineTuneLookup,
    options?: Pick<CheckOptions, 'lineCeilings'> & { owner?: string },
  ): Promise<FileVerdict>
  /**
   * How to read a file for this validator (readBody's `into`): one big enough to be split across
   * two threads goes into shared memory, handed to the thread as it is; any other file given to
   * `validate` is copied for the thread.
   */
  readonly bodyBuffers: BodyBuffers
  close(): Promise<void>
}

export interface FileValidatorOptions {
  /** Files smaller than this are validated in one pass (a message to the thread costs more than it saves). */
  minParallelBytes?: number
  /** Off: always one pass, as on a machine with one core. */
  parallel?: boolean
  /**
   * Told how each file was validated: in one pass; split in two; split, and then again in one pass
   * because the halves were not clean together; or split, and then in one pass because the thread
   * failed (`why`).
   */
  observe?: (how: ValidationPath, why?: string) => void
  /**
   * Called every few thousand lines on the event loop (CheckOptions.collectGarbage); when set, the
   * thread collects its own too (validation-worker.ts). Unset: neither collects.
   */
  collectGarbage?: () => void
  /**
   * Where the lines' json_schemas are compiled: the gateway's schema threads. Unset: on this
   * thread, without a budget (inline-checks.ts), for callers that see only their own schemas.
   */
  schemaChecks?: SchemaChecks
}

export type ValidationPath = 'one_pass' | 'split' | 'split_then_one_pass' | 'thread_failed'

const NEWLINE = 0x0a
const DEFAULT_MIN_PARALLEL_BYTES = 1024 * 1024

export function createFileValidator(
  catalog: Catalog,
  source: { catalog: CatalogFile; providerKeys: Record<string, string | null> },
  options: FileValidatorOptions = {},
): FileValidator {
  const minBytes = options.minParallelBytes ?? DEFAULT_MIN_PARALLEL_BYTES
  const parallel = options.parallel ?? availableParallelism() > 1
  const observe = options.observe ?? (() => {})
  const collectGarbage = options.collectGarbage
  const schemaChecks = options.schemaChecks ?? inlineSchemaChecks()
  let closed = false
  // Started now: loading its modules takes longer than validating half a file.
  const thread = parallel
    ? createThreadCalls<SegmentReply>(
        new URL('./validation-worker.ts', import.meta.url),
        'validation',
        (worker) =>
          worker.postMessage({
            kind: 'init',
            catalog: source.catalog,
            providerKeys: source.providerKeys,
            collectGarbage: options.collectGarbage !== undefined,
          } satisfies ValidationRequest),
      )
    : null

  return {
    bodyBuffers: sharedBodiesFrom(parallel ? minBytes : Infinity),
    async validate(
      bytes,
      limits,
      fineTunes = NO_FINE_TUNES,
      { lineCeilings = false, owner = '' } = {},
    ) {
      const verdict = await check(bytes, limits, fineTunes, lineCeilings)
      return compileFileSchemas(verdict, schemaChecks, owner)
    },
    async close() {
      // Validations under way finish in one pass; later ones are one pass from the start.
      closed = true
      thread?.terminate()
    },
  }

  async function check(
    bytes: Uint8Array,
    limits: FileLimits,
    fineTunes: FineTuneLookup,
    lineCeilings: boolean,
  ): Promise<FileVerdict> {
    const split = parallel && !closed && bytes.byteLength >= minBytes ? splitPoint(bytes) : -1
    const onePass = () =>
      validateBatchFile(bytes, catalog, limits, { collectGarbage, fineTunes, lineCeilings })
    if (split < 0) {
      observe('one_pass')
      return onePass()
    }
    const secondFirstLine = countLines(bytes, split) + 1
    const second = checkOnThread(thread!, bytes.subarray(split), {
      firstLineNo: secondFirstLine,
      limits,
      fineTunes,
      lineCeilings,
    })
    const first = checkLines(bytes, catalog, limits, {
      segment: { from: 0, to: split - 1, firstLineNo: 1 },
      collectGarbage,
      fineTunes,
      lineCeilings,
    })
    const other = await second
    const failed = 'failed' in other ? other.failed : undefined
    if (failed !== undefined || closed) {
      observe('thread_failed', failed ?? 'the validator was closed')
      return onePass()
    }
    const clean =
      other.clean &&
      first.issues.length === 0 &&
      first.endpoint !== null &&
      (other.endpoint === null || other.endpoint === first.endpoint) &&
      first.count + other.count <= limits.maxLines &&
      other.customIds.every((id) => !first.customIds.has(id)) &&
      // Each half within the base's fine-tune limits, and the two together too.
      (other.fineTuneIds.length === 0 ||
        !fineTunesOverLimits(
          [...first.fineTunes, ...other.fineTuneIds.map((id) => fineTunes.get(id)!)],
          catalog.find,
        ))
    if (!clean) {
      observe('split_then_one_pass')
      return onePass()
    }
    observe('split')
    const lines: NewLine[] = first.lines
    // One place for every line: FileLine copies it.
    const place = { lineNo: 0, start: 0, end: 0 }
    for (let i = 0; i < other.lineNos.length; i++) {
      place.lineNo = other.lineNos[i]
      place.start = split + other.starts[i]
      place.end = split + other.ends[i]
      lines.push(new FileLine(bytes, place, other.customIds[i], other.ceilings?.[i]))
    }
    const ceiling = first.ceiling.plus(new Money(other.ceiling))
    // In line order, as one pass lists them: the first half's, then the second's.
    const warnings = [...first.warnings, ...other.warnings]
    const listed = warnings.slice(0, MAX_WARNINGS)
    return fileVerdict({
      issues: [],
      omitted: 0,
      count: first.count + other.count,
      endpoint: first.endpoint,
      lines,
      ceiling,
      warnings: listed,
      warningsOmitted:
        first.warningsOmitted + other.warningsOmitted + warnings.length - listed.length,
      schemas: joinSchemas(first.schemas, other.schemas),
    })
  }
}

/** The second segment, checked on the thread; `failed` if the thread threw, died or was closed. */
function checkOnThread(
  thread: ThreadCalls<SegmentReply>,
  bytes: Uint8Array,
  {
    firstLineNo,
    limits,
    fineTunes,
    lineCeilings,
  }: { firstLineNo: number; limits: FileLimits; fineTunes: FineTuneLookup; lineCeilings: boolean },
): Promise<SegmentReply> {
  // Shared: the thread reads the body where it is. Otherwise a copy of its own, handed over
  // rather than copied again.
  const shared = bytes.buffer instanceof SharedArrayBuffer
  const sent = shared ? bytes : bytes.slice()
  return (
    thread
      .call(
        // Only the account's fine-tunes travel, and only when it has some: a few records at most.
        {
          kind: 'check',
          bytes: sent,
          firstLineNo,
          limits,
          fineTunes: fineTunes.size > 0 ? [...fineTunes.values()] : undefined,
          lineCeilings,
        },
        shared ? [] : [sent.buffer as ArrayBuffer],
      )
      // A thread that died answers nothing: the caller validates in one pass instead.
      .catch((error: Error) => ({ id: -1, clean: false, failed: error.message }))
  )
}

/** The first half's schemas with the second's added, each text once, its lines in order. */
function joinSchemas(
  first: FileSchemas,
  second: Extract<SegmentReply, { clean: true }>['schemas'],
): FileSchemas {
  for (const [text, users] of second) {
    const using = first.get(text)
    if (using) using.push(...users)
    else first.set(text, users)
  }
  return first
}

/** Bodies of at least `bytes` in shared memory, which a thread reads without a copy of its own. */
export function sharedBodiesFrom(bytes: number): BodyBuffers {
  return {
    wants: (size) => size >= bytes,
    allocate: (size) => new Uint8Array(new SharedArrayBuffer(size)),
  }
}

/** Just past the line break nearest the middle, or -1 if there is none. */
function splitPoint(bytes: Uint8Array): number {
  const at = bytes.indexOf(NEWLINE, bytes.byteLength >> 1)
  return at < 0 || at + 1 >= bytes.byteLength ? -1 : at + 1
}

/** Lines that end before `end`: line breaks in bytes[0, end). */
function countLines(bytes: Uint8Array, end: number): number {
  let count = 0
  for (let at = bytes.indexOf(NEWLINE); at >= 0 && at < end; at = bytes.indexOf(NEWLINE, at + 1))
    count++
  return count
}
