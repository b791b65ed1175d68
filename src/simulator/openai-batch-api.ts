/**
 * OpenAI's Files + Batches API as the simulator plays it (docs/batch-lanes.md): `POST /v1/files`
 * (multipart, purpose=batch), `GET /v1/files/{id}` and `/content`, `POST /v1/batches`,
 * `GET /v1/batches/{id}`, `GET /v1/batches?limit&after` (newest first), `POST
 * /v1/batches/{id}/cancel`, with the output and error files OpenAI writes when a batch ends.
 * Like OpenAI, the output file is not in input order: lines are matched back by `custom_id`.
 */
import { JobBook, lineFailed, unixSeconds, viewJob, type Job } from './batch-jobs.ts'
import { answerLine } from './batch-lines.ts'
import type { ResolvedSimulatorOptions } from './options.ts'
import { errorResponse, jsonResponse } from './respond.ts'

/** OpenAI's caps on one batch's input file. */
export const OPENAI_BATCH_MAX_LINES = 50_000
export const OPENAI_BATCH_MAX_BYTES = 200 * 1024 * 1024
const ENDPOINTS = new Set(['/v1/chat/completions', '/v1/embeddings', '/v1/responses'])

interface StoredFile {
  id: string
  purpose: string
  filename: string
  text: string
  bytes: number
  createdAt: number
}

const invalid = (message: string, status = 400) =>
  errorResponse('openai', status, { type: 'invalid_request_error', message })

function fileObject(file: StoredFile) {
  return {
    id: file.id,
    object: 'file',
    bytes: file.bytes,
    created_at: unixSeconds(file.createdAt),
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed',
  }
}

/** What the Files + Batches routes hold: the job book, the files, and what each ended job wrote. */
interface OpenAIBatchState {
  book: JobBook
  /** The simulator's options as they are now. */
  options: () => ResolvedSimulatorOptions
  /** The batch lines' server-error stream. */
  draw: () => number
  files: Map<string, StoredFile>
  /** Output and error file ids of each ended job, written once when it is first seen ended. */
  written: Map<string, { output: string | null; error: string | null }>
}

/** The Files + Batches routes over one job book; `options()` reads the simulator's current ones. */
export function createOpenAIBatchApi(
  book: JobBook,
  options: () => ResolvedSimulatorOptions,
  draw: () => number,
) {
  const state: OpenAIBatchState = { book, options, draw, files: new Map(), written: new Map() }
  return {
    handles: (path: string) => path.startsWith('/v1/files') || path.startsWith('/v1/batches'),
    handle: (request: Request, path: string) => handle(state, request, path),
  }
}

async function handle(state: OpenAIBatchState, request: Request, path: string): Promise<Response> {
  const parts = path.split('/').filter(Boolean).slice(1)
  const method = request.method
  if (parts[0] === 'files') {
    if (parts.length === 1 && method === 'POST') return upload(state, request)
    const file = state.files.get(parts[1] ?? '')
    if (!file) return invalid(`No such File object: ${parts[1]}`, 404)
    if (parts.length === 2 && method === 'GET') return jsonResponse(fileObject(file))
    if (parts[2] === 'content' && method === 'GET')
      return new Response(file.text, { headers: { 'content-type': 'application/jsonl' } })
  }
  if (parts[0] === 'batches') {
    if (parts.length === 1 && method === 'POST') return create(state, request)
    if (parts.length === 1 && method === 'GET') return list(state, new URL(request.url))
    const job = state.book.jobs.get(parts[1] ?? '')
    if (!job || job.dialect !== 'openai')
      return invalid(`No batch found with id '${parts[1]}'.`, 404)
    if (parts.length === 2 && method === 'GET') return jsonResponse(batchObject(state, job))
    if (parts[2] === 'cancel' && method === 'POST') return cancel(state, job)
  }
  return invalid(`no route ${method} ${path}`, 404)
}

function storeFile(
  state: OpenAIBatchState,
  purpose: string,
  filename: string,
  text: string,
): StoredFile {
  const file: StoredFile = {
    id: state.book.nextId('file-sim'),
    purpose,
    filename,
    text,
    bytes: Buffer.byteLength(text),
    createdAt: Date.now(),
  }
  state.files.set(file.id, file)
  return file
}

