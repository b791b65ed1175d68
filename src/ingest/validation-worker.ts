/**
 * A validation thread (parallel-validation.ts): two of them check the halves of a big file while
 * the event loop stays free. Replies to a `check` with the valid lines as offsets into the bytes
 * it was sent, or only that there were issues; to an `issues` request (the whole file, once the
 * halves were not clean together) with the issues of one pass.
 */
import type { FineTuneRecord } from '../catalog/fine-tunes.ts'
import type { CatalogFile } from '../catalog/catalog-file.ts'
import { createCatalog, type Catalog } from '../catalog/catalog.ts'
import type { BatchEndpoint } from '../domain.ts'
import { collectYoungGarbage } from '../memory/young-garbage.ts'
import { nameThread } from '../threads/thread-name.ts'
import type { Issue, Warning } from './issues.ts'
import {
  checkLines,
  FileLine,
  validateBatchFile,
  type FileLimits,
  type SchemaUser,
} from './validate-batch-file.ts'

export type ValidationRequest =
  | {
      kind: 'init'
      catalog: CatalogFile
      providerKeys: Record<string, string | null>
      /**
       * Whether this thread collects its garbage (young garbage as it checks, everything after each
       * check): the caller was given a garbage hook (FileValidatorOptions.collectGarbage).
       */
      collectGarbage: boolean
    }
  | {
      kind: 'check'
      id: number
      bytes: Uint8Array
      firstLineNo: number
      limits: FileLimits
      /** CheckOptions.lineCeilings */
      lineCeilings: boolean
      /** The submitting account's active fine-tunes; absent when it has none. */
      fineTunes?: FineTuneRecord[]
    }
  | {
      /** A whole file whose halves were not clean together: its issues in one pass. */
      kind: 'issues'
      id: number
      bytes: Uint8Array
      limits: FileLimits
      lineCeilings: boolean
      fineTunes?: FineTuneRecord[]
    }

/**
 * The valid lines as offsets; or that the segment was not clean; or, with `failed`, that checking
 * it threw (the caller validates in one pass either way).
 */
export type SegmentReply =
  | {
      id: number
      clean: true
      count: number
      endpoint: BatchEndpoint | null
      lineNos: Int32Array
      starts: Int32Array
      ends: Int32Array
      customIds: string[]
      /** Each valid line's own ceiling, when asked for (CheckOptions.lineCeilings). */
      ceilings: string[] | null
      /** Each valid line's batch-lane mark (NewLine.batchLane); null when no line has one. */
      batchLanes: (string | undefined)[] | null
      /** The distinct fine-tunes the valid lines name (the caller checks both halves' together). */
      fineTuneIds: string[]
      /** The valid lines' ceiling, exact, as decimal text. */
      ceiling: string
      /** The segment's warnings (its first MAX_WARNINGS), and how many more. */
      warnings: Warning[]
      warningsOmitted: number
      /** The valid lines' json_schemas (FileSchemas as entries), compiled by the caller. */
      schemas: [string, SchemaUser[]][]
    }
  | { id: number; clean: false; failed?: string }
  | {
      id: number
      clean: false
      /** The whole file's issues in one pass (an `issues` request), as validateBatchFile lists them. */
      issues: Issue[]
      omitted: number
      lineCount: number
      schemas: [string, SchemaUser[]][]
    }

declare const self: Worker
let catalog: Catalog | null = null
let collectGarbage: (() => void) | undefined

nameThread('mg-validate')

self.onmessage = (event: MessageEvent<ValidationRequest>) => {
  const request = event.data
  if (request.kind === 'init') {
    catalog = createCatalog(request.catalog, request.providerKeys)
    if (request.collectGarbage) collectGarbage = collectYoungGarbage
    return
  }
  if (request.kind === 'issues') listIssues(request)
  else check(request)
  // The bytes may be the caller's shared body: collected once this handler has returned (nothing
  // on the stack then holds them), not at this idle thread's next allocation, so that a body is
  // not kept alive here after its batch was stored. Only for a caller that collects garbage.
  if (collectGarbage) setTimeout(() => Bun.gc(true), 0)
}

function check(request: Extract<ValidationRequest, { kind: 'check' }>) {
  const { id, bytes, firstLineNo, limits, lineCeilings } = request
  try {
    const checked = checkLines(bytes, catalog!, limits, {
      segment: { from: 0, to: bytes.byteLength, firstLineNo },
      collectGarbage,
      fineTunes: request.fineTunes ? new Map(request.fineTunes.map((a) => [a.id, a])) : undefined,
      lineCeilings,
    })
    if (checked.issues.length > 0) {
      self.postMessage({ id, clean: false } satisfies SegmentReply)
      return
    }
    const n = checked.lines.length
    const lineNos = new Int32Array(n)
    const starts = new Int32Array(n)
    const ends = new Int32Array(n)
    const customIds = new Array<string>(n)
    const ceilings = lineCeilings ? new Array<string>(n) : null
    let batchLanes: (string | undefined)[] | null = null
    for (let i = 0; i < n; i++) {
      const line = checked.lines[i] as FileLine
      lineNos[i] = line.lineNo
      starts[i] = line.start
      ends[i] = line.end
      customIds[i] = line.customId
      if (ceilings) ceilings[i] = line.ceilingUsd!
      if (line.batchLane !== undefined) (batchLanes ??= new Array(n))[i] = line.batchLane
    }
    const reply: SegmentReply = {
      id,
      clean: true,
      count: checked.count,
      endpoint: checked.endpoint,
      lineNos,
      starts,
      ends,
      customIds,
      ceilings,
      batchLanes,
      fineTuneIds: checked.fineTunes.map((fineTune) => fineTune.id),
      ceiling: checked.ceiling.toFixed(),
      warnings: checked.warnings,
      warningsOmitted: checked.warningsOmitted,
      schemas: [...checked.schemas],
    }
    self.postMessage(reply, [lineNos.buffer, starts.buffer, ends.buffer])
  } catch (error) {
    // The caller validates the whole file in one pass, and reports what that finds.
    self.postMessage({ id, clean: false, failed: String(error) } satisfies SegmentReply)
  }
}

/** The whole file in one pass: its issues, or `failed` if it has none (the caller then checks it itself). */
function listIssues(request: Extract<ValidationRequest, { kind: 'issues' }>) {
  const { id, bytes, limits, lineCeilings } = request
  try {
    const verdict = validateBatchFile(bytes, catalog!, limits, {
      collectGarbage,
      fineTunes: request.fineTunes ? new Map(request.fineTunes.map((a) => [a.id, a])) : undefined,
      lineCeilings,
    })
    if (verdict.ok) {
      self.postMessage({
        id,
        clean: false,
        failed: 'the file is clean in one pass',
      } satisfies SegmentReply)
      return
    }
    const { issues, omitted, lineCount } = verdict
    const schemas = [...(verdict.schemas ?? [])]
    self.postMessage({
      id,
      clean: false,
      issues,
      omitted,
      lineCount,
      schemas,
    } satisfies SegmentReply)
  } catch (error) {
    self.postMessage({ id, clean: false, failed: String(error) } satisfies SegmentReply)
  }
}
