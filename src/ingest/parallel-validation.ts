/**
 * Validates a big file on two cores, off the event loop: two threads of their own
 * (validation-worker.ts) check one half each. Parsing 50,000 lines is most of an admission's
 * time; on the event loop, half of it held every other call for about 100 ms a 16 MiB file.
 *
 * Only a file that turns out clean is put together from the halves: both halves without issues,
 * one endpoint, no custom_id in both, at most the line limit. Anything else is validated again
 * in one pass, on a thread too, so the issues reported, their order and their count are exactly
 * those of validateBatchFile (an invalid file costs its sender nothing, so it must not cost the
 * event loop either). Only when a thread fails is a file checked on the event loop.
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
   * because the halves were not clean together; whole on one thread (no line break past its
   * middle), and then its issues listed there if it had any; or in one pass because the thread
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

export type ValidationPath =
  'one_pass' | 'split' | 'split_then_one_pass' | 'whole' | 'whole_then_issues' | 'thread_failed'

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
  // Started now: loading their modules takes longer than validating half a file.
  const startThread = () =>
    createThreadCalls<SegmentReply>(
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
  const threads = parallel ? [startThread(), startThread()] : null

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
      for (const thread of threads ?? []) thread.terminate()
    },
  }

  async function check(
    bytes: Uint8Array,
    limits: FileLimits,
    fineTunes: FineTuneLookup,
    lineCeilings: boolean,
  ): Promise<FileVerdict> {
    const onePass = () =>
      validateBatchFile(bytes, catalog, limits, { collectGarbage, fineTunes, lineCeilings })
    if (!parallel || closed || bytes.byteLength < minBytes) {
      observe('one_pass')
      return onePass()
    }
    // A file with no line break past its middle (one giant line) is checked whole, on a thread
    // too: in one pass on the event loop, a 15 MB line held every other call for 0.3 s.
    const split = splitPoint(bytes)
    const whole = split < 0
    const asked = { limits, fineTunes, lineCeilings }
    const parts = whole ? [bytes] : [bytes.subarray(0, split), bytes.subarray(split)]
    const replies = await Promise.all(
      parts.map((part, i) =>
        checkOnThread(threads![i], 'check', part, {
          firstLineNo: i === 0 ? 1 : countLines(bytes, split) + 1,
          ...asked,
        }),
      ),
    )
    const failed = replies.find((reply) => 'failed' in reply)
    if (failed !== undefined || closed) {
      observe(
        'thread_failed',
        failed && 'failed' in failed ? failed.failed : 'the validator was closed',
      )
      return onePass()
    }
    const [first, second] = replies
    if (
      !('lineNos' in first!) ||
      (second !== undefined && !('lineNos' in second)) ||
      !cleanTogether(first, second, limits, fineTunes)
    ) {
      observe(whole ? 'whole_then_issues' : 'split_then_one_pass')
      // The issues of one pass, listed on a thread; on the event loop only if that thread failed.
      const listed = await checkOnThread(threads![0], 'issues', bytes, { firstLineNo: 1, ...asked })
      if (!('issues' in listed) || closed) return onePass()
      const { issues, omitted, lineCount } = listed
      return { ok: false, issues, omitted, lineCount, schemas: new Map(listed.schemas) }
    }
    observe(whole ? 'whole' : 'split')
    const halves = second === undefined ? [first] : [first, second as CleanHalf]
    const lines = halves.flatMap((half, i) => halfLines(bytes, i === 0 ? 0 : split, half))
    const ceiling = halves.reduce((sum, half) => sum.plus(new Money(half.ceiling)), new Money(0))
    // In line order, as one pass lists them: the first half's, then the second's.
    const warnings = halves.flatMap((half) => half.warnings)
    const listed = warnings.slice(0, MAX_WARNINGS)
    return fileVerdict({
      issues: [],
      omitted: 0,
      count: halves.reduce((sum, half) => sum + half.count, 0),
      endpoint: first.endpoint,
      lines,
      ceiling,
      warnings: listed,
      warningsOmitted:
        halves.reduce((sum, half) => sum + half.warningsOmitted, 0) +
        warnings.length -
        listed.length,
      schemas: halves
        .slice(1)
        .reduce((joined, half) => joinSchemas(joined, half.schemas), new Map(first.schemas)),
    })
  }

  /** Two clean halves make a clean file: one endpoint, no custom_id in both, the limits kept. */
  function cleanTogether(
    first: CleanHalf,
    second: CleanHalf | undefined,
    limits: FileLimits,
    fineTunes: FineTuneLookup,
  ): boolean {
    if (first.endpoint === null) return false
    if (second === undefined) return true
    if (second.endpoint !== null && second.endpoint !== first.endpoint) return false
    if (first.count + second.count > limits.maxLines) return false
    const ids = new Set(first.customIds)
    if (second.customIds.some((id) => ids.has(id))) return false
    // Each half within the base's fine-tune limits, and the two together too.
    const named = [...first.fineTuneIds, ...second.fineTuneIds]
    return (
      second.fineTuneIds.length === 0 ||
      !fineTunesOverLimits(
        named.map((id) => fineTunes.get(id)!),
        catalog.find,
      )
    )
  }
}

type CleanHalf = Extract<SegmentReply, { clean: true }>

/** A half's valid lines, its offsets counted from `base` in the file's bytes. */
function halfLines(bytes: Uint8Array, base: number, half: CleanHalf): NewLine[] {
  const lines = new Array<NewLine>(half.lineNos.length)
  // One place for every line: FileLine copies it.
  const place = { lineNo: 0, start: 0, end: 0 }
  for (let i = 0; i < lines.length; i++) {
    place.lineNo = half.lineNos[i]
    place.start = base + half.starts[i]
    place.end = base + half.ends[i]
    lines[i] = new FileLine(bytes, place, half.customIds[i], {
      ceilingUsd: half.ceilings?.[i],
      batchLane: half.batchLanes?.[i],
    })
  }
  return lines
}

/**
 * A segment checked on a thread (`check`), or a whole file's issues listed there (`issues`);
 * `failed` if the thread threw, died or was closed.
 */
function checkOnThread(
  thread: ThreadCalls<SegmentReply>,
  kind: 'check' | 'issues',
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
          kind,
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
