/** The README's OpenAI SDK walk-through (TypeScript) runs as written against a real gateway. */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

const ROOT = join(import.meta.dir, '../..')
let sim: Simulator
let gw: TestGateway
beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1` },
    env: { MULTIGRID_POLL_MS: '50' },
  })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

test('the TypeScript walk-through uploads, runs and downloads a batch', async () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const code = /## Walk-through with the OpenAI SDK[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1]
  expect(code).toBeString()
  // Only the address changes: the test gateway listens on a random port.
  const dir = mkdtempSync(join(tmpdir(), 'mg-readme-'))
  writeFileSync(join(dir, 'walkthrough.ts'), code!.replace('http://localhost:8080', gw.url))
  writeFileSync(
    join(dir, 'requests.jsonl'),
    jsonl([
      chatLine('ticket-1', 'Classify: the parcel never came.'),
      chatLine('ticket-2', 'Summarise: refund issued twice.'),
    ]),
  )
  const { key } = await gw.newAccount('1')
  const child = Bun.spawn([process.execPath, join(dir, 'walkthrough.ts')], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      MULTIGRID_API_KEY: key,
      NODE_PATH: join(ROOT, 'node_modules'),
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [code_, out, err] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ])
  expect(err).toBe('')
  expect(code_).toBe(0)
  expect(out).toContain('completed')
  const output = readFileSync(join(dir, 'output.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  expect(output.map((o) => o.custom_id).sort()).toEqual(['ticket-1', 'ticket-2'])
})
