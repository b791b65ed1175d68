/** OpenAI Files (`/openai/v1/files`): upload for batches, list, retrieve, delete, content. */
import { Elysia } from 'elysia'
import { z } from 'zod'
import type { Authenticator } from '../../auth/authenticate.ts'
import { callerMacro } from '../caller-macro.ts'
import { newId, nowSeconds } from '../../domain.ts'
import { badRequest, notFound, refuse } from '../../errors.ts'
import { FileTooLarge, type BlobStore } from '../../store/files/blob-store.ts'
import { refuseByHeaders, type BodyLimit } from '../../ingest/read-body.ts'
import type {
  BatchStore,
  FileQuotaDefaults,
  FileStore,
  FileView,
  UploadStore,
} from '../../store/store.ts'
import { excerpt } from '../../excerpt.ts'
import { wholeNumberText } from '../../schemas/whole-number.ts'
import { parseQuery } from '../parse-query.ts'
import { streamLines } from '../stream-lines.ts'
import { readMultipartUpload } from './read-multipart-upload.ts'
import { receiveUpload } from './receive-upload.ts'
import { renderOpenAiFile, renderOpenAiResultLine } from './render-openai.ts'

export const listQuery = z.object({
  limit: wholeNumberText(1, 10_000, 100).default(10_000),
  after: z.string().min(1).optional(),
  order: z.enum(['asc', 'desc']).default('desc'),
  purpose: z.string().min(1).optional(),
})

export interface FilesDeps {
  auth: Authenticator
  store: FileStore & BatchStore & UploadStore
  blobs: BlobStore
  maxFileBytes: number
  /** Per-account file quotas where the account has none of its own (docs/money-and-limits.md). */
  quotaDefaults: FileQuotaDefaults
  /** The whole upload's limit, the file's plus the form's framing (body-limits.ts). */
  bodyLimit: BodyLimit
}

const UNSUCCESSFUL = ['failed', 'cancelled', 'expired'] as const

