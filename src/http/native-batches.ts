/** The native raw-JSONL batch API (docs/native-api.md): submit, read, list, cancel, results. */
import { Elysia } from 'elysia'
import { z } from 'zod'
import { answerOf, unanswered, type AdmissionAnswer } from '../admission/admission-answer.ts'
import type { Admission } from '../admission/submit-batch.ts'
import {
  isDryRun,
  optionalFlag,
  isGzipped,
  submitFile,
  type FileSubmit,
  type FileSubmitResult,
} from '../admission/submit-file.ts'
import type { Authenticator } from '../auth/authenticate.ts'
import type { BatchRecord, LineStatus } from '../domain.ts'
import { badRequest, notFound, refuse } from '../errors.ts'
import { cancelBatch } from '../admission/cancel-batch.ts'
import { retryBatch, UNSUCCESSFUL } from '../admission/retry-batch.ts'
import { readBody, readJsonBody, type BodyBuffers, type BodyLimit } from '../ingest/read-body.ts'
import type { AccountStore, BatchStore } from '../store/store.ts'
import { charactersAtMost, storableText } from '../schemas/text.ts'
import { MAX_WINDOW_HOURS, wholeNumberText } from '../schemas/whole-number.ts'
import { maxCostUsdText } from '../schemas/money-text.ts'
import { excerpt } from '../excerpt.ts'
import { parseFields, parseQuery, queryFields, refuseUnknownFields } from './parse-query.ts'
import { renderBatch, renderResultLine } from './render-native.ts'
import { streamLines } from './stream-lines.ts'
import { eventStreamResponse, type EventStreamSettings } from './event-stream-response.ts'
import { renderPage } from './render-page.ts'
import { callerMacro, type Caller } from './caller-macro.ts'

/** A batch's label, its `name`. */
const MAX_NAME_CHARACTERS = 256

/** A submit's options, as query parameters here and as form fields on the dashboard. */
export const submitOptions = z.object({
  name: storableText()
    .refine((text) => charactersAtMost(text, MAX_NAME_CHARACTERS), {
      message: `must be at most ${MAX_NAME_CHARACTERS} characters`,
      params: { fix: `shorten name to ${MAX_NAME_CHARACTERS} characters or fewer` },
    })
    // The refinement is invisible to JSON Schema; maxLength counts code points there too.
    .meta({ maxLength: MAX_NAME_CHARACTERS })
    .optional(),
  completion_window_hours: wholeNumberText(1, MAX_WINDOW_HOURS, 24).default(24),
  dry_run: z.enum(['true', 'false', '1', '0']).optional(),
  // docs/open-models.md: a hold the credit does not cover yet waits for a deposit instead of a 402.
  wait_for_credit: z.enum(['true', 'false', '1', '0']).optional(),
  /** The batch's spend cap (docs/money-and-limits.md). */
  max_cost_usd: maxCostUsdText().optional(),
})

const nameOnly = submitOptions.pick({ name: true })

/**
 * A header's value as the client wrote it: headers reach here as Latin-1, so a UTF-8 label sent
 * raw (curl -H 'X-Multigrid-Batch-Name: été') is decoded again; bytes that are not UTF-8 stay as
 * they came.
 */
function headerText(value: string | null): string | null {
  if (value === null || !/[\u0080-\u00ff]/.test(value) || /[^\u0000-\u00ff]/.test(value))
    return value
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(value, 'latin1'))
  } catch {
    return value
  }
}

export const listQuery = z.object({
  limit: wholeNumberText(1, 100, 100).default(100),
  after: z.string().min(1).optional(),
})

export const resultsQuery = z.object({
  filter: z.enum(['failed', 'succeeded']).optional(),
  format: z.enum(['results', 'input']).default('results'),
})

export const FILTERS: Record<'failed' | 'succeeded', readonly LineStatus[]> = {
  failed: UNSUCCESSFUL,
  succeeded: ['succeeded'],
}

const ACCEPTED_TYPES = [
  'application/jsonl',
  'application/x-ndjson',
  'text/plain',
  'application/json',
  'application/x-www-form-urlencoded',
  'application/octet-stream',
  'text/jsonl',
  'application/x-jsonlines',
]

