/**
 * The user CLI's HTTP client: bearer auth, and pacing on the gateway's own rate-limit headers,
 * so a long `--wait` never spends the key's whole per-minute budget and a 429 waits as long as
 * the gateway says instead of hammering it.
 */

export interface ApiOptions {
  url: string
  key: string
  /** Never poll faster than this. */
  minIntervalMs?: number
  sleep?: (ms: number) => Promise<void>
}

/** Thrown for a refusal or an unreachable gateway; `message` is what to tell the person. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly body: unknown = null,
  ) {
    super(message)
  }
}

/**
 * Tries per request when the gateway answers 5xx or 429, or the connection to a gateway that
 * has answered before fails: a gateway restarting under a long `--wait` is back within these
 * (backoff 1 s, 2 s … 16 s, about half a minute in all).
 */
const MAX_TRIES = 6

/**
 * Nothing listens at the URL (refused) or its host has no address, and this gateway has not
 * answered yet: a wrong or unset MULTIGRID_URL, or a gateway not started, which waiting does
 * not mend. One quick retry covers a gateway that is just coming up; then the person is told.
 */
const WRONG_ADDRESS: Record<string, string> = {
  ECONNREFUSED: 'connection refused, nothing listens there',
  ENOTFOUND: 'no such host',
}
const WRONG_ADDRESS_RETRY_MS = 500

const backoff = (attempt: number) => Math.min(30_000, 500 * 2 ** attempt)

/**
 * How long to wait before the next poll: the remaining budget spread over the rest of the
 * window, keeping a quarter of it for whatever else uses the key, and never under `minMs`.
 */
export function pollDelay(
  remaining: number | null,
  resetSeconds: number | null,
  minMs: number,
): number {
  if (remaining === null || resetSeconds === null) return minMs
  const usable = Math.floor(remaining * 0.75)
  if (usable <= 0) return Math.max(minMs, resetSeconds * 1000)
  return Math.max(minMs, Math.ceil((resetSeconds * 1000) / usable))
}

const header = (response: Response, name: string) => {
  const value = response.headers.get(name)
  return value === null || value === '' || Number.isNaN(Number(value)) ? null : Number(value)
}

export function createApi(options: ApiOptions) {
  const base = options.url.replace(/\/+$/, '')
  const minMs = options.minIntervalMs ?? 1_000
  const sleep = options.sleep ?? ((ms: number) => Bun.sleep(ms))
  let nextDelay = minMs
  // Whether the gateway has answered at least once: a refused connection after that is a restart.
  let reached = false

  async function request(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${options.key}`)
    let last: ApiError | null = null
    for (let attempt = 1; attempt <= MAX_TRIES; attempt++) {
      let response: Response
      try {
        response = await fetch(`${base}${path}`, { ...init, headers })
      } catch (error) {
        const wrong = reached ? undefined : WRONG_ADDRESS[(error as { code?: string }).code ?? '']
        last = new ApiError(
          `cannot reach the gateway at ${base}: ${wrong ?? (error as Error).message}`,
          null,
        )
        if (wrong !== undefined ? attempt >= 2 : attempt === MAX_TRIES) break
        await sleep(wrong !== undefined ? WRONG_ADDRESS_RETRY_MS : backoff(attempt))
        continue
      }
      reached = true
      nextDelay = pollDelay(
        header(response, 'x-ratelimit-remaining'),
        header(response, 'x-ratelimit-reset'),
        minMs,
      )
      if (response.status === 429 || response.status >= 500) {
        const body = await readError(response)
        last = new ApiError(body.message, response.status, body.raw)
        // limit_exceeded (too many open batches) does not pass by waiting a few seconds.
        if (body.code === 'limit_exceeded') throw last
        if (attempt === MAX_TRIES) break
        const retryAfter = header(response, 'retry-after')
        await sleep(retryAfter !== null ? retryAfter * 1000 : backoff(attempt))
        continue
      }
      if (!response.ok) {
        const body = await readError(response)
        throw new ApiError(body.message, response.status, body.raw)
      }
      return response
    }
    throw last!
  }

  return {
    request,
    async json<T>(path: string, init?: RequestInit): Promise<T> {
      return (await (await request(path, init)).json()) as T
    },
    /** Waits as long as the last answer's rate-limit headers say a poll may come. */
    pace: () => sleep(nextDelay),
  }
}

async function readError(
  response: Response,
): Promise<{ message: string; code: string | null; raw: unknown }> {
  const text = await response.text()
  try {
    const raw = JSON.parse(text) as { error?: { message?: string; code?: string } }
    return {
      message: raw.error?.message ?? `HTTP ${response.status}`,
      code: raw.error?.code ?? null,
      raw,
    }
  } catch {
    return { message: `HTTP ${response.status}: ${text.slice(0, 200)}`, code: null, raw: text }
  }
}
