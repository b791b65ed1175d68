/**
 * The client pages in docs/clients run word for word (the gateway's port from PORT, as the
 * walk-through's bash has it) against a real
 * gateway serving the offline catalog (providers/catalog.simulator.json) from the simulator:
 * the Anthropic SDK, the Vercel AI SDK and the OpenAI SDK's Responses API.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

const ROOT = join(import.meta.dir, '../..')
let sim: Simulator
let gw: TestGateway

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1 })
  const catalog = JSON.parse(
    readFileSync(join(ROOT, 'providers/catalog.simulator.json'), 'utf8'),
  ) as { providers: Record<string, { base_url: string }> }
  catalog.providers['sim-openai'].base_url = `${sim.url}/v1`
  catalog.providers['sim-anthropic'].base_url = sim.url
  gw = await startTestGateway({ catalog, env: { MULTIGRID_POLL_MS: '50' } })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

/** The page's first TypeScript block, run as a script with the key in MULTIGRID_API_KEY. */
async function runPage(page: string) {
  const text = readFileSync(join(ROOT, 'docs/clients', page), 'utf8')
  const code = /```ts\n([\s\S]*?)```/.exec(text)?.[1]
  expect(code).toBeString()
  const dir = mkdtempSync(join(tmpdir(), 'mg-client-doc-'))
  writeFileSync(join(dir, 'example.ts'), code!)
  const { key } = await gw.newAccount('10')
  const child = Bun.spawn([process.execPath, join(dir, 'example.ts')], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      MULTIGRID_API_KEY: key,
      PORT: new URL(gw.url).port,
      NODE_PATH: join(ROOT, 'node_modules'),
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [exit, out, err] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ])
  expect(err).toBe('')
  expect(exit).toBe(0)
  return out
}

test('anthropic-sdk.md: messages, a stream, count_tokens and a batch routed to OpenAI', async () => {
  const out = await runPage('anthropic-sdk.md')
  expect(out).toStartWith('end_turn ')
  expect(out).toMatch(/input tokens \d+/)
  expect(out).toContain('ticket-1 succeeded\nticket-2 succeeded')
})

test('vercel-ai-sdk.md: generateText on the Responses API, streamText on the Messages API', async () => {
  const out = await runPage('vercel-ai-sdk.md')
  expect(out.match(/ — stop/g)?.length).toBe(2)
})

test('responses.md: responses.create translated, responses.stream passed through', async () => {
  const out = await runPage('responses.md')
  expect(out).toStartWith('completed ')
  expect(out).toMatch(/tokens: \d+/)
})
