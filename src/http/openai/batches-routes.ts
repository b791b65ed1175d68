/**
 * OpenAI Batches (`/openai/v1/batches`) on the native engine: a facade batch is a native batch,
 * visible and cancellable on both surfaces. A file that fails validation makes a `failed` batch
 * whose `errors` carry the line-numbered issues, as OpenAI reports them.
 */
import { Elysia } from 'elysia'
import { z } from 'zod'
import { cancelBatch } from '../../admission/cancel-batch.ts'
import { createKeys, earlierCreate, keyToStore } from '../../admission/repeated-create.ts'
import { answerOf, unanswered } from '../../admission/admission-answer.ts'
import { keysBatch } from '../../admission/request-hash.ts'
import type { Admission } from '../../admission/submit-batch.ts'
import type { Authenticator, Caller } from '../../auth/authenticate.ts'
import { callerMacro } from '../caller-macro.ts'
import { BATCH_URLS, MORE_ERRORS, newId, nowSeconds, type BatchRecord } from '../../domain.ts'
import { badRequest, notFound } from '../../errors.ts'
import type { BlobStore } from '../../store/files/blob-store.ts'
import { describeZodIssue } from '../../ingest/issues.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../ingest/json-depth.ts'
import { readJsonBody, type BodyLimit } from '../../ingest/read-body.ts'
import type { AccountStore, BatchErrorEntry, BatchStore, FileStore } from '../../store/store.ts'
import { storableText } from '../../schemas/text.ts'
import { wholeNumberText, windowHoursText } from '../../schemas/whole-number.ts'
import { excerpt } from '../../excerpt.ts'
import { maxCostUsdJson } from '../../schemas/money-text.ts'
import { parseQuery, refuseUnknownFields } from '../parse-query.ts'
import { createBatchSummaries } from './batch-usage.ts'
import { openAiStatus, renderOpenAiBatch } from './render-openai.ts'
import { renderPage } from '../render-page.ts'

export const createBody = z.looseObject({
  input_file_id: z.string().min(1),
  endpoint: z.enum(BATCH_URLS),
  completion_window: windowHoursText(),
  metadata: z
    .record(storableText().max(64), storableText().max(512))
    .refine((m) => Object.keys(m).length <= 16, {
      message: 'may have at most 16 keys',
      params: { fix: 'keep at most 16 keys in metadata' },
    })
    .nullable()
    .optional(),
  // docs/open-models.md, through extra_body: a batch the credit does not cover yet waits for a deposit.
  wait_for_credit: z.boolean().optional(),
  /** Multigrid's spend cap (docs/money-and-limits.md), through the SDK's extra_body. */
  max_cost_usd: maxCostUsdJson().nullable().optional(),
})

export const listQuery = z.object({
  limit: wholeNumberText(1, 100, 20).default(20),
  after: z.string().min(1).optional(),
})

export interface FacadeBatchDeps {
  auth: Authenticator
  store: BatchStore & FileStore & AccountStore
  blobs: BlobStore
  admission: Admission
  /** The create's body limit (body-limits.ts): it names a file, it does not carry one. */
  bodyLimit: BodyLimit
  onCancelled?: (batchId: string, linesCancelled: number) => void
  /** The catalog's id of a model name (an alias's model), for the batch object's `model`. */
  modelId?: (name: string) => string
}

export function openAiBatchRoutes(deps: FacadeBatchDeps) {
  const { auth, store, onCancelled } = deps
  const summaryOf = createBatchSummaries(store, deps.modelId)
  /** The batch objects with what the facade adds (usage, model, multigrid), in one shares read. */
  const render = async (batches: BatchRecord[]) => {
    const shares = await store.providerShares(batches.map((batch) => batch.id))
    return Promise.all(
      batches.map(async (batch) =>
        renderOpenAiBatch(batch, { summary: await summaryOf(batch), shares: shares.get(batch.id) }),
      ),
    )
  }
  const renderOne = async (batch: BatchRecord) => (await render([batch]))[0]

  return new Elysia({ name: 'openai-batches', prefix: '/openai/v1' })
    .use(callerMacro(auth))
    .post(
      '/batches',
      async ({ request, caller }) => renderOne(await createFacadeBatch(deps, request, caller)),
      {
        parse: 'none',
        caller: 'batches',
      },
    )
    .get(
      '/batches',
      async ({ request, caller }) => {
        const query = parseQuery(listQuery, request.url)
        const page = await store.listBatches(caller.account.id, {
          limit: query.limit,
          after: query.after ?? null,
        })
        const data = await render(page.batches)
        return renderPage(data, page.hasMore, (item) => item.id)
      },
      { caller: 'read' },
    )
    .get(
      '/batches/:id',
      async ({ params, caller }) => {
        const batch = await store.getBatch(caller.account.id, params.id)
        if (!batch) throw notFound(`batch ${excerpt(params.id)}`)
        return renderOne(batch)
      },
      { caller: 'read' },
    )
    .post(
      '/batches/:id/cancel',
      async ({ params, caller }) =>
        renderOne(
          await cancelBatch(store, caller.account.id, params.id, {
            onCancelled,
            statusOf: openAiStatus,
          }),
        ),
      { parse: 'none', caller: 'batches' },
    )
}

/**
 * A field this create does not take is refused by name, as OpenAI refuses it ("Unrecognized
 * request argument"): a misspelt max_cost_usd must not make an uncapped batch.
 * `output_expires_after` is OpenAI's, but its files here live as long as the batch's results.
 */
