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

/** Tries per request when the gateway is unreachable, answers 5xx or 429. */
const MAX_TRIES = 6

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

  async function request(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${options.key}`)
    let last: ApiError | null = null
    for (let attempt = 1; attempt <= MAX_TRIES; attempt++) {
      let response: Response
      try {
        response = await fetch(`${base}${path}`, { ...init, headers })
      } catch (error) {
        last = new ApiError(
          `cannot reach the gateway at ${base}: ${(error as Error).message}`,
          null,
        )
        await sleep(Math.min(30_000, 500 * 2 ** attempt))
        continue
      }
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
        const retryAfter = header(response, 'retry-after')
        await sleep(retryAfter !== null ? retryAfter * 1000 : Math.min(30_000, 500 * 2 ** attempt))
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
