/** Liveness and readiness. */
import { Elysia } from 'elysia'

/** A dependency that hangs is as unready as one that refuses; a probe must answer in time. */
const CHECK_TIMEOUT_MS = 2_000

export function healthRoutes(ready: () => Promise<Record<string, 'ok' | string>>) {
  return new Elysia({ name: 'health' })
    .get('/healthz', () => ({ status: 'ok' }))
    .get('/readyz', async ({ set }) => {
      const checks = await ready()
      const ok = Object.values(checks).every((v) => v === 'ok')
      set.status = ok ? 200 : 503
      return { status: ok ? 'ok' : 'unavailable', checks }
    })
}

/**
 * Runs named checks side by side, each bounded in time: `ok`, or why not. A check that is
 * undefined (Redis when REDIS_URL is unset) is left out.
 */
export function readinessChecks(checks: Record<string, (() => Promise<unknown>) | undefined>) {
  return async () => {
    const entries = Object.entries(checks).filter(
      (entry): entry is [string, () => Promise<unknown>] => entry[1] !== undefined,
    )
    const results = await Promise.all(
      entries.map(async ([name, check]) => {
        let timer: ReturnType<typeof setTimeout> | undefined
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)),
            CHECK_TIMEOUT_MS,
          )
        })
        try {
          await Promise.race([check(), timeout])
          return [name, 'ok'] as const
        } catch (error) {
          return [name, (error as Error).message || 'unavailable'] as const
        } finally {
          clearTimeout(timer)
        }
      }),
    )
    return Object.fromEntries(results) as Record<string, 'ok' | string>
  }
}