function refuseUnknownCreateFields(raw: object): void {
  if ('output_expires_after' in raw)
    throw badRequest(
      "output_expires_after is not supported: a batch's output and error files are kept as long as its results (MULTIGRID_RESULT_RETENTION_DAYS, 30 days by default, set by the gateway's operator); leave it out",
      'output_expires_after',
    )
  refuseUnknownFields(raw as Record<string, string>, Object.keys(createBody.shape), 'field')
}

/** A create: the uploaded file admitted as a native submit, or a `failed` batch carrying its issues. */
async function createFacadeBatch(deps: FacadeBatchDeps, request: Request, caller: Caller) {
  const { store, blobs, admission, bodyLimit } = deps
  const read = await readJsonBody(request, bodyLimit)
  if (!read.ok || read.value === undefined) {
    throw badRequest(
      'the body must be a JSON object such as {"input_file_id": …, "endpoint": …, "completion_window": "24h"}',
    )
  }
  let raw = read.value
  // The body is hashed below (JSON.stringify), which a deep enough value would overflow.
  if (nestsDeeperThan(raw))
    throw badRequest(`the body nests more than ${MAX_JSON_DEPTH} levels deep; send a plain create`)
  // The Python SDK merges `extra_body` into the body; the Node SDK sends unknown params as
  // they are, so `extra_body` can also arrive as a field of its own. Both mean the same.
  if (raw && typeof raw === 'object' && 'extra_body' in raw) {
    const { extra_body: extra, ...rest } = raw as { extra_body?: unknown }
    if (extra && typeof extra === 'object' && !Array.isArray(extra)) raw = { ...rest, ...extra }
  }
  if (raw && typeof raw === 'object' && !Array.isArray(raw)) refuseUnknownCreateFields(raw)
  const parsed = createBody.safeParse(raw, { reportInput: true })
  if (!parsed.success) {
    const issue = describeZodIssue(parsed.error.issues[0], '')
    throw badRequest(
      `${issue.path || 'the body'} ${issue.message}; ${issue.fix}`,
      issue.path || null,
    )
  }
  const body = parsed.data
  const hours = body.completion_window

  // The SDKs retry a timed-out create without an idempotency key: a retry of the same body
  // returns the batch the first attempt made.
  const keys = await createKeys(request, 'openai', JSON.stringify(raw), nowSeconds())
  const earlier = await earlierCreate(store, caller.account.id, keys)
  if (earlier) return earlier
  const file = await store.getFile(caller.account.id, body.input_file_id)
  if (!file) throw notFound(`file ${excerpt(body.input_file_id)}`)
  if (file.kind !== 'upload')
    throw badRequest(
      `file ${excerpt(body.input_file_id)} is a batch's ${file.kind} file (purpose batch_output); send the id of a file uploaded with purpose "batch"`,
      'input_file_id',
    )
  await store.touchFile(file.id, nowSeconds())
  const bytes = await blobs.readAll(file.id)
  const { idempotencyKey, requestHash } = await keyToStore(store, caller.account.id, keys)
  // A file refused keeps the key too: a retry of its create gets the same failed batch, not
  // another.
  const reject = async (errors: BatchErrorEntry[]) => {
    const id = newId('batch_')
    const made = await store.recordRejectedBatch({
      idempotencyKey,
      requestHash,
      id,
      accountId: caller.account.id,
      name: file.filename,
      endpoint: body.endpoint,
      completionWindowHours: hours,
      createdAt: nowSeconds(),
      source: 'openai',
      metadata: body.metadata ?? null,
      inputFileId: file.id,
      errors,
    })
    // Made by a create racing this one with its key: the answer to the same request only.
    return made.id === id ? made : keysBatch(made, requestHash)
  }
  const result = await admission.submit(bytes, {
    accountId: caller.account.id,
    name: file.filename,
    completionWindowHours: hours,
    idempotencyKey,
    requestHash,
    source: 'openai',
    metadata: body.metadata ?? null,
    inputFileId: file.id,
    endpoint: body.endpoint,
    // Unset: admission's default (a window of 72 hours or more waits for a top-up).
    waitForCredit: body.wait_for_credit,
    maxCostUsd: body.max_cost_usd ?? null,
  })
  const answer = answerOf(result)
  switch (answer.kind) {
    case 'invalid': {
      const errors: BatchErrorEntry[] = answer.issues.map((issue) => ({
        code: issue.code ?? 'invalid_request',
        message: `${issue.path ? `${issue.path} ` : ''}${issue.message}; ${issue.fix}`,
        param: issue.path || null,
        line: issue.line,
      }))
      // The native answer's issues_omitted, in the only place OpenAI's error list has for it.
      if (answer.omitted > 0)
        errors.push({
          code: MORE_ERRORS,
          message: `${answer.omitted} more ${answer.omitted === 1 ? 'problem is' : 'problems are'} not listed; correct these and create the batch again to see the rest`,
          param: null,
          line: null,
        })
      return reject(errors)
    }
    case 'refused':
      // Credit and limits as on every admission path (a 402 or 429, nothing stored), as OpenAI
      // answers a create over its quota with an error, not a batch.
      throw answer.error
    case 'batch':
      return answer.batch
    default:
      return unanswered(answer)
  }
}
