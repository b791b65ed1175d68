/**
 * Anthropic's Message Batches under /anthropic/v1/messages/batches (docs/clients/anthropic-sdk.md), on the native
 * engine: a create becomes a native JSONL file of Messages lines (convert-message-batch.ts) and goes
 * through the same admission as a native submit, so it is listed in /v1/batches, routed by the
 * catalog, capped, evented and webhooked like any other batch. Each line goes as it came to an
 * Anthropic offering and translated to any other, and is kept as the message it got back; the
 * results wrap those messages in Anthropic's result lines.
 */
import { Elysia } from 'elysia'
import { z } from 'zod'
import { cancelBatch } from '../../admission/cancel-batch.ts'
import { createKeys, earlierCreate, keyToStore } from '../../admission/repeated-create.ts'
import { keyReusedBatch, keyReusedRefusal } from '../../admission/request-hash.ts'
import { refusalOf, type Admission } from '../../admission/submit-batch.ts'
import type { Authenticator, Caller } from '../../auth/authenticate.ts'
import { MESSAGES_URL, nowSeconds } from '../../domain.ts'
import { badRequest, notFound, refuse } from '../../errors.ts'
import { excerpt } from '../../excerpt.ts'
import { MAX_ISSUES, type Issue } from '../../ingest/issues.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../ingest/json-depth.ts'
import { readJsonBody, type BodyLimit } from '../../ingest/read-body.ts'
import type { FileLimits } from '../../ingest/validate-batch-file.ts'
import { wholeNumberText } from '../../schemas/whole-number.ts'
import type { AccountStore, BatchStore } from '../../store/store.ts'
import { parseQuery } from '../parse-query.ts'
import { publicOrigin } from '../public-origin.ts'
import { streamLines } from '../stream-lines.ts'
import { callerMacro } from '../caller-macro.ts'
import {
  anthropicAuthorization,
  anthropicErrorResponse,
  inAnthropicShape,
} from './anthropic-errors.ts'
import { convertMessageBatch, inRequestTerms } from './convert-message-batch.ts'
import { anthropicPage } from './anthropic-page.ts'
import { isMessageBatch, listMessageBatches } from './list-message-batches.ts'
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
  onCancelled?: (batchId: string, linesCancelled: number) => void
  /** The clock of the day a delete counts against (the daily spend limit). */
  now?: () => number
}

export const listQuery = z.object({
  limit: wholeNumberText(1, 1000, 20).default(20),
  after_id: z.string().min(1).optional(),
  before_id: z.string().min(1).optional(),
})

/** Anthropic's batches run within 24 hours. */
const WINDOW_HOURS = 24

export function anthropicBatchRoutes(deps: MessageBatchDeps) {
  const { store } = deps

  return new Elysia({ name: 'anthropic-batches', prefix: `${ANTHROPIC_PREFIX}/messages/batches` })
    .use(
      callerMacro(deps.auth, {
        authorization: anthropicAuthorization,
        refusal: anthropicErrorResponse,
      }),
    )
    .post(
      '',
      ({ request, caller, answerHeaders }) =>
        inAnthropicShape(answerHeaders, () =>
          createMessageBatch(deps, request, caller).catch((error: unknown) =>
            inMessageBatchTerms(deps.store, caller.account.id, error),
          ),
        ),
      { parse: 'none', caller: 'batches' },
    )
    .get(
      '',
      ({ request, caller, answerHeaders }) =>
        inAnthropicShape(answerHeaders, async () => {
          const query = parseQuery(listQuery, request.url)
          const native = (id: string | undefined) => (id ? (nativeBatchId(id) ?? id) : null)
          const page = await listMessageBatches(store, caller.account.id, {
            limit: query.limit,
            afterId: native(query.after_id),
            beforeId: native(query.before_id),
          })
          const data = page.batches.map((batch) => renderMessageBatch(batch, publicOrigin(request)))
          return anthropicPage(data, page.hasMore)
        }),
      { caller: 'read' },
    )
    .get(
      '/:id',
      ({ request, params, caller, answerHeaders }) =>
        inAnthropicShape(answerHeaders, async () =>
          renderMessageBatch(
            await findMessageBatch(store, caller, params.id),
            publicOrigin(request),
          ),
        ),
      { caller: 'read' },
    )
    .post(
      '/:id/cancel',
      ({ request, params, caller, answerHeaders }) =>
        inAnthropicShape(answerHeaders, async () => {
          const found = await findMessageBatch(store, caller, params.id)
          // In this API's terms; one that ends meanwhile gets the native refusal (same code).
          if (processingStatus(found) === 'ended')
            throw refuse(
              'batch_not_cancellable',
              `message batch ${excerpt(params.id)} has ended and can no longer be cancelled`,
              { detail: { processing_status: 'ended' } },
            )
          const batch = await cancelBatch(store, caller.account.id, found.id, {
            onCancelled: deps.onCancelled,
          })
          return renderMessageBatch(batch, publicOrigin(request))
        }),
      { parse: 'none', caller: 'batches' },
    )
    .get(
      '/:id/results',
      ({ params, caller, answerHeaders }) =>
        inAnthropicShape(answerHeaders, async () => {
          const id = params.id
          const batch = await findMessageBatch(store, caller, id)
          if (processingStatus(batch) !== 'ended')
            throw refuse(
              'batch_not_ended',
              `message batch ${id} is still ${processingStatus(batch)}; its results are ready once processing_status is ended (the native /v1/batches/${batch.id}/results has them line by line now)`,
            )
          if (batch.purgedAt !== null)
            throw refuse('results_expired', `the results of message batch ${id} were deleted`)
          return new Response(streamLines(store, batch.id, ENDED_LINES, renderMessageResultLine), {
            headers: { ...answerHeaders, 'content-type': 'application/x-jsonl' },
          })
        }),
      { caller: 'read' },
    )
    .delete(
      '/:id',
      ({ params, caller, answerHeaders }) =>
        inAnthropicShape(answerHeaders, async () => {
          const id = params.id
          const batch = await findMessageBatch(store, caller, id)
          if (processingStatus(batch) !== 'ended')
            throw refuse(
              'batch_not_ended',
              `message batch ${id} is ${processingStatus(batch)}; cancel it and delete it once it has ended`,
            )
          await store.deleteEndedBatch(caller.account.id, batch.id, (deps.now ?? Date.now)())
          return { id: messageBatchId(batch.id), type: 'message_batch_deleted' }
        }),
      { parse: 'none', caller: 'batches' },
    )
}

