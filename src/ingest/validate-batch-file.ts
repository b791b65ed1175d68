/**
 * Validates a whole batch file: every line's envelope and body, one endpoint for the file, unique
 * custom_ids, the line limit. Collects at most 25 issues (and counts the rest) and, when there
 * are none, the lines to store and the batch's cost ceiling.
 */
import { z } from 'zod'
import { NO_FINE_TUNES, type FineTuneLookup, type FineTuneRecord } from '../catalog/fine-tunes.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { endpointOf } from '../catalog/catalog.ts'
import { laneMark } from '../catalog/lane-mark.ts'
import type { Routing } from '../schemas/requests.ts'
import { offeringsTaking } from '../catalog/speaks-api.ts'
import {
  BATCH_URLS,
  isBatchUrl,
  MESSAGES_URL,
  RESPONSES_URL,
  type BatchEndpoint,
} from '../domain.ts'
import { askedAsChat, TranslationProblem, type AskedApi } from './asked-as-chat.ts'
import { CeilingTally } from '../pricing/ceiling.ts'
import { ceilingUnits } from '../pricing/ceiling-rates.ts'
import { unitsText } from '../money/fixed-point.ts'
import { compileSchema } from '../schemas/compile.ts'
import { storableText } from '../schemas/text.ts'
import { Money } from '../money/decimal.ts'
import type { NewLine } from '../store/store.ts'
import { excerpt } from '../excerpt.ts'
import {
  COMMON_JSON_MISTAKES,
  describeZodIssue,
  kindOf,
  MAX_ISSUES,
  MAX_WARNINGS,
  type BodyProblem,
  type Issue,
  type Warning,
} from './issues.ts'
import { MAX_JSON_DEPTH } from './json-depth.ts'
import { readJsonlLines, type FileSegment, type RawLine } from './read-jsonl-lines.ts'
import { FineTuneTally } from './fine-tune-tally.ts'
import { validateBody } from './validate-body.ts'
import { bareBodyProblem } from './bare-body.ts'

/**
 * A line that uses a json_schema; `api` when it is a Responses line (named text.format) or a
 * Messages one (named output_config.format).
 */
export interface SchemaUser {
  line: number
  customId: string | null
  api?: AskedApi
}

/** Each distinct json_schema text of a file, and the lines that use it (file-schemas.ts compiles them). */
export type FileSchemas = Map<string, SchemaUser[]>

export interface FileLimits {
  maxLines: number
  maxCustomIdLength: number
  /** Lines may be Messages API requests (`/v1/messages`): a Message Batches create, or its retry. */
  messagesUrl?: boolean
}

export type FileVerdict =
  | {
      ok: true
      endpoint: BatchEndpoint
      lines: NewLine[]
      ceiling: Money
      /** What a dry run points out (the first MAX_WARNINGS, and how many more). */
      warnings: Warning[]
      warningsOmitted: number
      /** The valid lines' json_schemas, not yet compiled (file-schemas.ts compiles them). */
      schemas?: FileSchemas
    }
  | { ok: false; issues: Issue[]; omitted: number; lineCount: number; schemas?: FileSchemas }

/** The garbage hook (CheckOptions.collectGarbage) is called once per this many lines. */
const COLLECT_EVERY = 2048

export interface CheckOptions {
  /** Only these lines of the file (whole lines; see FileSegment). Unset: the whole file. */
  segment?: FileSegment
  /**
   * Called every few thousand lines: each line's parse leaves a kilobyte or two of short-lived
   * garbage, and the process that runs the check may want it collected sooner than its collector
   * would (the gateway's is src/memory/young-garbage.ts). Unset: nothing is done.
   */
  collectGarbage?: () => void
  /**
   * Also price each valid line on its own (FileLine.ceilingUsd), exactly: a batch with a spend
   * cap stores every line's ceiling, which the claim checks against the cap (docs/money-and-limits.md).
   */
  lineCeilings?: boolean
  /** The submitting account's active fine-tunes, which `ft:` model ids are looked up in. */
  fineTunes?: FineTuneLookup
}

