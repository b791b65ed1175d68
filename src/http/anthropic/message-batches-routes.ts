/**
 * Anthropic's Message Batches under /anthropic/v1/messages/batches (docs/clients/anthropic-sdk.md), on the native
 * engine: a create becomes a native JSONL file of chat lines (convert-message-batch.ts) and goes
 * through the same admission as a native submit, so it is listed in /v1/batches, routed by the
 * catalog, capped, evented and webhooked like any other batch. Results are rendered back into
 * Anthropic's result lines.
 */
import { createHash } from 'node:crypto'
import { Elysia } from 'elysia'
import { z } from 'zod'
import { cancelBatch } from '../../admission/cancel-batch.ts'
import { refusalOf, type Admission } from '../../admission/submit-batch.ts'
import type { Authenticator } from '../../auth/authenticate.ts'
import { badRequest, notFound, refuse } from '../../errors.ts'
import { excerpt } from '../../excerpt.ts'
import { MAX_ISSUES, type Issue } from '../../ingest/issues.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../ingest/json-depth.ts'
import { readJsonBody, type BodyLimit } from '../../ingest/read-body.ts'
import type { FileLimits } from '../../ingest/validate-batch-file.ts'
import { parseWholeNumber, wholeNumberText } from '../../schemas/whole-number.ts'
import type { AccountStore, BatchStore } from '../../store/store.ts'
import { parseQuery } from '../parse-query.ts'
import { streamLines } from '../stream-lines.ts'
import { anthropicAuthorization, inAnthropicShape } from './anthropic-errors.ts'
import { convertMessageBatch, inRequestTerms } from './convert-message-batch.ts'
import { listMessageBatches } from './list-message-batches.ts'
import { ANTHROPIC_PREFIX } from './messages-routes.ts'
import {
  ENDED_LINES,
  messageBatchId,
  nativeBatchId,
  processingStatus,
  renderMessageBatch,
  renderMessageResultLine,
} from './render-message-batch.ts'

export interface MessageBatchDeps {
  auth: Authenticator
  store: BatchStore & AccountStore
  admission: Admission
  limits: FileLimits
  /** The create's limit: the native submit's (16 MiB by default). */
  bodyLimit: BodyLimit
  onCancelled?: (batchId: string) => void
}

export const listQuery = z.object({
  limit: wholeNumberText(1, 1000, 20).default(20),
  after_id: z.string().min(1).optional(),
  before_id: z.string().min(1).optional(),
})

/** Anthropic's batches run within 24 hours. */
const WINDOW_HOURS = 24

export function anthropicBatchRoutes(deps: MessageBatchDeps) {
  const { auth, store } = deps
  const headersOf = (set: { headers: unknown }) => set.headers as Record<string, string>
  const origin = (request: Request) => new URL(request.url).origin
  const caller = (request: Request, scope: 'batches' | 'read', headers: Record<string, string>) =>
    auth.authenticate(anthropicAuthorization(request), scope, headers)

  async function find(request: Request, headers: Record<string, string>, id: string) {
    const { account } = await caller(request, 'read', headers)
    const native = nativeBatchId(id)
    const batch = native ? await store.getBatch(account.id, native) : null
    if (!batch) throw notFound(`message batch ${excerpt(id)}`)
    return { account, batch }
  }

  const create = (request: Request, headers: Record<string, string>) =>
    createMessageBatch(deps, request, headers)

  const route = (
    handler: (request: Request, headers: Record<string, string>, id: string) => Promise<unknown>,
  ) => {
    return ({
      request,
      set,
      params,
    }: {
      request: Request
      set: { headers: unknown }
      params?: Record<string, string>
    }) => inAnthropicShape(headersOf(set), () => handler(request, headersOf(set), params?.id ?? ''))
  }

  return new Elysia({ name: 'anthropic-batches', prefix: `${ANTHROPIC_PREFIX}/messages/batches` })
    .post('', route(create), { parse: 'none' })
    .get(
      '',
      route(async (request, headers) => {
        const { account } = await caller(request, 'read', headers)
        const query = parseQuery(listQuery, request.url)
        const native = (id: string | undefined) => (id ? (nativeBatchId(id) ?? id) : null)
        const page = await listMessageBatches(store, account.id, {
          limit: query.limit,
          afterId: native(query.after_id),
          beforeId: native(query.before_id),
        })
        const data = page.batches.map((batch) => renderMessageBatch(batch, origin(request)))
        return {
          data,
          has_more: page.hasMore,
          first_id: data[0]?.id ?? null,
          last_id: data.at(-1)?.id ?? null,
        }
      }),
    )
    .get(
      '/:id',
      route(async (request, headers, id) =>
        renderMessageBatch((await find(request, headers, id)).batch, origin(request)),
      ),
    )
    .post(
      '/:id/cancel',
      route(async (request, headers, id) => {
        const { account } = await caller(request, 'batches', headers)
        const native = nativeBatchId(id)
        if (!native) throw notFound(`message batch ${excerpt(id)}`)
        const batch = await cancelBatch(store, account.id, native, deps.onCancelled)
        return renderMessageBatch(batch, origin(request))
      }),
      { parse: 'none' },
    )
    .get(
      '/:id/results',
      route(async (request, headers, id) => {
        const { batch } = await find(request, headers, id)
        if (processingStatus(batch) !== 'ended')
          throw refuse(
            'batch_not_ended',
            `message batch ${id} is still ${processingStatus(batch)}; its results are ready once processing_status is ended (the native /v1/batches/${batch.id}/results has them line by line now)`,
          )
        if (batch.purgedAt !== null)
          throw refuse('results_expired', `the results of message batch ${id} were deleted`)
        return new Response(streamLines(store, batch.id, ENDED_LINES, renderMessageResultLine), {
          headers: { ...headers, 'content-type': 'application/x-jsonl' },
        })
      }),
    )
    .delete(
      '/:id',
      route(async (request, headers, id) => {
        const { account } = await caller(request, 'batches', headers)
        const native = nativeBatchId(id)
        const batch = native ? await store.getBatch(account.id, native) : null
        if (!batch) throw notFound(`message batch ${excerpt(id)}`)
        if (processingStatus(batch) !== 'ended')
          throw refuse(
            'batch_not_ended',
            `message batch ${id} is ${processingStatus(batch)}; cancel it and delete it once it has ended`,
          )
        await store.deleteEndedBatch(account.id, batch.id)
        return { id: messageBatchId(batch.id), type: 'message_batch_deleted' }
      }),
      { parse: 'none' },
    )
}