/**
 * The caller's batch by its Anthropic id, or Anthropic's 404: a batch of Messages lines, what a
 * Message Batch is underneath, or of chat lines, as a create stored them before (an embeddings
 * or Responses batch is none, whatever its id).
 */
async function findMessageBatch(store: BatchStore, caller: Caller, id: string) {
  const native = nativeBatchId(id)
  const batch = native ? await store.getBatch(caller.account.id, native) : null
  // Listed or not, the same batches: a native batch of any endpoint is no message batch.
  if (!batch || !isMessageBatch(batch)) throw notFound(`message batch ${excerpt(id)}`)
  return batch
}

/** A create: the requests as a native file, admitted as any native submit (docs/clients/anthropic-sdk.md). */
async function createMessageBatch(deps: MessageBatchDeps, request: Request, caller: Caller) {
  const { store, admission } = deps
  const origin = publicOrigin(request)
  const { account } = caller
  const read = await readJsonBody(request, deps.bodyLimit)
  if (!read.ok) throw badRequest('the body is not valid JSON; send {"requests": [...]}')
  // The translation walks every request: bounded before it does.
  if (nestsDeeperThan(read.value))
    throw badRequest(`the body nests more than ${MAX_JSON_DEPTH} levels deep; flatten it`)
  const file = convertMessageBatch(read.value, deps.limits.maxLines)
  if (!file.ok) {
    if (!file.issues) throw badRequest(file.envelope, 'requests')
    const extra = { issues: file.issues, issues_omitted: 0 }
    throw refuse('invalid_batch_file', file.envelope, { param: 'requests', extra })
  }
  if (file.issues.length > 0) {
    // Every invalid request at once: the engine's verdict on the others joins these.
    const others =
      file.requestIndex.length > 0
        ? await admission.quote(file.bytes, {
            accountId: account.id,
            source: 'anthropic',
            endpoint: MESSAGES_URL,
          })
        : null
    const found = others?.kind === 'invalid' ? others.issues : []
    const issues = [...file.issues, ...found.map((i) => inRequestTerms(i, file))]
    throw invalidRequests(
      issues.sort((a, b) => a.line - b.line),
      others?.kind === 'invalid' ? others.omitted : 0,
    )
  }
  // The SDK retries a timed-out create without a key: the retry returns the first one's batch.
  const keys = await createKeys(request, 'anthropic', file.bytes, nowSeconds())
  const earlier = await earlierCreate(store, account.id, keys)
  if (earlier) return renderMessageBatch(earlier, origin)
  const { idempotencyKey, requestHash } = await keyToStore(store, account.id, keys)
  const result = await admission.submit(file.bytes, {
    accountId: account.id,
    name: null,
    completionWindowHours: WINDOW_HOURS,
    idempotencyKey,
    requestHash,
    source: 'anthropic',
    metadata: null,
    inputFileId: null,
    endpoint: MESSAGES_URL,
  })
  switch (result.kind) {
    case 'invalid':
      throw invalidRequests(
        result.issues.map((i) => inRequestTerms(i, file)),
        result.omitted,
      )
    case 'insufficient_quota':
    case 'limit_exceeded':
    case 'daily_limit_exceeded':
      throw refusalOf(result, false)
    case 'created':
    case 'duplicate':
      return renderMessageBatch(result.batch, origin)
  }
}

/**
 * A reused key's refusal names the key's batch as this API does, `msgbatch_<x>`, when it is a
 * Message Batch (another surface's batch keeps its own id, which /anthropic does not know).
 */
async function inMessageBatchTerms(store: BatchStore, accountId: string, error: unknown) {
  const reused = keyReusedBatch(error)
  const made = reused === null ? null : await store.getBatch(accountId, reused)
  if (made?.source !== 'anthropic') throw error
  throw keyReusedRefusal(made.idempotencyKey ?? '', messageBatchId(made.id))
}

/** Every invalid request at once (docs/clients/anthropic-sdk.md): Anthropic's error, with the native issues beside it. */
function invalidRequests(issues: Issue[], omitted = 0) {
  const shown = issues.slice(0, MAX_ISSUES)
  // Issues, not requests: one request can have several.
  const count = issues.length + omitted
  const first = shown[0]
  return refuse(
    'invalid_batch_file',
    `${count} issue${count === 1 ? '' : 's'} in the requests; nothing was submitted. First: ${first ? `${first.path} ${first.message}; ${first.fix}` : ''}`,
    { extra: { issues: shown, issues_omitted: omitted + issues.length - shown.length } },
  )
}
