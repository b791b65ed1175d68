/**
 * A line that makes the line runner throw (here: a stored input nested too deep to serialise, as
 * validation now refuses but an older gateway admitted) must end failed, not stay `running` under
 * a lease its instance keeps renewing, which would keep its batch open forever.
 */
import { Database } from 'bun:sqlite'
import { expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

test('a line that crashes the runner ends failed and its batch finishes', async () => {
  const sim = await startSimulator()
  const dataDir = mkdtempSync(join(tmpdir(), 'mg-crashline-'))
  const upstreams = { openai: `${sim.url}/v1` }
  const admitting = await startTestGateway({
    upstreams,
    env: { MULTIGRID_DATA_DIR: dataDir, MULTIGRID_DISPATCH: '0' },
  })
  const { key } = await admitting.newAccount('1')
  const created = await admitting.request('/v1/batches', key, {
    method: 'POST',
    body: jsonl([chatLine('a'), chatLine('b'), chatLine('c')]),
  })
  const { id } = (await created.json()) as { id: string }
  await admitting.stop()

  // Line 2 as an older gateway stored it: valid, with 100,000 nested arrays in an unknown field.
  const deep = JSON.stringify(chatLine('b')).replace(
    '"max_tokens":32',
    `"max_tokens":32,"blob":${'['.repeat(100_000)}${']'.repeat(100_000)}`,
  )
  const db = new Database(join(dataDir, 'multigrid.sqlite'))
  db.query('UPDATE lines SET input = ? WHERE batch_id = ? AND line_no = 2').run(deep, id)
  db.close()

  const logLines: string[] = []
  const running = await startTestGateway({
    upstreams,
    env: { MULTIGRID_DATA_DIR: dataDir, MULTIGRID_POLL_MS: '20' },
    logLines,
  })
  try {
    const batch = await waitFor(
      'the batch to finish',
      async () => {
        const view = (await (await running.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
          request_counts: Record<string, number>
        }
        return FINAL_BATCH.includes(view.status) ? view : null
      },
      10_000,
    )
    expect(batch.request_counts).toMatchObject({ succeeded: 2, failed: 1, running: 0, pending: 0 })
    const rows = (await (await running.request(`/v1/batches/${id}/results`, key)).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(rows[1]).toMatchObject({ custom_id: 'b', status: 'failed', cost_usd: '0.000000' })
    expect(rows[1].error.code).toBe('internal_error')
    expect(rows[1].error.message).toContain('gateway')
    expect(logLines.some((line) => line.includes('dispatch.line_crashed'))).toBe(true)
  } finally {
    await running.stop()
    await sim.stop()
  }
})
