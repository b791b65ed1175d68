/** Per-key requests-per-minute limits in fixed one-minute windows. */
export interface RateDecision {
  allowed: boolean
  limit: number
  remaining: number
  /** Seconds until the window resets. */
  resetSeconds: number
}

export interface RateLimiter {
  hit(keyId: string, limit: number): Promise<RateDecision>
  /** For /readyz: resolves when a shared backend (Redis) answers; absent when there is none. */
  ping?(): Promise<void>
  close(): Promise<void>
}

export const WINDOW_MS = 60_000

/** The in-process limiter: the embedded default, and the fallback when Redis is unreachable. */
export function createMemoryLimiter(now: () => number = Date.now): RateLimiter {
  const windows = new Map<string, { window: number; count: number }>()
  return {
    async hit(keyId, limit) {
      const time = now()
      const window = Math.floor(time / WINDOW_MS)
      let entry = windows.get(keyId)
      if (!entry || entry.window !== window) {
        if (windows.size > 100_000) windows.clear() // stale windows of idle keys
        entry = { window, count: 0 }
        windows.set(keyId, entry)
      }
      entry.count++
      return decide(entry.count, limit, (window + 1) * WINDOW_MS - time)
    },
    async close() {},
  }
}

export function decide(count: number, limit: number, msLeft: number): RateDecision {
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil(msLeft / 1000)),
  }
}