export interface NativeDeps {
  auth: Authenticator
  store: BatchStore & AccountStore
  admission: Admission
  maxBodyBytes: number
  /** The submit's body limit (maxBodyBytes, with its message; body-limits.ts). */
  bodyLimit: BodyLimit
  /** A retry's body limit (a few options). */
  retryLimit: BodyLimit
  /** Where the submitted file is read into: the file validator's choice (FileValidator.bodyBuffers). */
  fileBuffers?: BodyBuffers
  /** Tells this instance's dispatcher at once, so lines waiting for a slot are not sent. */
  onCancelled?: (batchId: string, linesCancelled: number) => void
  /** The progress streams' change signals and timing (docs/events-and-webhooks.md). */
  events: EventStreamSettings
}

export function nativeBatchRoutes(deps: NativeDeps) {
  const { auth, store, admission, onCancelled, events } = deps
  const renderWithShares = async (batch: BatchRecord) =>
    renderBatch(batch, (await store.providerShares([batch.id])).get(batch.id))
  /** A new batch as it was made; one an idempotency key found, with its shares so far. */
  const renderAnswer = (answer: Extract<AdmissionAnswer, { kind: 'batch' }>, set: Settable) => {
    set.status = answer.status
    return answer.status === 201 ? renderBatch(answer.batch) : renderWithShares(answer.batch)
  }

  return new Elysia({ name: 'native-batches' })
    .use(callerMacro(auth))
    .post(
      '/v1/batches',
      async ({ request, set, caller }) => {
        const { bytes, submit } = await readSubmit(request, caller, deps)
        const answer = await submitFile(admission, bytes, submit)
        switch (answer.kind) {
          case 'quote':
            return renderQuote(answer)
          case 'invalid':
            throw invalidFile(answer, problemsInFile)
          case 'refused':
            throw answer.error
          case 'batch':
            return renderAnswer(answer, set)
          default:
            return unanswered(answer)
        }
      },
      { parse: 'none', caller: 'batches' },
    )
    .get(
      '/v1/batches',
      async ({ request, caller }) => {
        const query = parseQuery(listQuery, request.url)
        const page = await store.listBatches(caller.account.id, {
          limit: query.limit,
          after: query.after ?? null,
        })
        const shares = await store.providerShares(page.batches.map((batch) => batch.id))
        const data = page.batches.map((batch) => renderBatch(batch, shares.get(batch.id)))
        return renderPage(data, page.hasMore, (item) => item.id)
      },
      { caller: 'read' },
    )
    .get(
      '/v1/batches/:id',
      async ({ params, caller }) => renderWithShares(await findBatch(store, caller, params.id)),
      { caller: 'read' },
    )
    .delete(
      '/v1/batches/:id',
      async ({ params, caller }) =>
        renderWithShares(await cancelBatch(store, caller.account.id, params.id, { onCancelled })),
      { parse: 'none', caller: 'batches' },
    )
    .post(
      '/v1/batches/:id/retry',
      async ({ request, set, params, caller }) => {
        const options = await readRetryOptions(request, deps.retryLimit)
        const result = await retryBatch(store, admission, params.id, {
          accountId: caller.account.id,
          completionWindowHours: options.completion_window_hours ?? null,
          maxCostUsd: options.max_cost_usd ?? null,
          idempotencyKey: request.headers.get('idempotency-key'),
          waitForCredit: optionalFlag(options.wait_for_credit),
        })
        const answer = answerOf(result)
        switch (answer.kind) {
          case 'invalid':
            throw invalidFile(answer, problemsInRetry)
          case 'refused':
            throw answer.error
          case 'batch':
            return renderAnswer(answer, set)
          default:
            return unanswered(answer)
        }
      },
      { parse: 'none', caller: 'batches' },
    )
    .get(
      '/v1/batches/:id/events',
      async ({ request, params, server, caller, answerHeaders }) => {
        const batch = await findBatch(store, caller, params.id)
        const authorization = request.headers.get('authorization')
        return eventStreamResponse(request, server, batch, {
          ...events,
          read: () => store.getBatch(caller.account.id, batch.id),
          render: renderWithShares,
          headers: answerHeaders,
          keyId: caller.key.id,
          check: {
            id: `key:${caller.key.id}`,
            stillValid: () => auth.stillValid(authorization, caller.key.id),
          },
        })
      },
      { caller: 'read' },
    )
    .get(
      '/v1/batches/:id/results',
      async ({ request, params, caller, answerHeaders }) => {
        const batch = await findBatch(store, caller, params.id)
        // On every answer about the batch, a refused query or deleted results included.
        answerHeaders['x-multigrid-batch-status'] = batch.status
        // A parameter it does not take is refused: `?status=failed&format=input` would otherwise
        // answer every line, and a resubmit of that file runs and bills them all again.
        const fields = queryFields(new URL(request.url).searchParams)
        refuseUnknownFields(fields, Object.keys(resultsQuery.shape), 'query parameter')
        const query = parseFields(resultsQuery, fields, 'query parameter')
        if (batch.purgedAt !== null) {
          throw refuse(
            'results_expired',
            `the results of batch ${batch.id} were deleted when its retention period ended; the batch's counts and cost remain`,
          )
        }
        const statuses = query.filter ? FILTERS[query.filter] : null
        const render =
          query.format === 'input' ? (line: { input: string }) => line.input : renderResultLine
        return new Response(streamLines(store, batch.id, statuses, render), {
          headers: { ...answerHeaders, 'content-type': 'application/jsonl' },
        })
      },
      { caller: 'read' },
    )
}

