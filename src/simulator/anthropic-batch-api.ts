/**
 * Anthropic's Message Batches API as the simulator plays it (docs/batch-lanes.md): `POST
 * /v1/messages/batches`, `GET /v1/messages/batches[/{id}]`, `GET …/{id}/results` (JSONL, once
 * ended, not in input order) and `POST …/{id}/cancel`. Result types: `succeeded`, `errored`
 * (the live error envelope), `canceled`, `expired`.
 */
import { JobBook, lineFailed, viewJob, type Job } from './batch-jobs.ts'
import { answerLine } from './batch-lines.ts'
import type { ResolvedSimulatorOptions } from './options.ts'
import { errorResponse, jsonResponse } from './respond.ts'

/** Anthropic's caps on one message batch. */
export const ANTHROPIC_BATCH_MAX_REQUESTS = 100_000
export const ANTHROPIC_BATCH_MAX_BYTES = 256 * 1024 * 1024
const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/
const PREFIX = '/v1/messages/batches'

const invalid = (message: string, status = 400) =>
  errorResponse('anthropic', status, {
    type: status === 404 ? 'not_found_error' : 'invalid_request_error',
    message,
  })

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** The Message Batches routes over one job book. */
export function createAnthropicBatchApi(
  book: JobBook,
  options: () => ResolvedSimulatorOptions,
  draw: () => number,
  baseUrl: () => string,
) {
  function batchObject(job: Job) {
    const view = viewJob(job, Date.now())
    const counts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 }
    job.lines.forEach((line, index) => {
      if (index < view.done) lineFailed(line) ? counts.errored++ : counts.succeeded++
      else if (view.end === 'cancelled') counts.canceled++
      else if (view.end === 'expired') counts.expired++
      else counts.processing++
    })
    return {
      id: job.id,
      type: 'message_batch',
      processing_status:
        view.end !== null ? 'ended' : view.cancelling ? 'canceling' : 'in_progress',
      request_counts: counts,
      ended_at: iso(view.endedAt),
      created_at: iso(job.createdAt),
      expires_at: iso(job.createdAt + 24 * 3600_000),
      archived_at: null,
      cancel_initiated_at: iso(job.cancelAt),
      results_url: view.end === null ? null : `${baseUrl()}${PREFIX}/${job.id}/results`,
    }
  }

  function results(job: Job): Response {
    const view = viewJob(job, Date.now())
    if (view.end === null)
      return invalid(`Message batch ${job.id} has not ended yet; its results are not available.`)
    const rows = job.lines.map((line, index) => {
      if (index < view.done) {
        const result = lineFailed(line)
          ? { type: 'errored', error: line.body }
          : { type: 'succeeded', message: line.body }
        return JSON.stringify({ custom_id: line.customId, result })
      }
      const type = view.end === 'cancelled' ? 'canceled' : 'expired'
      return JSON.stringify({ custom_id: line.customId, result: { type } })
    })
    // Not in input order, as Anthropic warns: match by custom_id.
    rows.reverse()
    return new Response(rows.join('\n') + '\n', {
      headers: { 'content-type': 'application/binary' },
    })
  }

  async function create(request: Request): Promise<Response> {
    const text = await request.text()
    if (Buffer.byteLength(text) > ANTHROPIC_BATCH_MAX_BYTES)
      return invalid('the batch exceeds 256 MB', 413)
    let body: { requests?: unknown }
    try {
      body = JSON.parse(text)
    } catch {
      return invalid('the body is not valid JSON')
    }
    const requests = body.requests
    if (!Array.isArray(requests) || requests.length === 0)
      return invalid('requests: at least one request is required')
    if (requests.length > ANTHROPIC_BATCH_MAX_REQUESTS)
      return invalid('requests: at most 100,000 requests per batch')
    if (options().batchCreateMs > 0) await Bun.sleep(options().batchCreateMs)
    const o = options()
    const job: Job = {
      id: book.nextId('msgbatch_sim'),
      dialect: 'anthropic',
      lines: [],
      createdAt: Date.now(),
      turnaroundMs: o.batchTurnaroundMs,
      expireAtMs: o.batchExpireMs === null ? null : Date.now() + o.batchExpireMs,
      cancelAt: null,
      cancelDelayMs: o.batchCancelMs,
      failure: null,
      metadata: null,
      endpoint: '/v1/messages',
      inputFileId: null,
    }
    const seen = new Set<string>()
    for (const [index, item] of (
      requests as { custom_id?: unknown; params?: unknown }[]
    ).entries()) {
      const customId = item?.custom_id
      if (typeof customId !== 'string' || !CUSTOM_ID.test(customId))
        return invalid(`requests.${index}.custom_id: must match ^[a-zA-Z0-9_-]{1,64}$`)
      if (seen.has(customId)) return invalid(`requests.${index}.custom_id: duplicate '${customId}'`)
      seen.add(customId)
      if (typeof item.params !== 'object' || item.params === null)
        return invalid(`requests.${index}.params: Field required`)
      const id = `msg_${job.id}_${index}`
      const params = item.params as Record<string, unknown>
      const line = {
        dialect: 'anthropic' as const,
        endpoint: job.endpoint,
        customId,
        body: params,
        id,
      }
      job.lines.push({ ...(await answerLine(line, o, draw)), request: params })
    }
    return jsonResponse(batchObject(book.add(job)))
  }

  function cancel(job: Job): Response {
    if (viewJob(job, Date.now()).end === null && job.cancelAt === null) {
      job.cancelAt = Date.now()
      book.counts.cancelled++
    }
    return jsonResponse(batchObject(job))
  }

  return {
    handles: (path: string) => path === PREFIX || path.startsWith(`${PREFIX}/`),
    async handle(request: Request, path: string): Promise<Response> {
      if (!request.headers.get('anthropic-version'))
        return invalid('anthropic-version: header is required')
      const parts = path.slice(PREFIX.length).split('/').filter(Boolean)
      const method = request.method
      if (parts.length === 0 && method === 'POST') return create(request)
      if (parts.length === 0 && method === 'GET') {
        const data = book.list('anthropic').slice(0, 100).map(batchObject)
        return jsonResponse({
          data,
          has_more: false,
          first_id: data[0]?.id ?? null,
          last_id: data.at(-1)?.id ?? null,
        })
      }
      const job = book.jobs.get(parts[0])
      if (!job || job.dialect !== 'anthropic') return invalid(`No message batch ${parts[0]}`, 404)
      if (parts.length === 1 && method === 'GET') return jsonResponse(batchObject(job))
      if (parts[1] === 'results' && method === 'GET') return results(job)
      if (parts[1] === 'cancel' && method === 'POST') return cancel(job)
      return invalid(`no route ${method} ${path}`, 404)
    },
  }
}