export function lineEnvelopeSchema(maxCustomIdLength: number, messagesUrl = false) {
  return z.strictObject({
    // PostgreSQL text cannot hold U+0000, and no one means it in an id.
    custom_id: storableText().min(1).max(maxCustomIdLength),
    method: z.literal('POST'),
    url: messagesUrl ? z.enum([...BATCH_URLS, MESSAGES_URL]) : z.enum(BATCH_URLS),
    body: z.unknown(),
  })
}

const compiledEnvelopes = new Map<string, ReturnType<typeof compileSchema>>()
function envelopeFor({ maxCustomIdLength, messagesUrl = false }: FileLimits) {
  const key = `${maxCustomIdLength}:${messagesUrl}`
  let compiled = compiledEnvelopes.get(key)
  if (!compiled) {
    compiled = compileSchema(lineEnvelopeSchema(maxCustomIdLength, messagesUrl))
    compiledEnvelopes.set(key, compiled)
  }
  return compiled
}

/** The API a line in a provider's own API came in (asked-as-chat.ts); null for chat and embeddings. */
const askedApi = (url: BatchEndpoint): AskedApi | null =>
  url === RESPONSES_URL ? 'responses' : url === MESSAGES_URL ? 'messages' : null

/**
 * A valid line, kept as its place in the submitted body rather than as a string: 50,000 decoded
 * lines would hold the file's size again, twice over for text outside Latin-1.
 */
export class FileLine implements NewLine {
  readonly lineNo: number
  readonly start: number
  readonly end: number

  readonly ceilingUsd?: string
  readonly batchLane?: string

  /**
   * `place`: the line's number and where its bytes are in `file`, copied (so one object may be
   * reused for many lines). `own`: its own ceiling, exact, when asked for
   * (CheckOptions.lineCeilings), and the batch lane it is marked for (NewLine.batchLane).
   */
  constructor(
    private readonly file: Uint8Array,
    place: Pick<RawLine, 'lineNo' | 'start' | 'end'>,
    readonly customId: string,
    own?: { ceilingUsd?: string; batchLane?: string },
  ) {
    this.lineNo = place.lineNo
    this.start = place.start
    this.end = place.end
    if (own?.ceilingUsd !== undefined) this.ceilingUsd = own.ceilingUsd
    if (own?.batchLane !== undefined) this.batchLane = own.batchLane
  }

  get inputBytes(): Uint8Array {
    return this.file.subarray(this.start, this.end)
  }

  get input(): string {
    const bytes = this.inputBytes
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')
  }
}

/**
 * What checking some lines of a file found: its issues (the first MAX_ISSUES, and how many more),
 * its valid lines, their ceiling before rounding, the first endpoint and each custom_id's line.
 */
export interface LinesChecked {
  issues: Issue[]
  omitted: number
  count: number
  endpoint: BatchEndpoint | null
  lines: NewLine[]
  /** The ceiling of the valid lines, exact (not yet rounded up to the micro-dollar). */
  ceiling: Money
  customIds: Map<string, number>
  /** The distinct fine-tunes the valid lines name, in order of first use. */
  fineTunes: FineTuneRecord[]
  /** The valid lines' warnings, the first MAX_WARNINGS of them, and how many more. */
  warnings: Warning[]
  warningsOmitted: number
  /** The valid lines' json_schemas, each distinct text once, not yet compiled. */
  schemas: FileSchemas
}

