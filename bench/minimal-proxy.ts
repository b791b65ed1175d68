/**
 * The reference the live path is measured against (bench/proxy.ts): the least an Elysia proxy can
 * do — parse the JSON body, send it upstream through a pooled undici client, parse the JSON
 * answer, return it. No auth, limits, holds or billing.
 *
 *   bun bench/minimal-proxy.ts --port 18100 --upstream http://127.0.0.1:19500
 *
 * bench/proxy.ts starts it with the gateway's allocator setting (serverProcessEnv), so the two are
 * compared like for like.
 */
import { Elysia } from 'elysia'
import { parseArgs } from 'node:util'
import { Pool } from 'undici/index.js'

const { values } = parseArgs({
  options: { port: { type: 'string' }, upstream: { type: 'string' } },
})
const pool = new Pool(values.upstream!, { connections: 256 })

new Elysia()
  .post('/v1/chat/completions', async ({ body }) => {
    const answer = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...(body as Record<string, unknown>), model: 'sim-chat' }),
    })
    return (await answer.body.json()) as Record<string, unknown>
  })
  .get('/healthz', () => 'ok')
  .listen({ port: Number(values.port), hostname: '127.0.0.1' })

// Exit cleanly on SIGTERM, so a CPU profile (--cpu-prof) is written.
process.on('SIGTERM', () => process.exit(0))
