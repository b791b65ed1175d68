/** docs/clients/openai-sdk.md: the TypeScript walk-through runs as written against a real gateway. */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { ROOT, readDoc, sectionBlocks } from '../helpers/doc-blocks.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

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
  const [code] = sectionBlocks(readDoc('docs/clients/openai-sdk.md'), '## TypeScript', 'ts')
  expect(code).toBeString()
  // Word for word: the gateway's port comes from PORT, as the walk-through's bash has it.
  const dir = mkdtempSync(join(tmpdir(), 'mg-docs-sdk-'))
  writeFileSync(join(dir, 'walkthrough.ts'), code!)
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
      PORT: new URL(gw.url).port,
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
