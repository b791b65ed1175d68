/** A TCP proxy in front of PostgreSQL that a test can cut, to play the store going away. */
import type { Socket, TCPSocketListener } from 'bun'

/**
 * A proxy to `target` on 127.0.0.1 that can be cut: every connection closed and the port shut,
 * so new ones are refused, as while PostgreSQL restarts; or silenced: connections kept and taken,
 * nothing carried either way, as in a network partition.
 */
export function storeProxy(target: URL) {
  type Pair = { server?: Socket<undefined>; early: Buffer[]; client: Socket<Pair> }
  const pairs = new Set<Pair>()
  let silent = false
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
              data: (_server, chunk) => void (silent || client.write(chunk)),
              close: () => void client.end(),
              error: () => void client.end(),
            },
          })
          for (const chunk of pair.early) pair.server.write(chunk)
        },
        data(client, chunk) {
          if (silent) return
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
    silence() {
      silent = true
    },
    restore() {
      silent = false
      listener ??= listen(port)
    },
    stop: () => listener?.stop(true),
  }
}
