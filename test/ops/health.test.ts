/** Liveness and readiness: the store always, Redis when REDIS_URL is configured. */
import { describe, expect, test } from 'bun:test'
import { startTestGateway, TEST_REDIS_URL } from '../helpers/gateway.ts'

type Ready = {
  status: string
  checks: Record<string, string>
  error?: { message: string; type: string; param: null; code: string }
}

describe('health', () => {
  test('/healthz is 200; /readyz is 200 with the store checked and no Redis when none is configured', async () => {
    const gw = await startTestGateway()
    try {
      const alive = await fetch(`${gw.url}/healthz`)
      expect(alive.status).toBe(200)
      expect(await alive.json()).toEqual({ status: 'ok' })
      const ready = await fetch(`${gw.url}/readyz`)
      expect(ready.status).toBe(200)
      expect(await ready.json()).toEqual({ status: 'ok', checks: { store: 'ok' } })
    } finally {
      await gw.stop()
    }
  })

  test('/readyz is 503 once the store is closed, and says so; /healthz stays 200', async () => {
    const gw = await startTestGateway({ logLines: [], env: { MULTIGRID_DISPATCH: '0' } })
    try {
      await gw.store.close()
      const ready = await fetch(`${gw.url}/readyz`)
      expect(ready.status).toBe(503)
      const body = (await ready.json()) as Ready
      expect(body.status).toBe('unavailable')
      expect(body.checks.store).not.toBe('ok')
      expect(body.checks.store.length).toBeGreaterThan(0)
      // In the error envelope too, naming the failing check.
      expect(body.error).toMatchObject({ type: 'server_error', param: null, code: 'not_ready' })
      expect(body.error!.message).toContain(`store: ${body.checks.store}`)
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
    } finally {
      await gw.stop()
    }
  })

  test('/readyz is 503 when Redis cannot be reached (127.0.0.1:1), with the store still ok', async () => {
    const gw = await startTestGateway({ logLines: [], env: { REDIS_URL: 'redis://127.0.0.1:1' } })
    try {
      const started = Date.now()
      const ready = await fetch(`${gw.url}/readyz`)
      expect(ready.status).toBe(503)
      const body = (await ready.json()) as Ready
      expect(body.checks.store).toBe('ok')
      expect(body.checks.redis).not.toBe('ok')
      expect(body.error?.code).toBe('not_ready')
      expect(body.error!.message).toContain('redis: ')
      expect(body.error!.message).not.toContain('store: ')
      expect(Date.now() - started).toBeLessThan(5_000) // bounded, never a hung probe
    } finally {
      await gw.stop()
    }
  })

  test.skipIf(!TEST_REDIS_URL)(
    '/readyz is 200 with Redis ok when it is reachable (TEST_REDIS_URL)',
    async () => {
      const gw = await startTestGateway({ env: { REDIS_URL: TEST_REDIS_URL! } })
      try {
        const ready = await waitReady(gw.url)
        expect(ready).toEqual({ status: 'ok', checks: { store: 'ok', redis: 'ok' } })
      } finally {
        await gw.stop()
      }
    },
  )
})

/** ioredis connects in the background: the first probe may come before it is ready. */
async function waitReady(url: string): Promise<Ready> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const response = await fetch(`${url}/readyz`)
    const body = (await response.json()) as Ready
    if (response.status === 200 || Date.now() > deadline) return body
    await Bun.sleep(100)
  }
}
