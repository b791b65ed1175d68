/** Liveness and readiness. */
import { Elysia } from 'elysia'
import { refuse } from '../errors.ts'

/** A dependency that hangs is as unready as one that refuses; a probe must answer in time. */
const CHECK_TIMEOUT_MS = 2_000

export function healthRoutes(ready: () => Promise<Record<string, 'ok' | string>>) {
  return new Elysia({ name: 'health' })
    .get('/healthz', () => ({ status: 'ok' }))
    .get('/readyz', async ({ set }) => {
      const checks = await ready()
      const failing = Object.entries(checks).filter(([, result]) => result !== 'ok')
      if (failing.length === 0) return { status: 'ok', checks }
      // A refusal like any other (docs/errors.md), with the probes' own fields beside it.
      const why = failing.map(([name, result]) => `${name}: ${result}`).join('; ')
      const refusal = refuse(
        'not_ready',
        `not ready to serve: ${why}; the gateway keeps trying, and /healthz says whether the process itself answers`,
      )
      set.status = refusal.status
      return { status: 'unavailable', checks, ...refusal.toBody() }
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