export function validateBatchFile(
  bytes: Uint8Array,
  catalog: Catalog,
  limits: FileLimits,
  options: Pick<CheckOptions, 'collectGarbage' | 'fineTunes' | 'lineCeilings'> = {},
): FileVerdict {
  const checked = checkLines(bytes, catalog, limits, options)
  if (checked.count === 0) {
    checked.issues.push({
      line: 1,
      custom_id: null,
      path: '',
      message: 'the file has no requests',
      // Said for every surface: the native body, an uploaded file (the facade's).
      fix: 'put one request per line, {"custom_id": …, "method": "POST", "url": …, "body": {…}}; an empty file or blank lines hold none',
    })
  }
  return fileVerdict(checked)
}

/** The verdict on a whole file from what checking all its lines found. */
export function fileVerdict(checked: Omit<LinesChecked, 'customIds' | 'fineTunes'>): FileVerdict {
  const { issues, omitted, count, endpoint, schemas } = checked
  if (issues.length > 0 || !endpoint)
    return { ok: false, issues, omitted, lineCount: count, schemas }
  return {
    ok: true,
    endpoint,
    lines: checked.lines,
    ceiling: checked.ceiling.toDecimalPlaces(6, Money.ROUND_UP),
    warnings: checked.warnings,
    warningsOmitted: checked.warningsOmitted,
    schemas,
  }
}

/**
 * Checks the lines of a file, or of one segment of it (whole lines; see FileSegment): each line
 * on its own and against the lines before it in the same segment.
 */
