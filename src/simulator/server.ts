/**
 * The upstream simulator: an OpenAI- and Anthropic-compatible server with honest usage and
 * seeded faults, for tests and benches. Bun.serve directly, no framework: it shares two cores
 * with the gateway under load and must answer well over 6,000 requests/s at 50 ms latency.
 */
import { createAnthropicBatchApi } from './anthropic-batch-api.ts'
import { countMessageTokens, prepareMessages } from './anthropic-routes.ts'
import { JobBook, viewJob } from './batch-jobs.ts'
import { GpuQueue, loadReport, metricsText } from './gpu-queue.ts'
import { LoraSlots, modelMissing, type LoraStats } from './lora-slots.ts'
import { createOpenAIBatchApi } from './openai-batch-api.ts'
import { prepareChat, prepareEmbeddings } from './openai-routes.ts'
import { prepareResponses } from './responses-routes.ts'
import {
  defaultSimulatorOptions,
  mergeOptions,
  type ResolvedSimulatorOptions,
  type SimulatorOptions,
} from './options.ts'
import type { Prepared } from './prepared.ts'
import { createRandom } from './prng.ts'
import {
  errorResponse,
  jsonResponse,
  malformedResponse,
  payloadResponse,
  resetResponse,
  trickleResponse,
  type Dialect,
} from './respond.ts'
import { StatsRecorder, type FaultKind, type SimStats } from './stats.ts'

export type { SimulatorOptions } from './options.ts'
export type { SimStats, FaultKind } from './stats.ts'
export type { LoraStats } from './lora-slots.ts'

/** A running simulator. */
export interface Simulator {
  /** http://127.0.0.1:PORT, without a trailing slash; OpenAI base URL is `${url}/v1`. */
  readonly url: string
  readonly port: number
  /** Closes the listener and every open connection at once, like a killed replica. */
  stop(): Promise<void>
  /** Changes behaviour from the next request on; port and hostname stay as started. */
  configure(options: SimulatorOptions): void
  stats(): SimStats
  resetStats(): void
  /** The latest inference requests as received (path and body text), oldest first; see keepBodies. */
  received(): ReceivedRequest[]
  /** LoRA mode's counters (maxLoras): loads, unloads and answers per fine-tune, most held at once. */
  lora(): LoraStats
  /**
   * A replica restart: the listener and every connection close, nothing answers for `downMs`,
   * then it listens again on the same port holding no fine-tune. Counters are kept.
   */
  restart(downMs?: number): Promise<void>
  /** Every provider batch (both batch APIs) as it stands now, oldest first, plus the counts. */
  batches(): SimBatches
}

/** What reached the simulator's batch APIs (docs/batch-lanes.md). */
export interface SimBatches {
  created: number
  cancelled: number
  jobs: {
    id: string
    dialect: 'openai' | 'anthropic'
    customIds: string[]
    status: string
    metadata: Record<string, string> | null
  }[]
}

/** One inference request as it arrived. */
export interface ReceivedRequest {
  path: string
  /** The body exactly as sent, UTF-8 decoded. */
  text: string
}

const inferencePaths = new Set([
  '/v1/chat/completions',
  '/v1/embeddings',
  '/v1/messages',
  '/v1/responses',
])

// Returned by a hanging request once its client has gone; never reaches a socket.
const hungUp = new Response(null, { status: 499 })

function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  const query = url.indexOf('?', start)
  return query < 0 ? url.slice(start) : url.slice(start, query)
}

function authorized(request: Request, dialect: Dialect, key: string): boolean {
  if (dialect === 'anthropic') return request.headers.get('x-api-key') === key
  return request.headers.get('authorization') === `Bearer ${key}`
}

async function readJson(request: Request): Promise<unknown> {
  try {
    return await request.json()
  } catch {
    return null
  }
}

function retryAfterHeaders(seconds: number | null): Record<string, string> {
  if (seconds === null) return {}
  if (Number.isInteger(seconds)) return { 'retry-after': String(seconds) }
  return {
    'retry-after-ms': String(Math.round(seconds * 1000)),
    'retry-after': String(Math.ceil(seconds)),
  }
}

