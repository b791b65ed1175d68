/** OpenAI Files (`/openai/v1/files`): upload for batches, list, retrieve, delete, content. */
import { Elysia } from 'elysia'
import { z } from 'zod'
import type { Authenticator } from '../../auth/authenticate.ts'
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
  const headersOf = (set: { headers: unknown }) => set.headers as Record<string, string>

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
    .post(
      '/files',
      async ({ request, set }) => {
        const caller = await auth.authenticate(
          request.headers.get('authorization'),
          'batches',
          headersOf(set),
        )
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
                received = await readMultipartUpload(request, (content) =>
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
              }
            },
          },
        )
        return renderOpenAiFile({ ...file, batchStatus: null, batchCounts: null })
      },
      { parse: 'none' },
    )
    .get('/files', async ({ request, set }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'read',
        headersOf(set),
      )
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
    })
    .get('/files/:id', async ({ request, set, params }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'read',
        headersOf(set),
      )
      const file = await store.getFile(caller.account.id, params.id)
      if (!file) throw notFound(`file ${excerpt(params.id)}`)
      return renderOpenAiFile(await withSize(file))
    })
    .delete('/files/:id', async ({ request, set, params }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'batches',
        headersOf(set),
      )
      const file = await store.getFile(caller.account.id, params.id)
      if (!file || !(await store.deleteFile(caller.account.id, params.id)))
        throw notFound(`file ${excerpt(params.id)}`)
      if (file.kind === 'upload') await blobs.delete(file.id)
      return { id: params.id, object: 'file', deleted: true }
    })
    .get('/files/:id/content', async ({ request, set, params }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'read',
        headersOf(set),
      )
      const file = await store.getFile(caller.account.id, params.id)
      if (!file) throw notFound(`file ${excerpt(params.id)}`)
      await store.touchFile(file.id, nowSeconds())
      const body = file.kind === 'upload' ? blobs.read(file.id) : renderedContent(file)
      return new Response(body, {
        headers: { ...headersOf(set), 'content-type': 'application/jsonl' },
      })
    })
}

function fileTooLarge(limit: number) {
  return refuse(
    'file_too_large',
    `files may be at most ${limit} bytes; split the requests into several files`,
    { param: 'file', detail: { limit_bytes: limit } },
  )
}