export function checkLines(
  bytes: Uint8Array,
  catalog: Catalog,
  limits: FileLimits,
  options: CheckOptions = {},
): LinesChecked {
  const { segment, collectGarbage, lineCeilings } = options
  const fineTuneLookup = options.fineTunes ?? NO_FINE_TUNES
  const fineTunes = new FineTuneTally()
  const envelope = envelopeFor(limits)
  const issues: Issue[] = []
  let omitted = 0
  const report = (issue: Issue) => {
    if (issues.length < MAX_ISSUES) issues.push(issue)
    else omitted++
  }
  const warnings: Warning[] = []
  let warningsOmitted = 0
  const lines: NewLine[] = []
  const schemas: FileSchemas = new Map()
  const seen = new Map<string, number>()
  const tally = new CeilingTally()
  let endpoint: { url: BatchEndpoint; line: number } | null = null
  let count = 0
  // Built once for the whole check: a line's body check allocates no options of its own.
  const deepOptions = { prefix: 'body', shallow: false, fineTunes: fineTuneLookup }
  const shallowOptions = { prefix: 'body', shallow: true, fineTunes: fineTuneLookup }

  for (const line of readJsonlLines(bytes, segment)) {
    const { lineNo, text } = line
    count++
    if (collectGarbage && count % COLLECT_EVERY === 0) collectGarbage()
    if (count > limits.maxLines) {
      report({
        line: lineNo,
        custom_id: null,
        path: '',
        message: `the file has more than ${limits.maxLines} requests`,
        fix: `split it into files of at most ${limits.maxLines} lines and submit each`,
      })
      break
    }
    const record = readObject(text, lineNo, report)
    if (record === null && opensWholeFile(text, count, segment)) break
    if (record === null) continue
    const customId = typeof record.custom_id === 'string' ? record.custom_id : null
    // An issue names its line's custom_id so it zips against the input; one too long to be valid
    // is cut to an excerpt, so a refusal never carries a megabyte of it back.
    const shownId = customId === null ? null : excerpt(customId, limits.maxCustomIdLength)
    const lineIssue = (p: { path: string; message: string; fix: string; code?: string }) =>
      report({ line: lineNo, custom_id: shownId, ...p })
    const bare = bareBodyProblem(record, catalog)
    if (bare) {
      lineIssue(bare)
      continue
    }
    const parsed = envelope.check(record)
    let bad = !parsed.success
    if (!parsed.success) for (const issue of parsed.issues) lineIssue(describeZodIssue(issue, ''))
    const duplicate = customId ? usedBefore(seen, customId, lineNo) : null
    if (duplicate) lineIssue(duplicate)
    bad ||= duplicate !== null
    const url = record.url
    if (isBatchUrl(url, limits.messagesUrl)) {
      if (!endpoint) endpoint = { url, line: lineNo }
      else if (url !== endpoint.url) {
        bad = true
        lineIssue({
          path: 'url',
          message: `must be the same on every line; line ${endpoint.line} uses ${endpoint.url}`,
          fix: `set url to ${endpoint.url}, or submit ${url} lines as a separate batch`,
        })
        continue
      }
      if (record.body === undefined) continue // the envelope said it is required
      // A Responses or Messages line is held to the rules of the chat call it translates to
      // (docs/clients/responses.md, docs/clients/anthropic-sdk.md).
      const api = askedApi(url)
      const asked = api ? askedAsChat(api, record.body, catalog) : null
      if (asked instanceof TranslationProblem) {
        lineIssue(asked.problem)
        continue
      }
      const request = asked ? asked.chat : record.body
      const untranslated = asked?.untranslated
      const untranslatedApi = untranslated ? api! : null
      // Nesting deeper than the limit takes two brackets a level: most lines are too short to.
      // (`text` is a string here: readObject parsed it.)
      const options = text!.length <= 2 * MAX_JSON_DEPTH ? shallowOptions : deepOptions
      const body = validateBody(request, endpointOf(url), catalog, options)
      if (!body.ok) {
        for (const problem of body.problems) lineIssue(asked ? asked.terms(problem) : problem)
        continue
      }
      // Outside the translated subset, a line needs an offering that takes it as it came.
      const { offerings } = body.value
      if (untranslated && !offeringsTaking(catalog, offerings, { api: api!, untranslated })) {
        lineIssue(untranslated.problem)
        continue
      }
      if (bad) continue
      const { fineTune, model } = body.value
      if (fineTune) {
        // The base's limits on one batch's fine-tunes, each named once, at the line that passes it.
        const passed = fineTunes.add(fineTune, model)
        if (passed) lineIssue({ path: 'body.model', ...passed })
        if (passed || fineTunes.over(model)) continue
      }
      for (const warning of body.value.warnings) {
        if (warnings.length >= MAX_WARNINGS) warningsOmitted++
        else {
          const { path: param, message, fix } = asked ? asked.terms(warning) : warning
          warnings.push({ line: lineNo, custom_id: shownId, param, message, fix })
        }
      }
      const { rates, inputTokens, outputTokens, capBound } = body.value
      tally.add(rates, inputTokens, outputTokens)
      const ceiling = lineCeilings
        ? unitsText(ceilingUnits({ input: inputTokens, output: outputTokens }, rates))
        : undefined
      // A line its own routing sends to a batch lane is marked for it; a fine-tune's never goes there.
      const routing = (body.value.body as { provider?: Routing }).provider
      const batchLane = fineTune
        ? undefined
        : laneMark(catalog, { model, routing, capBound }, untranslatedApi)
      lines.push(new FileLine(bytes, line, customId!, { ceilingUsd: ceiling, batchLane }))
      const schemaText = body.value.schemaText
      if (schemaText !== undefined) {
        const user: SchemaUser = { line: lineNo, customId: shownId }
        if (api) user.api = api
        noteSchema(schemas, schemaText, user)
      }
    }
  }

  return {
    issues,
    omitted,
    count,
    endpoint: endpoint?.url ?? null,
    lines,
    ceiling: tally.exactTotal(),
    customIds: seen,
    fineTunes: fineTunes.all(),
    warnings,
    warningsOmitted,
    schemas,
  }
}

/** The issue for a custom_id an earlier line has, or null (and the id is noted as this line's). */
function usedBefore(
  seen: Map<string, number>,
  customId: string,
  lineNo: number,
): BodyProblem | null {
  const first = seen.get(customId)
  if (first === undefined) {
    seen.set(customId, lineNo)
    return null
  }
  return {
    path: 'custom_id',
    message: `${JSON.stringify(excerpt(customId))} is already used on line ${first}`,
    fix: 'give every line its own custom_id',
  }
}

