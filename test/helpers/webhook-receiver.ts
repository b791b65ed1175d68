/**
 * A webhook receiver: a real HTTP server on 127.0.0.1 that keeps every delivery it is sent (body
 * text and headers, as the gateway sent them) and answers as the test says: a status, or `hold`,
 * which keeps the request open until the sender goes away (or the receiver stops).
 */

export interface ReceivedDelivery {
  path: string
  body: string
  headers: Record<string, string>
  /** Whether this request was answered 2xx (a held one that its sender dropped was not). */
  acked: boolean
  at: number
  /** The sender's port, to tell which process sent it. */
  remotePort: number | null
}

export type Answer = number | 'hold'

export interface WebhookReceiver {
  url: string
  received: ReceivedDelivery[]
  /** Deliveries to `path` so far. */
  at(path: string): ReceivedDelivery[]
  stop(): Promise<void>
}

/** `answer` decides each request's fate from its path and how many came to that path before. */
export function startWebhookReceiver(
  answer: (path: string, index: number) => Answer = () => 200,
): WebhookReceiver {
  const received: ReceivedDelivery[] = []
  const held = new Set<() => void>()
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request, server) {
      const path = new URL(request.url).pathname
      const headers: Record<string, string> = {}
      request.headers.forEach((value, name) => (headers[name] = value))
      const entry: ReceivedDelivery = {
        path,
        body: await request.text(),
        headers,
        acked: false,
        at: Date.now(),
        remotePort: server.requestIP(request)?.port ?? null,
      }
      const index = received.filter((r) => r.path === path).length
      received.push(entry)
      const decision = answer(path, index)
      if (decision === 'hold') {
        return new Promise<Response>((resolve) => {
          const release = () => resolve(new Response('gone', { status: 503 }))
          held.add(release)
          request.signal.addEventListener('abort', release)
        })
      }
      entry.acked = decision >= 200 && decision < 300
      return new Response(entry.acked ? 'ok' : `down for maintenance (${decision})`, {
        status: decision,
      })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    received,
    at: (path) => received.filter((r) => r.path === path),
    async stop() {
      for (const release of held) release()
      await server.stop(true)
    },
  }
}
