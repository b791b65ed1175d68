/**
 * A batch lane whose provider batch is refused whole (docs/batch-lanes.md, "A chunk's life" 4),
 * on a lane whose min_hours_left is longer than its fallback_hours (as the defaults, 4 and 2): the
 * lane takes no line from deadline − min_hours_left on, so that is when the refused lines run on
 * the live offerings. The batch's `waiting` names that time, and the wait before the lines go
 * again never keeps them from the live lanes past it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { nativeClient } from '../helpers/native-client.ts'
import { waitFor } from '../helpers/wait.ts'

interface Batch {
  id: string
  status: string
  created_at: number
  deadline_at: number
  waiting: { code: string; message: string; until?: number } | null
}
interface Row {
  status: string
  provider: string | null
  attempts: number
}

const HOUR_S = 3600
/** `lane/late`'s lane closes this long after its batch is created (a 24-hour window). */
const CLOSES_AFTER_S = 3

function catalog(sim: Simulator) {
  const offering = (upstream: string, fields: Record<string, unknown> = {}) => ({
    provider: 'sim',
    upstream_model: upstream,
    input_usd_per_mtok: '1',
    output_usd_per_mtok: '2',
    ...fields,
  })
  const lane = (upstream: string, fields: Record<string, unknown>) =>
    offering(upstream, {
      lane: 'batch',
      input_usd_per_mtok: '0.5',
      output_usd_per_mtok: '1',
      ...fields,
    })
  const model = (id: string, upstream: string, fields: Record<string, unknown>) => ({
    id,
    endpoints: ['chat'],
    context_tokens: 32_000,
    max_output_tokens: 1024,
    offerings: [offering(upstream), lane(upstream, fields)],
  })
  return {
    providers: {
      sim: { kind: 'openai', base_url: `${sim.url}/v1`, max_concurrency: 8, timeout_s: 10 },
    },
    models: [
      model('lane/early', 'sim-early', { min_hours_left: 2, fallback_hours: 0.5, poll_s: 0.05 }),
      model('lane/late', 'sim-late', {
        min_hours_left: 24 - CLOSES_AFTER_S / HOUR_S,
        fallback_hours: 0.5,
        poll_s: 5,
      }),
    ],
  }
}

/** "2026-12-06 14:00:00 UTC", as the batch's `waiting` writes a moment. */
const moment = (s: number) =>
  `${new Date(s * 1000).toISOString().slice(0, 19).replace('T', ' ')} UTC`

for (const storeKind of STORES) {
  describe(`a batch lane refused whole, min_hours_left past fallback_hours (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let key: string

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 2 })
      gw = await startTestGateway({ store: storeKind, catalog: catalog(sim) })
      ;({ key } = await gw.newAccount('100', { rate_limit_per_minute: 100_000 }))
    })
    beforeEach(() => {
      sim.configure({ batchTurnaroundMs: 100, batchFailCode: 'token_limit_exceeded' })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const { submit, read, finished, results } = nativeClient<Batch, Row>(
      () => gw,
      () => key,
    )

    test('the waiting message names the close of the lane, deadline − min_hours_left', async () => {
      const batch = await submit(
        jsonl([chatLine('a', 'hello', {}, 'lane/early'), chatLine('b', 'hello', {}, 'lane/early')]),
      )
      const waiting = await waitFor('the refusal to be said', async () => {
        const { waiting } = await read(batch.id)
        return waiting?.code === 'provider_unavailable' ? waiting : null
      })
      const closesAt = batch.deadline_at - 2 * HOUR_S
      expect(waiting.message).toContain(`run on the live offerings from ${moment(closesAt)}`)
      expect(waiting.until!).toBeLessThanOrEqual(closesAt)
      await gw.request(`/v1/batches/${batch.id}`, key, { method: 'DELETE' })
    }, 30_000)

    test('lines refused after the lane closed run live at once, not after a doubled wait', async () => {
      const batch = await submit(
        jsonl([chatLine('a', 'hello', {}, 'lane/late'), chatLine('b', 'hello', {}, 'lane/late')]),
      )
      // The provider batch is first looked at (and found failed) poll_s (5 s) after its create,
      // past the lane's close: its lines are the live lanes' then, not 2 × poll_s later.
      const ended = await finished(batch.id, 30_000)
      expect(ended.status).toBe('completed')
      const rows = await results(batch.id)
      expect(rows.map((row) => [row.status, row.provider, row.attempts])).toEqual([
        ['succeeded', 'sim', 1],
        ['succeeded', 'sim', 1],
      ])
      const endedAt = (ended as Batch & { finished_at: number }).finished_at
      expect(endedAt - batch.created_at).toBeLessThan(12)
    }, 40_000)
  })
}
