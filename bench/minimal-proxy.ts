/**
 * The reference the live path is measured against (bench/proxy.ts): the least an Elysia proxy can
 * do — parse the JSON body, send it upstream, parse the JSON answer, return it. No auth, limits,
 * holds or billing. Upstream through Bun's fetch (`--client fetch`, the default: the least client
 * CPU per call of the clients at hand, and at 64 in flight its cap of 256 requests at once does
 * not bind) or a pooled undici client (`--client undici`).
 *
 *   bun bench/minimal-proxy.ts --port 18100 --upstream http://127.0.0.1:19500 [--client fetch|undici]
 *
 * bench/proxy.ts starts it with the gateway's allocator setting (serverProcessEnv), so the two are
 * compared like for like.
 */
import { Elysia } from 'elysia'
import { parseArgs } from 'node:util'
import { Pool } from 'undici/index.js'

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    upstream: { type: 'string' },
    client: { type: 'string', default: 'fetch' },
  },
})
if (values.client !== 'fetch' && values.client !== 'undici')
  throw new Error('--client is fetch or undici')
const upstream = `${values.upstream}/v1/chat/completions`
const headers = { 'content-type': 'application/json' }
const pool = values.client === 'undici' ? new Pool(values.upstream!, { connections: 256 }) : null

/** The upstream's JSON answer to `body`. */
async function call(body: string): Promise<Record<string, unknown>> {
  if (!pool)
    return (await (await fetch(upstream, { method: 'POST', headers, body })).json()) as never
  const answer = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body })
  return (await answer.body.json()) as Record<string, unknown>
}

new Elysia()
  .post('/v1/chat/completions', ({ body }) =>
    call(JSON.stringify({ ...(body as Record<string, unknown>), model: 'sim-chat' })),
  )
  .get('/healthz', () => 'ok')
  .listen({ port: Number(values.port), hostname: '127.0.0.1' })

// Exit cleanly on SIGTERM, so a CPU profile (--cpu-prof) is written.
process.on('SIGTERM', () => process.exit(0))
