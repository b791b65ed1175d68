/** The native raw-JSONL batch API (docs/native-api.md): submit, read, list, cancel, results. */
import { Elysia } from 'elysia'
import { z } from 'zod'
import { answerOf, unanswered } from '../admission/admission-answer.ts'
import { LONG_WINDOW_HOURS, type Admission, type SubmitOptions } from '../admission/submit-batch.ts'
import type { Authenticator } from '../auth/authenticate.ts'
import type { BatchRecord, LineStatus } from '../domain.ts'
import { badRequest, notFound, refuse } from '../errors.ts'
import { cancelBatch } from '../admission/cancel-batch.ts'
import { retryBatch, UNSUCCESSFUL } from '../admission/retry-batch.ts'
import { readBody, readJsonBody, type BodyBuffers, type BodyLimit } from '../ingest/read-body.ts'
import type { AccountStore, BatchStore } from '../store/store.ts'
import { storableText } from '../schemas/text.ts'
import { MAX_WINDOW_HOURS, wholeNumberText } from '../schemas/whole-number.ts'
import { maxCostUsdText } from '../schemas/money-text.ts'
import { excerpt } from '../excerpt.ts'
import { parseFields, parseQuery } from './parse-query.ts'
import { renderBatch, renderResultLine } from './render-native.ts'
import { streamLines } from './stream-lines.ts'
import { eventStreamResponse, type EventStreamSettings } from './event-stream-response.ts'
import { renderPage } from './render-page.ts'

/** A submit's options, as query parameters here and as form fields on the dashboard. */
export const submitOptions = z.object({
  name: storableText().max(256).optional(),
  completion_window_hours: wholeNumberText(1, MAX_WINDOW_HOURS, 24).default(24),
  dry_run: z.enum(['true', 'false', '1', '0']).optional(),
  // docs/open-models.md: a hold the credit does not cover yet waits for a deposit instead of a 402.
  wait_for_credit: z.enum(['true', 'false', '1', '0']).optional(),
  /** The batch's spend cap (docs/money-and-limits.md). */
  max_cost_usd: maxCostUsdText().optional(),
})

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
  onCancelled?: (batchId: string) => void
  /** The progress streams' change signals and timing (docs/events-and-webhooks.md). */
  events: EventStreamSettings
}