/** One line of an ended job's output or error file. */
function outputLine(job: Job, index: number, done: number, end: string) {
  const line = job.lines[index]
  const id = `batch_req_${job.id}_${index}`
  if (index < done) {
    const response = { status_code: line.status, request_id: `req_${id}`, body: line.body }
    return {
      failed: lineFailed(line),
      text: JSON.stringify({ id, custom_id: line.customId, response, error: null }),
    }
  }
  const code = end === 'expired' ? 'batch_expired' : 'batch_cancelled'
  const message =
    end === 'expired'
      ? 'This request could not be executed before the completion window expired.'
      : 'This request was not executed because the batch was cancelled.'
  const error = { code, message }
  return {
    failed: true,
    text: JSON.stringify({ id, custom_id: line.customId, response: null, error }),
  }
}

function writeFiles(state: OpenAIBatchState, job: Job, done: number, end: string) {
  const output: string[] = []
  const errors: string[] = []
  job.lines.forEach((_line, index) => {
    const { failed, text } = outputLine(job, index, done, end)
    ;(failed ? errors : output).push(text)
  })
  // Not in input order, as OpenAI warns: the newest finished first.
  output.reverse()
  const outputId = output.length
    ? storeFile(state, 'batch_output', `${job.id}_output.jsonl`, output.join('\n') + '\n').id
    : null
  const errorId = errors.length
    ? storeFile(state, 'batch_output', `${job.id}_error.jsonl`, errors.join('\n') + '\n').id
    : null
  state.written.set(job.id, { output: outputId, error: errorId })
}

function batchObject(state: OpenAIBatchState, job: Job) {
  const now = Date.now()
  const view = viewJob(job, now)
  if (view.end !== null && view.end !== 'failed' && !state.written.has(job.id))
    writeFiles(state, job, view.done, view.end)
  const ids = state.written.get(job.id) ?? { output: null, error: null }
  let completed = 0
  let failed = 0
  for (let index = 0; index < view.done; index++)
    lineFailed(job.lines[index]) ? failed++ : completed++
  const ended = view.endedAt === null ? null : unixSeconds(view.endedAt)
  const status = view.end ?? (view.cancelling ? 'cancelling' : 'in_progress')
  return {
    id: job.id,
    object: 'batch',
    endpoint: job.endpoint,
    errors:
      job.failure === null
        ? null
        : { object: 'list', data: [{ ...job.failure, param: null, line: null }] },
    input_file_id: job.inputFileId,
    completion_window: '24h',
    status,
    output_file_id: ids.output,
    error_file_id: ids.error,
    created_at: unixSeconds(job.createdAt),
    in_progress_at: job.failure === null ? unixSeconds(job.createdAt) : null,
    expires_at: unixSeconds(job.createdAt + 24 * 3600_000),
    finalizing_at: view.end === 'completed' ? ended : null,
    completed_at: view.end === 'completed' ? ended : null,
    failed_at: view.end === 'failed' ? ended : null,
    expired_at: view.end === 'expired' ? ended : null,
    cancelling_at: job.cancelAt === null ? null : unixSeconds(job.cancelAt),
    cancelled_at: view.end === 'cancelled' ? ended : null,
    request_counts: { total: job.lines.length, completed, failed },
    metadata: job.metadata,
  }
}

async function upload(state: OpenAIBatchState, request: Request): Promise<Response> {
  let form: FormData
  try {
    form = await request.formData()
  } catch {
    return invalid('the body must be multipart/form-data with the fields purpose and file')
  }
  const purpose = form.get('purpose')
  const file = form.get('file')
  if (purpose !== 'batch') return invalid("'purpose' must be 'batch' for a batch input file")
  if (!(file instanceof Blob)) return invalid("'file' is required: the JSONL input file")
  if (file.size > OPENAI_BATCH_MAX_BYTES) return invalid('the file exceeds 200 MB')
  const name = file instanceof File ? file.name : 'input.jsonl'
  return jsonResponse(fileObject(storeFile(state, 'batch', name, await file.text())))
}

