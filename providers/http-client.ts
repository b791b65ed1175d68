/**
 * The only module that makes upstream HTTP calls: one keep-alive connection pool per replica.
 *
 * undici's Pool, not Bun's fetch. Measured against the simulator on this 2-core box (load
 * generator and simulator in two processes, `bun bench/simulator-load.ts --client undici|fetch`):
 * - 256 in flight, 0 ms latency: fetch ≈ 20–22k requests/s, undici ≈ 18–19k; fetch spends
 *   less client CPU per request, but closes and reopens sockets past its 64 idle ones;
 * - 256 in flight, 50 ms latency: undici 4,911/s, fetch 5,000/s (the ceiling is 5,120);
 * - 512 in flight, 50 ms latency: undici 8,969/s, fetch 5,016/s — Bun's fetch runs at most
 *   256 requests at once per process (BUN_CONFIG_MAX_HTTP_REQUESTS, read at start-up only;
 *   setting it from code had no effect) and queues the rest.
 * LLM calls take seconds, so thousands in flight are normal: the hard 256 cap decides it.
 * The bare 'undici' specifier resolves to Bun's stand-in; 'undici/index.js' is the real package.
 */
import { Pool } from 'undici/index.js'

export interface HttpRequest {
  method: 'GET' | 'POST'
  /** Appended to the base URL's path: '/chat/completions'. */
  path: string
  headers: Record<string, string>
  body?: string
  /** Aborts the request and the reading of its body. */
  signal: AbortSignal
}

export interface HttpResponse {
  status: number
  header(name: string): string | null
  /** The whole body as text. */
  text(): Promise<string>
  /** The body as it arrives. */
  chunks(): AsyncIterable<Uint8Array>
  /** Drops the body unread so the connection can be reused or closed. */
  discard(): void
}

export interface HttpClient {
  readonly baseUrl: string
  request(request: HttpRequest): Promise<HttpResponse>
  close(): Promise<void>
}

export interface HttpClientOptions {
  /** Most connections kept to this replica. */
  connections: number
  connectTimeoutMs: number
}

function ignore(): void {}

/** A pooled client for one base URL such as http://127.0.0.1:8090/v1. */
export function createHttpClient(baseUrl: string, options: HttpClientOptions): HttpClient {
  const url = new URL(baseUrl)
  const basePath = url.pathname.replace(/\/+$/, '')
  const pool = new Pool(url.origin, {
    connections: Math.max(1, options.connections),
    connectTimeout: options.connectTimeoutMs,
    // The caller's deadline covers the whole call, body included; undici's own per-phase
    // timers (300 s by default) would only fire later and less precisely.
    headersTimeout: 0,
    bodyTimeout: 0,
  })

  return {
    baseUrl,
    async request(request) {
      const response = await pool.request({
        path: basePath + request.path,
        method: request.method,
        headers: request.headers,
        body: request.body ?? null,
        signal: request.signal,
      })
      const body = response.body
      return {
        status: response.statusCode,
        header(name) {
          const value = response.headers[name]
          if (value === undefined) return null
          return Array.isArray(value) ? value.join(', ') : value
        },
        text: () => body.text(),
        chunks: () => body,
        discard() {
          // Destroying emits 'error' (AbortError); with no listener that would be an
          // uncaught exception, and the body is being dropped on purpose.
          body.on('error', ignore)
          body.destroy()
        },
      }
    },
    async close() {
      await pool.destroy()
    },
  }
}