const problemsInFile = (count: number) =>
  `${count} problem${count === 1 ? '' : 's'} in the file; nothing was submitted`
const problemsInRetry = (count: number) =>
  `${count} of the lines to retry ${count === 1 ? 'is' : 'are'} no longer valid (line numbers are the batch's own); nothing was submitted`

type Settable = { status?: number | string }

/** The caller's batch, or 404. */
async function findBatch(store: BatchStore, caller: Caller, id: string) {
  const batch = await store.getBatch(caller.account.id, id)
  if (!batch) throw notFound(`batch ${excerpt(id)}`)
  return batch
}

/** The 400 that lists a file's (or a retry's) line-numbered issues; nothing was submitted. */
function invalidFile(
  answer: Extract<AdmissionAnswer, { kind: 'invalid' }>,
  say: (count: number) => string,
) {
  return refuse('invalid_batch_file', say(answer.issues.length + answer.omitted), {
    extra: { issues: answer.issues, issues_omitted: answer.omitted },
  })
}

function renderQuote(quote: Extract<FileSubmitResult, { kind: 'quote' }>) {
  return {
    object: 'batch.quote',
    dry_run: true,
    line_count: quote.lineCount,
    cost_ceiling_usd: quote.costCeilingUsd,
    max_cost_usd: quote.maxCostUsd,
    available_usd: quote.availableUsd,
    credit_sufficient: quote.creditSufficient,
    daily_limit_sufficient: quote.dailyLimitSufficient,
    warnings: quote.warnings,
    warnings_omitted: quote.warningsOmitted,
  }
}

/**
 * A submit's file and options: the type is checked before the body is read, the body within its
 * limit, and the name (query or X-Multigrid-Batch-Name) by the rule every stored label obeys.
 */
