/**
 * The store (PostgreSQL) out of reach while a request is served: a 503 store_unavailable with
 * Retry-After, which the SDKs retry, and the request done once the store is back; never a 500
 * that calls an outage a fault of the gateway. The outage is played by a TCP proxy in front of
 * PostgreSQL that cuts every connection and refuses new ones.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Socket, TCPSocketListener } from 'bun'
import {
  freshSchemaUrl,
  STORES,
  TEST_DATABASE_URL,
  startTestGateway,
  type TestGateway,
} from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * A proxy to `target` on 127.0.0.1 that can be cut: every connection closed and the port shut,
 * so new ones are refused, as while PostgreSQL restarts.
 */
function storeProxy(target: URL) {
  type Pair = { server?: Socket<undefined>; early: Buffer[]; client: Socket<Pair> }
  const pairs = new Set<Pair>()
  const listen = (port: number) =>
    Bun.listen<Pair>({
      hostname: '127.0.0.1',
      port,
      socket: {
        async open(client) {
          const pair: Pair = { early: [], client }
          client.data = pair
          pairs.add(pair)
          pair.server = await Bun.connect({
            hostname: target.hostname,
            port: Number(target.port || 5432),
            socket: {
              data: (_server, chunk) => void client.write(chunk),
              close: () => void client.end(),
              error: () => void client.end(),
            },
          })
          for (const chunk of pair.early) pair.server.write(chunk)
        },
        data(client, chunk) {
          if (client.data.server) client.data.server.write(chunk)
          else client.data.early.push(Buffer.from(chunk))
        },
        close(client) {
          client.data?.server?.end()
          pairs.delete(client.data)
        },
      },
    })
  let listener: TCPSocketListener<Pair> | null = listen(0)
  const port = listener.port
  return {
    port,
    cut() {
      listener?.stop(true)
      listener = null
      for (const pair of pairs) {
        pair.client.end()
        pair.server?.end()
      }
    },
    restore() {
      listener ??= listen(port)
    },
    stop: () => listener?.stop(true),
  }
}

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
  })
}
