/**
 * docs/clients/curl.md, pasted whole into a fresh bash: every block of its walk-through in order,
 * word for word, against the simulator and a gateway the blocks start themselves.
 */
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readDoc, runWalkthrough, sectionBlocks } from '../helpers/doc-blocks.ts'

const blocks = () => sectionBlocks(readDoc('docs/clients/curl.md'), '## The walk-through', 'sh')

const jsonLines = <T>(path: string) =>
  readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as T)

test('the curl walk-through uses no bare bun', () => {
  expect(blocks().length).toBeGreaterThanOrEqual(6)
  for (const block of blocks()) expect(block).not.toMatch(/(^|[\s;&|(])bun\s/m)
})

test('the curl walk-through runs whole: refusal, batch, stream, results, retry, cancel, live calls', async () => {
  const run = await runWalkthrough(blocks().join('\n'), 200_000)
  expect(run.stderr).not.toContain('walk-through stopped')
  expect(run.code).toBe(0)
  // The refused file's issues, the stream's events, the ended batches, the live calls.
  expect(run.stdout).toContain('"line":1,"path":"body.max_tokens"')
  expect(run.stdout).toContain('event: batch')
  expect(run.stdout).toMatch(/batch batch_\S+: completed/)
  expect(run.stdout).toMatch(/retry batch batch_\S+: failed/)
  expect(run.stdout).toMatch(/bulk batch batch_\S+: (cancelled|completed)/)
  expect(run.stdout).toMatch(/"dimensions":[1-9]/)
  expect(run.stdout).toContain('data: ')
  const results = jsonLines<{ custom_id: string; status: string; error: { code: string } | null }>(
    join(run.dir, 'results.jsonl'),
  )
  expect(results.map((r) => [r.custom_id, r.status, r.error?.code ?? null])).toEqual([
    ['ticket-1', 'succeeded', null],
    ['ticket-2', 'succeeded', null],
    ['ticket-3', 'failed', 'structured_output_invalid'],
  ])
  const again = jsonLines<{ custom_id: string }>(join(run.dir, 'again.jsonl'))
  expect(again.map((l) => l.custom_id)).toEqual(['ticket-3'])
}, 240_000)