async function readSubmit(
  request: Request,
  caller: Caller,
  deps: Pick<NativeDeps, 'bodyLimit' | 'fileBuffers'>,
): Promise<{ bytes: Uint8Array; submit: FileSubmit }> {
  const fields = queryFields(new URL(request.url).searchParams)
  refuseUnknownFields(fields, Object.keys(submitOptions.shape), 'query parameter')
  const query = parseFields(submitOptions, fields, 'query parameter')
  const type = (request.headers.get('content-type') ?? 'application/jsonl')
    .split(';')[0]
    .trim()
    .toLowerCase()
  if (type.startsWith('multipart/')) {
    throw refuse(
      'unsupported_media_type',
      'this endpoint takes the JSONL file itself as the body, not a form upload: send it with curl --data-binary @requests.jsonl -H "Content-Type: application/jsonl" (multipart uploads belong to /openai/v1/files)',
      { param: 'content-type' },
    )
  }
  if (!ACCEPTED_TYPES.includes(type)) {
    throw refuse(
      'unsupported_media_type',
      `Content-Type ${excerpt(type)} is not accepted; send the file as application/jsonl`,
      { param: 'content-type' },
    )
  }
  // A declared Content-Encoding other than identity is refused (415) before reading.
  const bytes = await readBody(request, deps.bodyLimit, { into: deps.fileBuffers })
  if (isGzipped(bytes)) {
    throw badRequest(
      'the body is compressed; send the JSONL file uncompressed (curl --data-binary @requests.jsonl)',
      null,
      'compressed_body',
    )
  }
  if (type === 'application/json') rejectOpenAiShapedCreate(bytes)
  // The header does what the query parameter does, held to the same rules.
  const header = headerText(request.headers.get('x-multigrid-batch-name'))
  const name =
    query.name ?? (header === null ? null : parseFields(nameOnly, { name: header }).name!)
  const submit: FileSubmit = {
    accountId: caller.account.id,
    name: name ?? null,
    completionWindowHours: query.completion_window_hours,
    idempotencyKey: request.headers.get('idempotency-key'),
    // Unset: admission's default (a window of 72 hours or more waits for a top-up).
    waitForCredit: optionalFlag(query.wait_for_credit),
    maxCostUsd: query.max_cost_usd ?? null,
    dryRun: isDryRun(query.dry_run),
  }
  return { bytes, submit }
}

/**
 * A retry's options (docs/events-and-webhooks.md), from a JSON body or the query (as a submit takes them); the
 * body's win. Unknown fields are refused, so a misspelt one is not silently ignored.
 */
export const retryOptions = z.object({
  completion_window_hours: wholeNumberText(1, MAX_WINDOW_HOURS, 24).optional(),
  // The child's own spend cap (docs/money-and-limits.md), by the submit's rule.
  max_cost_usd: maxCostUsdText().optional(),
  // As a submit's (docs/open-models.md): unset, a window of 72 hours or more waits for a top-up.
  wait_for_credit: submitOptions.shape.wait_for_credit,
})

async function readRetryOptions(request: Request, limit: BodyLimit) {
  const read = await readJsonBody(request, limit)
  if (
    !read.ok ||
    (read.value !== undefined &&
      (typeof read.value !== 'object' || read.value === null || Array.isArray(read.value)))
  ) {
    throw badRequest(
      'the body must be empty or a JSON object such as {"completion_window_hours": 24}',
    )
  }
  const fields = {
    ...queryFields(new URL(request.url).searchParams),
    ...(read.value as object | undefined),
  }
  const unknown = Object.keys(fields).find((name) => !Object.hasOwn(retryOptions.shape, name))
  if (unknown !== undefined) {
    throw badRequest(
      `a retry takes no ${excerpt(unknown)}: send only completion_window_hours, max_cost_usd and wait_for_credit (the lines and their bodies come from the batch retried)`,
      excerpt(unknown),
    )
  }
  // A number or boolean in JSON is held to the rule its text in a query is: 24, not 24.5 or 1e1.
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'number' || typeof value === 'boolean')
      (fields as Record<string, unknown>)[name] = String(value)
  }
  const options = parseFields(retryOptions, fields as Record<string, string>)
  return options
}

/** An OpenAI SDK pointed at the wrong base URL sends `{"input_file_id": …}`: say where to go. */
function rejectOpenAiShapedCreate(bytes: Uint8Array) {
  if (bytes.byteLength > 64 * 1024) return
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder().decode(bytes))
  } catch {
    return
  }
  if (json && typeof json === 'object' && 'input_file_id' in json) {
    throw badRequest(
      'this is the raw-JSONL batch endpoint; an OpenAI-style create with input_file_id belongs to the OpenAI-compatible API: set base_url to <gateway>/openai/v1, or send the JSONL file itself here with curl --data-binary',
      'input_file_id',
      'wrong_api_surface',
    )
  }
}
