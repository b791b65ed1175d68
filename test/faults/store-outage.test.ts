/**
 * The store (PostgreSQL) out of reach while a request is served: a 503 store_unavailable with
 * Retry-After, which the SDKs retry, and the request done once the store is back; never a 500
 * that calls an outage a fault of the gateway; and a SIGTERM that stops the gateway within its
 * drain and grace however long the store stays silent. The outage is played by a TCP proxy in
 * front of PostgreSQL (test/helpers/store-proxy.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  freshSchemaUrl,
  STORES,
  TEST_DATABASE_URL,
  startTestGateway,
  type TestGateway,
} from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'
import { storeProxy } from '../helpers/store-proxy.ts'
import { waitFor } from '../helpers/wait.ts'

for (const store of STORES.filter((kind) => kind === 'postgres')) {
  describe(`the store out of reach (${store})`, () => {
    let proxy: ReturnType<typeof storeProxy>
    let gw: TestGateway
    beforeAll(async () => {
      const base = new URL(TEST_DATABASE_URL!)
      proxy = storeProxy(base)
      const proxied = new URL(freshSchemaUrl(TEST_DATABASE_URL!).url)
      proxied.hostname = '127.0.0.1'
      proxied.port = String(proxy.port)
      gw = await startTestGateway({
        env: {
          DATABASE_URL: proxied.toString(),
          MULTIGRID_DISPATCH: '0',
          MULTIGRID_KEY_CACHE_MS: '1',
        },
      })
    })
    afterAll(async () => {
      proxy.restore()
      await gw.stop()
      proxy.stop()
    })

    test('a request the store cannot serve is a 503 store_unavailable with Retry-After, and served once it is back', async () => {
      const { key } = await gw.newAccount('1')
      expect((await gw.request('/v1/batches', key)).status).toBe(200)
      proxy.cut()
      const refused = await waitFor('a request while the store is cut', async () => {
        const response = await gw.request('/v1/batches', key)
        return response.status === 200 ? null : response
      })
      expect(refused.status).toBe(503)
      expect(refused.headers.get('retry-after')).toBe('5')
      const { error } = (await refused.json()) as { error: { code: string; message: string } }
      expect(error.code).toBe('store_unavailable')
      expect(error.message).toContain('nothing was changed')
      proxy.restore()
      await waitFor(
        'the store back',
        async () => (await gw.request('/v1/batches', key)).status === 200,
      )
    }, 60_000)

    test('/metrics answers from memory while the store is cut or silent, leaving out only the queue depth it cannot read', async () => {
      const scrape = async () => {
        const started = Date.now()
        const response = await gw.request('/metrics', null)
        return { status: response.status, text: await response.text(), ms: Date.now() - started }
      }
      const up = await scrape()
      expect(up.status).toBe(200)
      expect(up.text).toMatch(/^multigrid_queue_depth \d+$/m)
      for (const outage of ['cut', 'silence'] as const) {
        proxy[outage]()
        const down = await scrape()
        expect(down.status).toBe(200)
        expect(down.ms).toBeLessThan(5_000)
        expect(down.text).toContain('# TYPE multigrid_lines_total counter')
        expect(down.text).toMatch(/^multigrid_lines_in_flight 0$/m)
        expect(down.text).not.toMatch(/^multigrid_queue_depth /m)
        proxy.restore()
        await waitFor('the store back', async () =>
          (await scrape()).text.includes('multigrid_queue_depth '),
        )
      }
    }, 60_000)
  })

  test(`a SIGTERM while the store is silent stops the process within the drain and its grace (${store})`, async () => {
    const proxy = storeProxy(new URL(TEST_DATABASE_URL!))
    const proxied = new URL(freshSchemaUrl(TEST_DATABASE_URL!).url)
    proxied.hostname = '127.0.0.1'
    proxied.port = String(proxy.port)
    const port = freePort()
    const gateway = await spawnGatewayProcess({
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: proxied.toString(),
      MULTIGRID_DRAIN_MS: '500',
      LOG_LEVEL: 'error',
    })
    try {
      proxy.silence()
      // A request that waits on the store, as clients' requests would.
      void fetch(`${gateway.url}/readyz`).catch(() => {})
      await Bun.sleep(500)
      const signalledAt = performance.now()
      const code = await gateway.kill('SIGTERM')
      const tookMs = performance.now() - signalledAt
      // 500 ms of drain, then at most the 10 s grace: not for as long as the store stays away.
      expect(tookMs).toBeLessThan(16_000)
      expect(code).toBe(1)
    } finally {
      proxy.restore()
      proxy.stop()
    }
  }, 40_000)
}
