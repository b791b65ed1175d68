/**
 * The README's five-minute walk-through, pasted whole into a fresh bash as a newcomer pastes it:
 * it starts the simulator and the gateway itself, waits for them, makes an account and a key,
 * submits a batch and downloads its results. Nothing but the ports, the data dir and the catalog
 * (the same simulator catalog, on the test's simulator port) is changed, through the variables
 * the blocks honour.
 */
import { expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readDoc, runWalkthrough, sectionBlocks } from '../helpers/doc-blocks.ts'

const HEADING = '## Five minutes, offline'

test('the walk-through blocks use no bare bun, which is not on the PATH after npm install', () => {
  const blocks = sectionBlocks(readDoc('README.md'), HEADING, 'sh')
  expect(blocks.length).toBeGreaterThanOrEqual(3)
  for (const block of blocks) expect(block).not.toMatch(/(^|[\s;&|(])bun\s/m)
})

test('the walk-through, pasted whole, runs a batch to completion and downloads its results', async () => {
  // Then the command line, as the text after the blocks gives it: it finds this gateway through
  // the MULTIGRID_URL the first block exported, not at the default port.
  const script =
    sectionBlocks(readDoc('README.md'), HEADING, 'sh').join('\n') +
    '\nnpm run --silent multigrid -- list\n'
  expect(readDoc('README.md')).toContain('`npm run multigrid -- list` is the command line')
  const run = await runWalkthrough(script, 150_000)
  expect(run.stderr).not.toContain('walk-through stopped')
  expect(run.code).toBe(0)
  // The dry run's quote, then the ended batch as step 6 prints it.
  expect(run.stdout).toContain('"credit_sufficient": true')
  expect(run.stdout).toContain('"status": "completed"')
  const results = readFileSync(join(run.dir, 'results.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { custom_id: string; status: string; provider: string })
  expect(results.map((r) => [r.custom_id, r.status])).toEqual([
    ['ticket-1', 'succeeded'],
    ['ticket-2', 'succeeded'],
  ])
  expect(results.map((r) => r.provider)).toEqual(['sim-openai', 'sim-anthropic'])
  expect(run.stdout).toMatch(/\nbatch_[0-9a-f]+\s+first-batch\s+completed\s+2\/2\s/)
  // Its admin token is published in the README: the gateway listens on this machine only.
  const started = readFileSync(join(run.dir, 'gateway.log'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { event?: string; host?: string })
    .find((e) => e.event === 'gateway.started')
  expect(started?.host).toBe('127.0.0.1')
}, 180_000)

test('a step that fails stops the walk-through with a message instead of going on', async () => {
  // The admin token the gateway is given differs from the one the walk-through then sends.
  const blocks = sectionBlocks(readDoc('README.md'), HEADING, 'sh')
  const script =
    blocks[0] +
    '\nMULTIGRID_ADMIN_TOKEN=not-the-gateways-token-at-all\n' +
    blocks.slice(1).join('\n')
  const run = await runWalkthrough(script, 120_000)
  expect(run.code).toBe(1)
  expect(run.stderr).toContain('walk-through stopped: no account was made')
  expect(run.stderr).toContain('invalid_admin_token')
}, 150_000)

test('a port already answering stops the walk-through before it starts anything', async () => {
  // A gateway left running from an earlier paste would otherwise answer in the new one's place.
  const taken = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('old') })
  try {
    const [first] = sectionBlocks(readDoc('README.md'), HEADING, 'sh')
    const run = await runWalkthrough(first!, 60_000, { PORT: String(taken.port) })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain(`walk-through stopped: port ${taken.port} is taken`)
    expect(existsSync(join(run.dir, 'gateway.log'))).toBe(false)
  } finally {
    taken.stop(true)
  }
})