async function create(state: OpenAIBatchState, request: Request): Promise<Response> {
  let body: Record<string, unknown>
  try {
    body = (await request.json()) as Record<string, unknown>
  } catch {
    return invalid('the body is not valid JSON')
  }
  const endpoint = String(body.endpoint)
  if (!ENDPOINTS.has(endpoint)) return invalid(`'endpoint' ${endpoint} is not supported`)
  if (body.completion_window !== '24h') return invalid("'completion_window' must be '24h'")
  const file = state.files.get(String(body.input_file_id))
  if (!file || file.purpose !== 'batch')
    return invalid(`No such File object: ${String(body.input_file_id)}`, 404)
  if (state.options().batchCreateMs > 0) await Bun.sleep(state.options().batchCreateMs)
  const o = state.options()
  const job: Job = {
    id: state.book.nextId('batch_sim'),
    dialect: 'openai',
    lines: [],
    createdAt: Date.now(),
    turnaroundMs: o.batchTurnaroundMs,
    expireAtMs: o.batchExpireMs === null ? null : Date.now() + o.batchExpireMs,
    cancelAt: null,
    cancelDelayMs: o.batchCancelMs,
    failure: o.batchFailCode === null ? null : { code: o.batchFailCode, message: 'simulated' },
    metadata: (body.metadata as Record<string, string> | undefined) ?? null,
    endpoint,
    inputFileId: file.id,
  }
  job.failure ??= await readLines(state, job, file.text)
  return jsonResponse(batchObject(state, state.book.add(job)))
}

/** Fills the job's lines from the input file; a problem fails the batch, as OpenAI does. */
async function readLines(state: OpenAIBatchState, job: Job, text: string) {
  const o = state.options()
  const rows = text.split('\n').filter((row) => row.trim() !== '')
  if (rows.length > OPENAI_BATCH_MAX_LINES)
    return { code: 'too_many_requests', message: 'the file has more than 50,000 requests' }
  const seen = new Set<string>()
  const models = new Set<string>()
  for (const [index, row] of rows.entries()) {
    let line: { custom_id?: unknown; method?: unknown; url?: unknown; body?: unknown }
    try {
      line = JSON.parse(row)
    } catch {
      return { code: 'invalid_json_line', message: `line ${index + 1} is not valid JSON` }
    }
    const customId = String(line.custom_id)
    if (typeof line.custom_id !== 'string' || seen.has(customId))
      return { code: 'duplicate_custom_id', message: `line ${index + 1}: custom_id` }
    seen.add(customId)
    if (line.url !== job.endpoint)
      return { code: 'mismatched_endpoint', message: `line ${index + 1}: url` }
    const lineBody = (line.body ?? {}) as Record<string, unknown>
    models.add(String(lineBody.model))
    const id = `chatcmpl-${job.id}-${index}`
    const request = {
      dialect: 'openai' as const,
      endpoint: job.endpoint,
      customId,
      body: lineBody,
      id,
    }
    job.lines.push({ ...(await answerLine(request, o, state.draw)), request: request.body })
  }
  if (models.size > 1)
    return { code: 'mismatched_model', message: 'every line of a batch must use one model' }
  return null
}

function list(state: OpenAIBatchState, url: URL): Response {
  const limit = Math.min(100, Math.max(1, Number(url.searchParams.get('limit') ?? 20) || 20))
  const after = url.searchParams.get('after')
  let jobs = state.book.list('openai')
  if (after !== null) {
    const at = jobs.findIndex((job) => job.id === after)
    jobs = at < 0 ? [] : jobs.slice(at + 1)
  }
  const data = jobs.slice(0, limit).map((job) => batchObject(state, job))
  return jsonResponse({
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: jobs.length > limit,
  })
}

function cancel(state: OpenAIBatchState, job: Job): Response {
  const view = viewJob(job, Date.now())
  if (view.end !== null) return invalid(`Cannot cancel a batch with status '${view.end}'.`, 409)
  if (job.cancelAt === null) {
    job.cancelAt = Date.now()
    state.book.counts.cancelled++
  }
  return jsonResponse(batchObject(state, job))
}