export function nativeBatchRoutes({
  auth,
  store,
  admission,
  bodyLimit,
  retryLimit,
  fileBuffers,
  onCancelled,
  events,
}: NativeDeps) {
  const renderWithShares = async (batch: BatchRecord) =>
    renderBatch(batch, (await store.providerShares([batch.id])).get(batch.id))

  return new Elysia({ name: 'native-batches' })
    .post(
      '/v1/batches',
      async ({ request, set }) => {
        const caller = await auth.authenticate(
          request.headers.get('authorization'),
          'batches',
          set.headers as Record<string, string>,
        )
        const query = parseQuery(submitOptions, request.url)
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
        const bytes = await readBody(request, bodyLimit, { into: fileBuffers })
        if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
          throw badRequest(
            'the body is compressed; send the JSONL file uncompressed (curl --data-binary @requests.jsonl)',
            null,
            'compressed_body',
          )
        }
        if (type === 'application/json') rejectOpenAiShapedCreate(bytes)
        const name = query.name ?? request.headers.get('x-multigrid-batch-name')
        if (name !== null && name.length > 256)
          throw badRequest('name must be at most 256 characters', 'name')
        // As for custom_id: PostgreSQL text cannot hold U+0000, and no one means it in a label.
        if (name?.includes('\u0000'))
          throw badRequest('name must not contain the NUL character (%00); remove it', 'name')
        const options: SubmitOptions = {
          accountId: caller.account.id,
          name: name ?? null,
          completionWindowHours: query.completion_window_hours,
          idempotencyKey: request.headers.get('idempotency-key'),
          source: 'native',
          metadata: null,
          inputFileId: null,
          // docs/open-models.md: a window of 72 hours or more waits for a top-up unless told not to.
          waitForCredit:
            query.wait_for_credit === undefined
              ? query.completion_window_hours >= LONG_WINDOW_HOURS
              : query.wait_for_credit === 'true' || query.wait_for_credit === '1',
          maxCostUsd: query.max_cost_usd ?? null,
        }
        const dryRun = query.dry_run === 'true' || query.dry_run === '1'
        const result = dryRun
          ? await admission.quote(bytes, options)
          : await admission.submit(bytes, options)
        if (result.kind === 'quote') {
          return {
            object: 'batch.quote',
            dry_run: true,
            line_count: result.lineCount,
            cost_ceiling_usd: result.costCeilingUsd,
            max_cost_usd: result.maxCostUsd,
            available_usd: result.availableUsd,
            credit_sufficient: result.creditSufficient,
            warnings: result.warnings,
            warnings_omitted: result.warningsOmitted,
          }
        }
        const answer = answerOf(result)
        switch (answer.kind) {
          case 'invalid': {
            const count = answer.issues.length + answer.omitted
            throw refuse(
              'invalid_batch_file',
              `${count} problem${count === 1 ? '' : 's'} in the file; nothing was submitted`,
              { extra: { issues: answer.issues, issues_omitted: answer.omitted } },
            )
          }
          case 'refused':
            throw answer.error
          case 'batch':
            set.status = answer.status
            return answer.status === 201
              ? renderBatch(answer.batch)
              : renderWithShares(answer.batch)
          default:
            return unanswered(answer)
        }
      },
      { parse: 'none' },
    )
    .get('/v1/batches', async ({ request, set }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'read',
        set.headers as Record<string, string>,
      )
      const query = parseQuery(listQuery, request.url)
      const page = await store.listBatches(caller.account.id, {
        limit: query.limit,
        after: query.after ?? null,
      })
      const shares = await store.providerShares(page.batches.map((batch) => batch.id))
      const data = page.batches.map((batch) => renderBatch(batch, shares.get(batch.id)))
      return renderPage(data, page.hasMore, (item) => item.id)
    })
    .get('/v1/batches/:id', async ({ request, set, params }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'read',
        set.headers as Record<string, string>,
      )
      const batch = await store.getBatch(caller.account.id, params.id)
      if (!batch) throw notFound(`batch ${excerpt(params.id)}`)
      return renderWithShares(batch)
    })
    .delete(
      '/v1/batches/:id',
      async ({ request, set, params }) => {
        const caller = await auth.authenticate(
          request.headers.get('authorization'),
          'batches',
          set.headers as Record<string, string>,
        )
        return renderWithShares(await cancelBatch(store, caller.account.id, params.id, onCancelled))
      },
      { parse: 'none' },
    )
    .post(
      '/v1/batches/:id/retry',
      async ({ request, set, params }) => {
        const caller = await auth.authenticate(
          request.headers.get('authorization'),
          'batches',
          set.headers as Record<string, string>,
        )
        const options = await readRetryOptions(request, retryLimit)
        const result = await retryBatch(store, admission, params.id, {
          accountId: caller.account.id,
          completionWindowHours: options.completion_window_hours ?? null,
          maxCostUsd: options.max_cost_usd ?? null,
          idempotencyKey: request.headers.get('idempotency-key'),
        })
        const answer = answerOf(result)
        switch (answer.kind) {
          case 'invalid': {
            const count = answer.issues.length + answer.omitted
            throw refuse(
              'invalid_batch_file',
              `${count} of the lines to retry ${count === 1 ? 'is' : 'are'} no longer valid (line numbers are the batch's own); nothing was submitted`,
              { extra: { issues: answer.issues, issues_omitted: answer.omitted } },
            )
          }
          case 'refused':
            throw answer.error
          case 'batch':
            set.status = answer.status
            return answer.status === 201
              ? renderBatch(answer.batch)
              : renderWithShares(answer.batch)
          default:
            return unanswered(answer)
        }
      },
      { parse: 'none' },
    )
    .get('/v1/batches/:id/events', async ({ request, set, params, server }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'read',
        set.headers as Record<string, string>,
      )
      const accountId = caller.account.id
      const batch = await store.getBatch(accountId, params.id)
      if (!batch) throw notFound(`batch ${excerpt(params.id)}`)
      const authorization = request.headers.get('authorization')
      return eventStreamResponse(request, server, batch, {
        ...events,
        read: () => store.getBatch(accountId, batch.id),
        render: renderWithShares,
        headers: set.headers as Record<string, string>,
        keyId: caller.key.id,
        check: {
          id: `key:${caller.key.id}`,
          stillValid: () => auth.stillValid(authorization, caller.key.id),
        },
      })
    })
    .get('/v1/batches/:id/results', async ({ request, set, params }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'read',
        set.headers as Record<string, string>,
      )
      const query = parseQuery(resultsQuery, request.url)
      const batch = await store.getBatch(caller.account.id, params.id)
      if (!batch) throw notFound(`batch ${excerpt(params.id)}`)
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
        headers: {
          ...(set.headers as Record<string, string>),
          'content-type': 'application/jsonl',
          'x-multigrid-batch-status': batch.status,
        },
      })
    })
}

/**
 * A retry's options (docs/events-and-webhooks.md), from a JSON body or the query (as a submit takes them); the
 * body's win. Unknown fields are refused, so a misspelt one is not silently ignored.
 */
export const retryOptions = z.object({
  completion_window_hours: wholeNumberText(1, MAX_WINDOW_HOURS, 24).optional(),
  // The child's own spend cap (docs/money-and-limits.md), by the submit's rule.
  max_cost_usd: maxCostUsdText().optional(),
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
    ...Object.fromEntries(new URL(request.url).searchParams),
    ...(read.value as object | undefined),
  }
  const unknown = Object.keys(fields).find((name) => !(name in retryOptions.shape))
  if (unknown !== undefined) {
    throw badRequest(
      `a retry takes no ${excerpt(unknown)}: send only completion_window_hours and max_cost_usd (the lines and their bodies come from the batch retried)`,
      excerpt(unknown),
    )
  }
  // A number in JSON is held to the rule its text in a query is: 24, not 24.5 or 1e1.
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'number') (fields as Record<string, unknown>)[name] = String(value)
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
