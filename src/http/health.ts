/** Liveness and readiness. */
import { Elysia } from 'elysia'

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
