/**
 * One inference request through the simulator: refused as a provider would refuse it (key,
 * model, caps, flex capacity), else answered after the latency with the seeded fault drawn for
 * it, in GPU-pool mode once a slot is free.
 */
import { prepareMessages } from './anthropic-routes.ts'
import { loadReport } from './gpu-queue.ts'
import { modelMissing } from './lora-slots.ts'
import { prepareChat, prepareEmbeddings } from './openai-routes.ts'
import type { ResolvedSimulatorOptions } from './options.ts'
import type { Prepared } from './prepared.ts'
import {
  errorResponse,
  jsonResponse,
  malformedResponse,
  payloadResponse,
  resetResponse,
  cutResponse,
  trickleResponse,
  type Dialect,
} from './respond.ts'
import { prepareResponses } from './responses-routes.ts'
import { gpuOf, type SimState } from './sim-state.ts'
import type { FaultKind } from './stats.ts'

/** Returned by a hanging request once its client has gone; never reaches a socket. */
export const hungUp = new Response(null, { status: 499 })

/** An inference request once its body is read and its answer prepared. */
interface InferenceCall {
  request: Request
  dialect: Dialect
  prepared: Prepared
  id: number
}

/** Whether the request carries the key, in the dialect's header. */
export function authorized(request: Request, dialect: Dialect, key: string): boolean {
  if (dialect === 'anthropic') return request.headers.get('x-api-key') === key
  return request.headers.get('authorization') === `Bearer ${key}`
}

/** The 401 for a missing or wrong key, in the dialect's envelope. */
export function unauthorized(dialect: Dialect): Response {
  const type = dialect === 'openai' ? 'invalid_request_error' : 'authentication_error'
  const message = 'Incorrect API key provided'
  return errorResponse(dialect, 401, { type, message, code: 'invalid_api_key' })
}

function retryAfterHeaders(seconds: number | null): Record<string, string> {
  if (seconds === null) return {}
  if (Number.isInteger(seconds)) return { 'retry-after': String(seconds) }
  return {
    'retry-after-ms': String(Math.round(seconds * 1000)),
    'retry-after': String(Math.ceil(seconds)),
  }
}

function tooMany(state: SimState, dialect: Dialect, kind: FaultKind): Response {
  state.stats.fault(kind)
  const type = dialect === 'openai' ? 'requests' : 'rate_limit_error'
  const headers = retryAfterHeaders(state.current.retryAfterSeconds)
  const message = 'Rate limit reached (simulated); please retry later'
  return errorResponse(dialect, 429, { type, message, code: 'rate_limit_exceeded' }, headers)
}

function takeRateToken(state: SimState, perSecond: number): boolean {
  const bucket = state.bucket
  const now = performance.now()
  bucket.tokens = Math.min(perSecond, bucket.tokens + ((now - bucket.at) / 1000) * perSecond)
  bucket.at = now
  if (bucket.tokens < 1) return false
  bucket.tokens--
  return true
}

/** One draw per inference request, so a seed replays the same pattern in arrival order. */
function drawFault(state: SimState): FaultKind | null {
  let r = state.random.fault()
  for (const [kind, rate] of state.faultTable) {
    if (r < rate) return kind
    r -= rate
  }
  return null
}

function hang(state: SimState, request: Request): Promise<Response> {
  return new Promise((resolve) => {
    const release = () => {
      state.hanging.delete(release)
      resolve(hungUp)
    }
    state.hanging.add(release)
    request.signal.addEventListener('abort', release, { once: true })
  })
}

function prepare(
  o: ResolvedSimulatorOptions,
  path: string,
  body: Record<string, unknown>,
  id: number,
): Prepared | Response {
  if (path === '/v1/chat/completions') return prepareChat(body, `chatcmpl-sim${id}`, o)
  if (path === '/v1/embeddings') return prepareEmbeddings(body, o.embeddingDims)
  if (path === '/v1/responses')
    return prepareResponses(body, `sim${id}`, o.usageFactor, o.structuredAnswers)
  return prepareMessages(body, `msg_sim${id}`, o.usageFactor, o.structuredAnswers)
}

/** The key and headers checked, the body read (kept when asked) and parsed as a JSON object. */
async function readInferenceBody(
  state: SimState,
  request: Request,
  path: string,
  dialect: Dialect,
): Promise<Record<string, unknown> | Response> {
  const o = state.current
  if (o.requireApiKey !== null && !authorized(request, dialect, o.requireApiKey))
    return unauthorized(dialect)
  if (dialect === 'anthropic' && !request.headers.get('anthropic-version')) {
    const message = 'anthropic-version: header is required'
    return errorResponse(dialect, 400, { type: 'invalid_request_error', message })
  }
  let body: unknown
  try {
    const text = await request.text()
    if (o.keepBodies > 0) {
      const beta = request.headers.get('anthropic-beta')
      state.received.push(beta === null ? { path, text } : { path, text, anthropicBeta: beta })
      if (state.received.length > o.keepBodies)
        state.received.splice(0, state.received.length - o.keepBodies)
    }
    body = JSON.parse(text)
  } catch {
    const message = 'the body is not valid JSON'
    return errorResponse(dialect, 400, { type: 'invalid_request_error', message })
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    const message = 'the body must be a JSON object'
    return errorResponse(dialect, 400, { type: 'invalid_request_error', message })
  }
  return body as Record<string, unknown>
}