/**
 * Whether this line, the file's first, opens a JSON array (`jq -s .` writes one) or an object
 * spread over lines (a pretty-printed request): the file is one JSON value, not lines, which that
 * line's issue says with its fix; every line after it would only add issues with wrong fixes (a
 * pretty-printed array's `{` lines are not files of their own, nor an object's `"model": …`).
 */
function opensWholeFile(text: string | null, count: number, segment: FileSegment | undefined) {
  if (count !== 1 || (segment?.firstLineNo ?? 1) !== 1 || text === null) return false
  const trimmed = text.trim()
  return trimmed.startsWith('[') || trimmed === '{'
}

/** How to turn a JSON file into JSONL. */
const ONE_PER_LINE = "turn it into lines with jq -c '.[]' requests.json > requests.jsonl"

/**
 * What a line that is not JSON most likely is, when it is a common way to get JSONL wrong: the
 * start of a JSON array or of an object spread over lines (a pretty-printed file), or several
 * objects on one line (curl -d, which drops a file's newlines). The issue then says how to send
 * it, rather than only where the parser stopped.
 */
function notJsonlHint(text: string): { message: string; fix: string } | null {
  const trimmed = text.trim()
  if (trimmed.startsWith('['))
    return {
      message: 'starts a JSON array: a JSONL file has one request object per line, not an array',
      fix: ONE_PER_LINE,
    }
  if (trimmed === '{')
    return {
      message: 'starts a JSON object spread over several lines (a pretty-printed file)',
      fix: 'put each request on one line of its own: jq -c . requests.json > requests.jsonl',
    }
  if (trimmed.startsWith('{') && /\}\s*\{/.test(trimmed) && severalObjects(trimmed))
    return {
      message:
        'holds more than one JSON object: the newlines between the requests are missing (curl -d removes them)',
      fix: 'send the file as it is, with curl --data-binary @requests.jsonl',
    }
  return null
}

/** Whether `text` is JSON objects one after another, with nothing between them but spaces. */
function severalObjects(text: string): boolean {
  try {
    const values = JSON.parse(`[${text.replace(/\}\s*\{/g, '},{')}]`) as unknown[]
    return values.every((value) => typeof value === 'object' && value !== null)
  } catch {
    return false
  }
}

/**
 * A line's text as a JSON object, or null when it is not one (not UTF-8, not JSON, or another
 * JSON value), which is reported.
 */
function readObject(
  text: string | null,
  lineNo: number,
  report: (issue: Issue) => void,
): Record<string, unknown> | null {
  if (text === null) {
    report({
      line: lineNo,
      custom_id: null,
      path: '',
      message: 'is not valid UTF-8',
      fix: 'save the file as UTF-8',
    })
    return null
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    report({
      line: lineNo,
      custom_id: null,
      path: '',
      ...(notJsonlHint(text) ?? {
        message: `is not valid JSON (${(error as Error).message})`,
        fix: `put exactly one complete JSON object on each line (${COMMON_JSON_MISTAKES})`,
      }),
    })
    return null
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    report({
      line: lineNo,
      custom_id: null,
      path: '',
      message: `must be a JSON object; got ${kindOf(json)}`,
      fix: Array.isArray(json)
        ? `a JSONL file has one request object per line, not an array of them: ${ONE_PER_LINE}`
        : 'write each line as {"custom_id": …, "method": "POST", "url": …, "body": {…}}',
    })
    return null
  }
  return json as Record<string, unknown>
}

/** A valid line's json_schema text, under the lines that use it (compiled once per text). */
function noteSchema(schemas: FileSchemas, text: string, user: SchemaUser) {
  const using = schemas.get(text)
  if (using) using.push(user)
  else schemas.set(text, [user])
}