function faultTableOf(o: ResolvedSimulatorOptions): [FaultKind, number][] {
  return [
    ['rate_limited', o.rate429],
    ['server_error', o.errorRate],
    ['timeout', o.timeoutRate],
    ['reset', o.resetRate],
    ['malformed', o.malformedRate],
    ['no_usage', o.noUsageRate],
    ['trickle', o.trickleRate],
  ]
}

/** Starts a simulator; resolves once it is listening. */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  let current: ResolvedSimulatorOptions = mergeOptions(defaultSimulatorOptions, options)
  // The fault rates in draw order, rebuilt when the options change rather than per request.
  let faultTable = faultTableOf(current)
  // Two streams, so changing the jitter does not shift which requests fault.
  let faultRandom = createRandom(current.seed)
  let jitterRandom = createRandom(current.seed ^ 0x9e3779b9)
  // Flex refusals from a stream of their own: the flex rate does not shift the other faults.
  let flexRandom = createRandom(current.seed ^ 0x5bd1e995)
  const stats = new StatsRecorder()
  const received: ReceivedRequest[] = []
  const hanging = new Set<() => void>()
  let inferenceInFlight = 0
  let nextId = 0
  // Starts full: the first second may use its whole allowance.
  let bucketTokens = Number.POSITIVE_INFINITY
  let bucketAt = performance.now()
  // GPU-pool mode's admission queue; made on first use so the mode can be switched on live.
  let gpu: GpuQueue | null = null
  const lora = new LoraSlots()
  const book = new JobBook()
  // Batch lines' server errors from a stream of their own, like flex refusals.
  let batchRandom = createRandom(current.seed ^ 0x27d4eb2f)
  const drawBatch = () => batchRandom()
  const openaiBatches = createOpenAIBatchApi(book, () => current, drawBatch)
  const anthropicBatches = createAnthropicBatchApi(
    book,
    () => current,
    drawBatch,
    () => simulator.url,
  )

  function tooMany(dialect: Dialect, kind: FaultKind): Response {
    stats.fault(kind)
    const type = dialect === 'openai' ? 'requests' : 'rate_limit_error'
    const headers = retryAfterHeaders(current.retryAfterSeconds)
    const message = 'Rate limit reached (simulated); please retry later'
    return errorResponse(dialect, 429, type, message, 'rate_limit_exceeded', headers)
  }

  function takeRateToken(perSecond: number): boolean {
    const now = performance.now()
    bucketTokens = Math.min(perSecond, bucketTokens + ((now - bucketAt) / 1000) * perSecond)
    bucketAt = now
    if (bucketTokens < 1) return false
    bucketTokens--
    return true
  }

  /** One draw per inference request, so a seed replays the same pattern in arrival order. */
  function drawFault(): FaultKind | null {
    let r = faultRandom()
    for (const [kind, rate] of faultTable) {
      if (r < rate) return kind
      r -= rate
    }
    return null
  }

  function hang(request: Request): Promise<Response> {
    return new Promise((resolve) => {
      const release = () => {
        hanging.delete(release)
        resolve(hungUp)
      }
      hanging.add(release)
      request.signal.addEventListener('abort', release, { once: true })
    })
  }

  function prepare(path: string, body: Record<string, unknown>, id: number): Prepared | Response {
    if (path === '/v1/chat/completions')
      return prepareChat(body, `chatcmpl-sim${id}`, current.usageFactor, current.structuredAnswers)
    if (path === '/v1/embeddings') return prepareEmbeddings(body, current.embeddingDims)
    if (path === '/v1/responses') return prepareResponses(body, `sim${id}`, current.usageFactor)
    return prepareMessages(body, `msg_sim${id}`, current.usageFactor, current.structuredAnswers)
  }

  async function infer(request: Request, path: string): Promise<Response> {
    const o = current
    const dialect: Dialect = path === '/v1/messages' ? 'anthropic' : 'openai'
    if (o.requireApiKey !== null && !authorized(request, dialect, o.requireApiKey)) {
      const type = dialect === 'openai' ? 'invalid_request_error' : 'authentication_error'
      return errorResponse(dialect, 401, type, 'Incorrect API key provided', 'invalid_api_key')
    }
    if (dialect === 'anthropic' && !request.headers.get('anthropic-version')) {
      return errorResponse(
        dialect,
        400,
        'invalid_request_error',
        'anthropic-version: header is required',
      )
    }
    let body: unknown
    try {
      const text = await request.text()
      if (o.keepBodies > 0) {
        received.push({ path, text })
        if (received.length > o.keepBodies) received.splice(0, received.length - o.keepBodies)
      }
      body = JSON.parse(text)
    } catch {
      return errorResponse(dialect, 400, 'invalid_request_error', 'the body is not valid JSON')
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return errorResponse(dialect, 400, 'invalid_request_error', 'the body must be a JSON object')
    }
    const id = ++nextId
    const prepared = prepare(path, body as Record<string, unknown>, id)
    if (prepared instanceof Response) return prepared
    stats.inference(prepared.key, Date.now())

    const model = String((body as { model: unknown }).model)
    const fineTune = o.maxLoras !== null && lora.has(model)
    if (o.maxLoras !== null && !fineTune && !o.models.includes(model)) {
      lora.missing()
      return modelMissing(model)
    }
    if (model.startsWith('fail-400')) {
      const message = `The simulator refuses model '${model}'`
      return errorResponse(dialect, 400, 'invalid_request_error', message, 'invalid_value')
    }
    if (model.startsWith('ctx-overflow')) {
      const message =
        dialect === 'openai'
          ? "This model's maximum context length is 8192 tokens. However, your messages " +
            'resulted in 9000 tokens. Please reduce the length of the messages.'
          : 'prompt is too long: 9000 tokens > 8192 maximum'
      return errorResponse(
        dialect,
        400,
        'invalid_request_error',
        message,
        'context_length_exceeded',
      )
    }
    if (o.maxConcurrency !== null && inferenceInFlight > o.maxConcurrency) {
      return tooMany(dialect, 'concurrency_cap')
    }
    if (o.maxRequestsPerSecond !== null && !takeRateToken(o.maxRequestsPerSecond)) {
      return tooMany(dialect, 'rate_cap')
    }
    const flex =
      dialect === 'openai' && (body as { service_tier?: unknown }).service_tier === 'flex'
    if (flex && o.flexUnavailableRate > 0 && flexRandom() < o.flexUnavailableRate) {
      stats.fault('flex_unavailable')
      const message = 'Resource unavailable: flex capacity is exhausted (simulated); retry later'
      return errorResponse(dialect, 429, 'invalid_request_error', message, 'resource_unavailable')
    }
    if (flex && o.flexLatencyMs > 0) await Bun.sleep(o.flexLatencyMs)
    const answered =
      o.gpuCapacity !== null
        ? inferOnPool(request, dialect, prepared, id)
        : answer(request, dialect, prepared, id, o)
    if (!fineTune) return answered
    const response = await answered
    if (response.status === 200) lora.served(model)
    return response
  }

  /** GPU-pool mode: wait in line for a slot (or 503 when the line is full), hold it to the answer. */
  async function inferOnPool(
    request: Request,
    dialect: Dialect,
    prepared: Prepared,
    id: number,
  ): Promise<Response> {
    const o = current
    // Held locally: a request releases the queue it joined, even if the mode is switched since.
    const pool = (gpu ??= new GpuQueue(o.gpuCapacity ?? 0, o.gpuMaxQueued))
    const admission = pool.admit(request.signal)
    if (admission === 'full') {
      stats.fault('queue_full')
      return poolFull(dialect)
    }
    stats.waiting(pool.waiting)
    if (!(await admission)) return hungUp
    try {
      // The options as they are when the request starts running, not when it joined the line.
      const response = await answer(request, dialect, prepared, id, current)
      const format = request.headers.get('endpoint-load-metrics-format')
      if (format !== null && response !== hungUp) {
        const report = loadReport(format, pool, current.gpuCapacity ?? pool.running)
        if (report !== null) response.headers.set('endpoint-load-metrics', report)
      }
      return response
    } finally {
      pool.release()
    }
  }

  async function answer(
    request: Request,
    dialect: Dialect,
    prepared: Prepared,
    id: number,
    o: ResolvedSimulatorOptions,
  ): Promise<Response> {
    const fault = drawFault()
    if (fault === 'rate_limited') return tooMany(dialect, fault)
    if (fault !== null) stats.fault(fault)

    const delayMs = o.latencyMs + (o.jitterMs > 0 ? jitterRandom() * o.jitterMs : 0)
    if (delayMs > 0) await Bun.sleep(delayMs)

    const requestId = `req_sim${id}`
    switch (fault) {
      case 'server_error': {
        const type = dialect === 'openai' ? 'server_error' : 'api_error'
        return errorResponse(dialect, 500, type, 'The server had an error (simulated)')
      }
      case 'timeout':
        return hang(request)
      case 'reset':
        return resetResponse(prepared.build(false))
      case 'malformed':
        return malformedResponse(prepared.build(false))
      case 'no_usage':
        return payloadResponse(prepared.build(true), requestId)
      case 'trickle':
        return trickleResponse(prepared.build(false), o.trickleMs)
      default:
        return payloadResponse(prepared.build(false), requestId)
    }
  }

  /** vLLM's answer when its queue is full: 503 in its OpenAI-style error body (code = status). */
  function poolFull(dialect: Dialect): Response {
    const message = 'The server is at capacity: the request queue is full (simulated)'
    if (dialect === 'anthropic') {
      return errorResponse(dialect, 503, 'overloaded_error', message)
    }
    const body = { error: { message, type: 'ServiceUnavailableError', param: null, code: 503 } }
    return jsonResponse(body, 503)
  }

  async function admin(request: Request, path: string): Promise<Response> {
    if (path === '/sim/stats') return jsonResponse(stats.snapshot())
    if (path === '/sim/lora') return jsonResponse(lora.snapshot())
    if (path === '/sim/batches') return jsonResponse(simulator.batches())
    if (path === '/sim/reset' && request.method === 'POST') {
      stats.reset()
      lora.resetStats()
      return jsonResponse({ ok: true })
    }
    if (path === '/sim/config' && request.method === 'POST') {
      simulator.configure((await request.json()) as SimulatorOptions)
      return jsonResponse(current)
    }
    return errorResponse('openai', 404, 'invalid_request_error', `no route ${path}`)
  }

  async function route(request: Request, path: string): Promise<Response> {
    if (request.method === 'POST' && inferencePaths.has(path)) {
      inferenceInFlight++
      try {
        return await infer(request, path)
      } finally {
        inferenceInFlight--
      }
    }
    if (request.method === 'POST' && path === '/v1/messages/count_tokens') {
      if (
        current.requireApiKey !== null &&
        !authorized(request, 'anthropic', current.requireApiKey)
      )
        return errorResponse('anthropic', 401, 'authentication_error', 'Incorrect API key provided')
      const body = (await request.json().catch(() => null)) as Record<string, unknown> | null
      if (typeof body !== 'object' || body === null)
        return errorResponse(
          'anthropic',
          400,
          'invalid_request_error',
          'the body must be a JSON object',
        )
      return countMessageTokens(body)
    }
    if (request.method === 'GET' && path === '/v1/models') {
      const data: Record<string, unknown>[] = current.models.map((id) => ({
        id,
        object: 'model',
        created: 0,
        owned_by: 'sim',
      }))
      // vLLM lists each loaded fine-tune (LoRA adapter) as a model of its own, its base as `parent`.
      for (const [id, root] of lora.entries()) {
        data.push({
          id,
          object: 'model',
          created: 0,
          owned_by: 'vllm',
          root,
          parent: current.models[0] ?? null,
        })
      }
      return jsonResponse({ object: 'list', data })
    }
    if (request.method === 'POST' && current.maxLoras !== null) {
      if (path === '/v1/load_lora_adapter')
        return lora.load(await readJson(request), current.maxLoras, current.loraLoadMs)
      if (path === '/v1/unload_lora_adapter') return lora.unload(await readJson(request))
    }
    if (path.startsWith('/sim/')) return admin(request, path)
    const batchApi = anthropicBatches.handles(path)
      ? anthropicBatches
      : openaiBatches.handles(path)
        ? openaiBatches
        : null
    if (batchApi !== null) {
      const dialect: Dialect = batchApi === anthropicBatches ? 'anthropic' : 'openai'
      if (current.requireApiKey !== null && !authorized(request, dialect, current.requireApiKey)) {
        const type = dialect === 'openai' ? 'invalid_request_error' : 'authentication_error'
        return errorResponse(dialect, 401, type, 'Incorrect API key provided', 'invalid_api_key')
      }
      return batchApi.handle(request, path)
    }
    if (request.method === 'GET' && path === '/metrics' && current.gpuCapacity !== null) {
      gpu ??= new GpuQueue(current.gpuCapacity, current.gpuMaxQueued)
      const text = metricsText(gpu, current.gpuCapacity, current.models[0] ?? 'sim-chat')
      return new Response(text, {
        headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' },
      })
    }
    return errorResponse(
      'openai',
      404,
      'invalid_request_error',
      `no route ${request.method} ${path}`,
    )
  }

  const serve = (port: number) =>
    Bun.serve({
      hostname: current.hostname,
      port,
      // Hanging requests must hang until the client gives up, not until Bun's 10 s idle default.
      idleTimeout: 0,
      async fetch(request) {
        const path = pathOf(request.url)
        stats.arrive(path)
        try {
          const response = await route(request, path)
          if (response !== hungUp) stats.status(response.status)
          return response
        } finally {
          stats.leave()
        }
      },
      error(error) {
        stats.status(500)
        return errorResponse('openai', 500, 'server_error', `simulator bug: ${error.message}`)
      },
    })
  let server = serve(current.port)

  const port = server.port ?? current.port
  const host = current.hostname === '0.0.0.0' ? '127.0.0.1' : current.hostname
  const simulator: Simulator = {
    url: `http://${host}:${port}`,
    port,
    async stop() {
      for (const release of [...hanging]) release()
      await server.stop(true)
    },
    configure(partial) {
      const { port: _port, hostname: _hostname, ...rest } = partial
      current = mergeOptions(current, rest)
      faultTable = faultTableOf(current)
      if (gpu !== null) {
        // Switched off: nothing bounds the waiters any more; otherwise the new limits apply.
        if (current.gpuCapacity !== null) gpu.resize(current.gpuCapacity, current.gpuMaxQueued)
        else {
          gpu.drain()
          gpu = null
        }
      }
      if (partial.seed !== undefined) {
        faultRandom = createRandom(current.seed)
        jitterRandom = createRandom(current.seed ^ 0x9e3779b9)
        flexRandom = createRandom(current.seed ^ 0x5bd1e995)
        batchRandom = createRandom(current.seed ^ 0x27d4eb2f)
      }
    },
    stats: () => stats.snapshot(),
    resetStats: () => {
      stats.reset()
      lora.resetStats()
    },
    received: () => [...received],
    lora: () => lora.snapshot(),
    batches: () => ({
      ...book.counts,
      jobs: [...book.jobs.values()].map((job) => {
        const view = viewJob(job, Date.now())
        return {
          id: job.id,
          dialect: job.dialect,
          customIds: job.lines.map((line) => line.customId),
          status: view.end ?? (view.cancelling ? 'cancelling' : 'in_progress'),
          metadata: job.metadata,
        }
      }),
    }),
    async restart(downMs = 0) {
      for (const release of [...hanging]) release()
      await server.stop(true)
      lora.clear()
      if (downMs > 0) await Bun.sleep(downMs)
      server = serve(port)
    },
  }
  return simulator
}
