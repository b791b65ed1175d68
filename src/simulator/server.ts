/**
 * The upstream simulator: an OpenAI- and Anthropic-compatible server with honest usage and
 * seeded faults, for tests and benches. Bun.serve directly, no framework: it shares two cores
 * with the gateway under load and must answer well over 6,000 requests/s at 50 ms latency.
 */
import { countMessageTokens } from './anthropic-routes.ts'
import { metricsText } from './gpu-queue.ts'
import { authorized, hungUp, infer, unauthorized } from './infer.ts'
import type { LoraStats } from './lora-slots.ts'
import type { SimulatorOptions } from './options.ts'
import { errorResponse, jsonResponse, type Dialect } from './respond.ts'
import {
  batchesOf,
  configure,
  createSimState,
  gpuOf,
  type ReceivedRequest,
  type SimBatches,
  type SimState,
} from './sim-state.ts'
import type { SimStats } from './stats.ts'

export type { SimulatorOptions } from './options.ts'
export type { SimStats, FaultKind } from './stats.ts'
export type { LoraStats } from './lora-slots.ts'
export type { ReceivedRequest, SimBatches } from './sim-state.ts'

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

const inferencePaths = new Set([
  '/v1/chat/completions',
  '/v1/embeddings',
  '/v1/messages',
  '/v1/responses',
])

function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  const query = url.indexOf('?', start)
  return query < 0 ? url.slice(start) : url.slice(start, query)
}

async function readJson(request: Request): Promise<unknown> {
  try {
    return await request.json()
  } catch {
    return null
  }
}

/** Starts a simulator; resolves once it is listening. */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const state = createSimState(options)
  let server = serve(state, state.current.port)
  const port = server.port ?? state.current.port
  const host = state.current.hostname === '0.0.0.0' ? '127.0.0.1' : state.current.hostname
  state.url = `http://${host}:${port}`
  return {
    url: state.url,
    port,
    async stop() {
      for (const release of [...state.hanging]) release()
      await server.stop(true)
    },
    configure: (partial) => configure(state, partial),
    stats: () => state.stats.snapshot(),
    resetStats: () => resetStats(state),
    received: () => [...state.received],
    lora: () => state.lora.snapshot(),
    batches: () => batchesOf(state),
    async restart(downMs = 0) {
      for (const release of [...state.hanging]) release()
      await server.stop(true)
      state.lora.clear()
      if (downMs > 0) await Bun.sleep(downMs)
      server = serve(state, port)
    },
  }
}

function resetStats(state: SimState): void {
  state.stats.reset()
  state.lora.resetStats()
}

function serve(state: SimState, port: number) {
  return Bun.serve({
    hostname: state.current.hostname,
    port,
    // Hanging requests must hang until the client gives up, not until Bun's 10 s idle default.
    idleTimeout: 0,
    async fetch(request) {
      const path = pathOf(request.url)
      state.stats.arrive(path)
      try {
        const response = await route(state, request, path)
        if (response !== hungUp) state.stats.status(response.status)
        return response
      } finally {
        state.stats.leave()
      }
    },
    error(error) {
      state.stats.status(500)
      const message = `simulator bug: ${error.message}`
      return errorResponse('openai', 500, { type: 'server_error', message })
    },
  })
}

async function route(state: SimState, request: Request, path: string): Promise<Response> {
  const current = state.current
  if (request.method === 'POST' && inferencePaths.has(path)) {
    state.inferenceInFlight++
    try {
      return await infer(state, request, path)
    } finally {
      state.inferenceInFlight--
    }
  }
  if (request.method === 'POST' && path === '/v1/messages/count_tokens')
    return countTokens(state, request)
  if (request.method === 'GET' && path === '/v1/models') return listModels(state)
  if (request.method === 'POST' && current.maxLoras !== null) {
    if (path === '/v1/load_lora_adapter')
      return state.lora.load(await readJson(request), current.maxLoras, current.loraLoadMs)
    if (path === '/v1/unload_lora_adapter') return state.lora.unload(await readJson(request))
  }
  if (path.startsWith('/sim/')) return admin(state, request, path)
  const batches = batchRoute(state, request, path)
  if (batches !== null) return batches
  if (request.method === 'GET' && path === '/metrics' && current.gpuCapacity !== null) {
    const text = metricsText(gpuOf(state), current.gpuCapacity, current.models[0] ?? 'sim-chat')
    return new Response(text, {
      headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' },
    })
  }
  const message = `no route ${request.method} ${path}`
  return errorResponse('openai', 404, { type: 'invalid_request_error', message })
}

async function countTokens(state: SimState, request: Request): Promise<Response> {
  const key = state.current.requireApiKey
  if (key !== null && !authorized(request, 'anthropic', key)) return unauthorized('anthropic')
  const body = (await request.json().catch(() => null)) as Record<string, unknown> | null
  if (typeof body !== 'object' || body === null) {
    const message = 'the body must be a JSON object'
    return errorResponse('anthropic', 400, { type: 'invalid_request_error', message })
  }
  return countMessageTokens(body)
}

function listModels(state: SimState): Response {
  const current = state.current
  const data: Record<string, unknown>[] = current.models.map((id) => ({
    id,
    object: 'model',
    created: 0,
    owned_by: 'sim',
  }))
  // vLLM lists each loaded fine-tune (LoRA adapter) as a model of its own, its base as `parent`.
  for (const [id, root] of state.lora.entries()) {
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

/** The two batch APIs, behind the key; null when the path is neither's. */
function batchRoute(state: SimState, request: Request, path: string): Promise<Response> | null {
  const dialect: Dialect | null = state.anthropicBatches.handles(path)
    ? 'anthropic'
    : state.openaiBatches.handles(path)
      ? 'openai'
      : null
  if (dialect === null) return null
  const key = state.current.requireApiKey
  if (key !== null && !authorized(request, dialect, key))
    return Promise.resolve(unauthorized(dialect))
  const api = dialect === 'anthropic' ? state.anthropicBatches : state.openaiBatches
  return api.handle(request, path)
}

async function admin(state: SimState, request: Request, path: string): Promise<Response> {
  if (path === '/sim/stats') return jsonResponse(state.stats.snapshot())
  if (path === '/sim/lora') return jsonResponse(state.lora.snapshot())
  if (path === '/sim/batches') return jsonResponse(batchesOf(state))
  if (path === '/sim/reset' && request.method === 'POST') {
    resetStats(state)
    return jsonResponse({ ok: true })
  }
  if (path === '/sim/config' && request.method === 'POST') {
    configure(state, (await request.json()) as SimulatorOptions)
    return jsonResponse(state.current)
  }
  const message = `no route ${path}`
  return errorResponse('openai', 404, { type: 'invalid_request_error', message })
}