/** A create: the requests as a native file, admitted as any native submit (docs/clients/anthropic-sdk.md). */
async function createMessageBatch(
  deps: MessageBatchDeps,
  request: Request,
  headers: Record<string, string>,
) {
  const { store, admission } = deps
  const origin = new URL(request.url).origin
  const { account } = await deps.auth.authenticate(
    anthropicAuthorization(request),
    'batches',
    headers,
  )
  const read = await readJsonBody(request, deps.bodyLimit)
  if (!read.ok) throw badRequest('the body is not valid JSON; send {"requests": [...]}')
  // The translation walks every request: bounded before it does.
  if (nestsDeeperThan(read.value))
    throw badRequest(`the body nests more than ${MAX_JSON_DEPTH} levels deep; flatten it`)
  const file = convertMessageBatch(read.value, deps.limits.maxLines)
  if (!file.ok) throw badRequest(file.envelope, 'requests')
  if (file.issues.length > 0) {
    // Every invalid request at once: the engine's verdict on the others joins these.
    const others =
      file.requestIndex.length > 0
        ? await admission.quote(file.bytes, { accountId: account.id, source: 'anthropic' })
        : null
    const found = others?.kind === 'invalid' ? others.issues : []
    const issues = [...file.issues, ...found.map((i) => inRequestTerms(i, file.requestIndex))]
    throw invalidRequests(
      issues.sort((a, b) => a.line - b.line),
      others?.kind === 'invalid' ? others.omitted : 0,
    )
  }
  // The SDK retries a timed-out create without a key: the retry returns the first one's batch.
  const hash = createHash('sha256').update(file.bytes).digest('hex')
  const retried =
    (parseWholeNumber(request.headers.get('x-stainless-retry-count') ?? '0', 0, 1_000) ?? 0) > 0
  const requestKey = `anthropic:${hash}`
  const explicitKey = request.headers.get('idempotency-key')
  if (explicitKey || retried) {
    const earlier = await store.findByIdempotencyKey(account.id, explicitKey ?? requestKey)
    if (earlier) return renderMessageBatch(earlier, origin)
  }
  // The first create of a body keeps its hash as its key, for its retries to find.
  const idempotencyKey =
    explicitKey ?? ((await store.findByIdempotencyKey(account.id, requestKey)) ? null : requestKey)
  const result = await admission.submit(file.bytes, {
    accountId: account.id,
    name: null,
    completionWindowHours: WINDOW_HOURS,
    idempotencyKey,
    source: 'anthropic',
    metadata: null,
    inputFileId: null,
    endpoint: '/v1/chat/completions',
  })
  switch (result.kind) {
    case 'invalid':
      throw invalidRequests(
        result.issues.map((i) => inRequestTerms(i, file.requestIndex)),
        result.omitted,
      )
    case 'insufficient_quota':
    case 'limit_exceeded':
    case 'daily_limit_exceeded':
      throw refusalOf(result)
    case 'created':
    case 'duplicate':
      return renderMessageBatch(result.batch, origin)
  }
}

/** Every invalid request at once (docs/clients/anthropic-sdk.md): Anthropic's error, with the native issues beside it. */
function invalidRequests(issues: Issue[], omitted = 0) {
  const shown = issues.slice(0, MAX_ISSUES)
  const count = issues.length + omitted
  const first = shown[0]
  return refuse(
    'invalid_batch_file',
    `${count} invalid request${count === 1 ? '' : 's'}; nothing was submitted. First: ${first ? `${first.path} ${first.message}; ${first.fix}` : ''}`,
    { extra: { issues: shown, issues_omitted: omitted + issues.length - shown.length } },
  )
}