export function openAiFilesRoutes({
  auth,
  store,
  blobs,
  maxFileBytes,
  quotaDefaults,
  bodyLimit,
}: FilesDeps) {
  /** A rendered file's content, streamed from the stored results. */
  const renderedContent = (file: FileView) =>
    streamLines(
      store,
      file.batchId!,
      file.kind === 'output' ? ['succeeded'] : UNSUCCESSFUL,
      (line) => renderOpenAiResultLine(file.batchId!, line),
    )

  /** Rendered files learn their size the first time they are asked for it. */
  async function withSize(file: FileView): Promise<FileView> {
    if (file.bytes !== null) return file
    let bytes = 0
    const reader = renderedContent(file).getReader()
    for (let next = await reader.read(); !next.done; next = await reader.read())
      bytes += next.value.byteLength
    await store.setFileBytes(file.id, bytes)
    return { ...file, bytes }
  }

  return new Elysia({ name: 'openai-files', prefix: '/openai/v1' })
    .use(callerMacro(auth))
    .post(
      '/files',
      async ({ request, caller }) => {
        // Before reading: a declared size over the limit (413), a compressed body (415). The file
        // part is limited again as it is stored, so a chunked upload stops at the limit too.
        refuseByHeaders(request, bodyLimit)
        const declared = Number(request.headers.get('content-length') ?? NaN)
        const id = newId('file-')
        const file = await receiveUpload(
          { store, blobs, quotaDefaults },
          {
            id,
            accountId: caller.account.id,
            declaredBytes: Number.isFinite(declared) ? declared : null,
            receive: async (meter) => {
              let received
              try {
                received = await readMultipartUpload(request, bodyLimit, (content) =>
                  blobs.put(id, meter(content), maxFileBytes),
                )
              } catch (error) {
                if (error instanceof FileTooLarge) throw fileTooLarge(maxFileBytes)
                throw error
              }
              if (received.fields.purpose !== 'batch') {
                throw badRequest(
                  `purpose must be "batch" (got ${JSON.stringify(received.fields.purpose === undefined ? null : excerpt(received.fields.purpose))}); this gateway stores files for batches only`,
                  'purpose',
                )
              }
              const expiresAfter = expiresAfterSeconds(received.fields)
              const now = nowSeconds()
              return {
                id,
                accountId: caller.account.id,
                purpose: 'batch' as const,
                filename: received.filename,
                bytes: received.result,
                createdAt: now,
                lastUsedAt: now,
                batchId: null,
                kind: 'upload' as const,
                expiresAt: expiresAfter === null ? null : now + expiresAfter,
              }
            },
          },
        )
        return renderOpenAiFile({ ...file, batchStatus: null, batchCounts: null })
      },
      { parse: 'none', caller: 'batches' },
    )
    .get(
      '/files',
      async ({ request, caller }) => {
        const query = parseQuery(listQuery, request.url)
        const page = await store.listFiles(caller.account.id, {
          limit: query.limit,
          after: query.after ?? null,
          purpose: query.purpose ?? null,
          order: query.order,
        })
        const data = await Promise.all(
          page.files.map(async (file) => renderOpenAiFile(await withSize(file))),
        )
        // OpenAI's schema requires first_id and last_id as strings, also on an empty page.
        return {
          object: 'list',
          data,
          first_id: data[0]?.id ?? '',
          last_id: data.at(-1)?.id ?? '',
          has_more: page.hasMore,
        }
      },
      { caller: 'read' },
    )
    .get(
      '/files/:id',
      async ({ params, caller }) => {
        const file = await store.getFile(caller.account.id, params.id)
        if (!file) throw notFound(`file ${excerpt(params.id)}`)
        return renderOpenAiFile(await withSize(file))
      },
      { caller: 'read' },
    )
    .delete(
      '/files/:id',
      async ({ params, caller }) => {
        const file = await store.getFile(caller.account.id, params.id)
        if (!file || !(await store.deleteFile(caller.account.id, params.id)))
          throw notFound(`file ${excerpt(params.id)}`)
        if (file.kind === 'upload') await blobs.delete(file.id)
        return { id: params.id, object: 'file', deleted: true }
      },
      { caller: 'batches' },
    )
    .get(
      '/files/:id/content',
      async ({ params, caller, answerHeaders }) => {
        const file = await store.getFile(caller.account.id, params.id)
        if (!file) throw notFound(`file ${excerpt(params.id)}`)
        await store.touchFile(file.id, nowSeconds())
        const body = file.kind === 'upload' ? blobs.read(file.id) : renderedContent(file)
        return new Response(body, {
          headers: { ...answerHeaders, 'content-type': 'application/jsonl' },
        })
      },
      { caller: 'read' },
    )
}

function fileTooLarge(limit: number) {
  return refuse(
    'file_too_large',
    `files may be at most ${limit} bytes; split the requests into several files`,
    { param: 'file', detail: { limit_bytes: limit } },
  )
}

/** OpenAI's bounds of an upload's `expires_after.seconds`: an hour to 30 days. */
const EXPIRES_AFTER = { min: 3600, max: 2_592_000 }

/**
 * The form's `expires_after` (`expires_after[anchor]` and `expires_after[seconds]`, as the SDKs
 * send the object in a form): seconds after the upload's creation, or null when not sent.
 */
function expiresAfterSeconds(fields: Record<string, string>): number | null {
  const anchor = fields['expires_after[anchor]']
  const seconds = fields['expires_after[seconds]']
  if (anchor === undefined && seconds === undefined) return null
  if (anchor !== 'created_at')
    throw badRequest(
      `expires_after.anchor must be "created_at" (got ${JSON.stringify(anchor === undefined ? null : excerpt(anchor))})`,
      'expires_after.anchor',
    )
  const value = /^\d{1,8}$/.test(seconds ?? '') ? Number(seconds) : NaN
  if (!(value >= EXPIRES_AFTER.min && value <= EXPIRES_AFTER.max))
    throw badRequest(
      `expires_after.seconds must be a whole number from ${EXPIRES_AFTER.min} (an hour) to ${EXPIRES_AFTER.max} (30 days); got ${JSON.stringify(seconds === undefined ? null : excerpt(seconds))}`,
      'expires_after.seconds',
    )
  return value
}