/** The models the simulator refuses by name: `fail-400…` and `ctx-overflow…`. */
function refuseModel(dialect: Dialect, model: string): Response | null {
  if (model.startsWith('fail-400')) {
    const message = `The simulator refuses model '${model}'`
    return errorResponse(dialect, 400, {
      type: 'invalid_request_error',
      message,
      code: 'invalid_value',
      param: 'model',
    })
  }
  if (model.startsWith('ctx-overflow')) {
    const message =
      dialect === 'openai'
        ? "This model's maximum context length is 8192 tokens. However, your messages " +
          'resulted in 9000 tokens. Please reduce the length of the messages.'
        : 'prompt is too long: 9000 tokens > 8192 maximum'
    const code = 'context_length_exceeded'
    return errorResponse(dialect, 400, { type: 'invalid_request_error', message, code })
  }
  return null
}

/** The caps' 429s: concurrency, requests per second, and flex capacity (its own stream). */
function refuseOverCaps(
  state: SimState,
  dialect: Dialect,
  o: ResolvedSimulatorOptions,
  flex: boolean,
): Response | null {
  if (o.maxConcurrency !== null && state.inferenceInFlight > o.maxConcurrency)
    return tooMany(state, dialect, 'concurrency_cap')
  if (o.maxRequestsPerSecond !== null && !takeRateToken(state, o.maxRequestsPerSecond))
    return tooMany(state, dialect, 'rate_cap')
  if (flex && o.flexUnavailableRate > 0 && state.random.flex() < o.flexUnavailableRate) {
    state.stats.fault('flex_unavailable')
    const message = 'Resource unavailable: flex capacity is exhausted (simulated); retry later'
    const code = 'resource_unavailable'
    return errorResponse(dialect, 429, { type: 'invalid_request_error', message, code })
  }
  return null
}

/** One inference request, refused or answered. */
export async function infer(state: SimState, request: Request, path: string): Promise<Response> {
  const o = state.current
  const dialect: Dialect = path === '/v1/messages' ? 'anthropic' : 'openai'
  const body = await readInferenceBody(state, request, path, dialect)
  if (body instanceof Response) return body
  const id = ++state.nextId
  // The options as they are once the body is read.
  const prepared = prepare(state.current, path, body, id)
  if (prepared instanceof Response) return prepared
  state.stats.inference(prepared.key, Date.now())

  const model = String(body.model)
  const fineTune = o.maxLoras !== null && state.lora.has(model)
  if (o.maxLoras !== null && !fineTune && !o.models.includes(model)) {
    state.lora.missing()
    return modelMissing(model)
  }
  const flex = dialect === 'openai' && body.service_tier === 'flex'
  const refused = refuseModel(dialect, model) ?? refuseOverCaps(state, dialect, o, flex)
  if (refused !== null) return refused
  if (flex && o.flexLatencyMs > 0) await Bun.sleep(o.flexLatencyMs)
  const call = { request, dialect, prepared, id }
  const answered = o.gpuCapacity !== null ? inferOnPool(state, call) : answer(state, call, o)
  if (!fineTune) return answered
  const response = await answered
  if (response.status === 200) state.lora.served(model)
  return response
}

/** GPU-pool mode: wait in line for a slot (or 503 when the line is full), hold it to the answer. */
async function inferOnPool(state: SimState, call: InferenceCall): Promise<Response> {
  // Held locally: a request releases the queue it joined, even if the mode is switched since.
  const pool = gpuOf(state)
  const admission = pool.admit(call.request.signal)
  if (admission === 'full') {
    state.stats.fault('queue_full')
    return poolFull(call.dialect)
  }
  state.stats.waiting(pool.waiting)
  if (!(await admission)) return hungUp
  try {
    // The options as they are when the request starts running, not when it joined the line.
    const response = await answer(state, call, state.current)
    const format = call.request.headers.get('endpoint-load-metrics-format')
    if (format !== null && response !== hungUp) {
      const report = loadReport(format, pool, state.current.gpuCapacity ?? pool.running)
      if (report !== null) response.headers.set('endpoint-load-metrics', report)
    }
    return response
  } finally {
    pool.release()
  }
}

/** The answer after the latency, or the fault drawn for it (429s at once, as providers send). */
async function answer(
  state: SimState,
  { request, dialect, prepared, id }: InferenceCall,
  o: ResolvedSimulatorOptions,
): Promise<Response> {
  const fault = drawFault(state)
  if (fault === 'rate_limited') return tooMany(state, dialect, fault)
  if (fault !== null) state.stats.fault(fault)

  const delayMs = o.latencyMs + (o.jitterMs > 0 ? state.random.jitter() * o.jitterMs : 0)
  if (delayMs > 0) await Bun.sleep(delayMs)

  const requestId = `req_sim${id}`
  switch (fault) {
    case 'server_error': {
      const type = dialect === 'openai' ? 'server_error' : 'api_error'
      return errorResponse(dialect, 500, { type, message: 'The server had an error (simulated)' })
    }
    case 'timeout':
      return hang(state, request)
    case 'reset':
      return resetResponse(prepared.build(false))
    case 'malformed':
      return malformedResponse(prepared.build(false))
    case 'cut':
      return cutResponse(prepared.build(false))
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
  if (dialect === 'anthropic')
    return errorResponse(dialect, 503, { type: 'overloaded_error', message })
  const body = { error: { message, type: 'ServiceUnavailableError', param: null, code: 503 } }
  return jsonResponse(body, 503)
}
