/**
 * Starting in time with a batch lane (docs/open-models.md, docs/batch-lanes.md): a batch whose
 * lane's provider batch was refused whole (OpenAI `failed`, `token_limit_exceeded`) has its lines
 * back to pending without an attempt until the lane closes, when the live offerings take them.
 * The provider was reached: the batch has started, and runs on past half its window; so it has
 * when the provider refused the chunk's upload (here a 401). A lane whose provider cannot be
 * reached starts nothing: that batch still ends `capacity_unavailable`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { editBatchRow } from '../helpers/edit-batch.ts'
import { waitFor } from '../helpers/wait.ts'
import { nativeClient } from '../helpers/native-client.ts'

interface Batch {
  id: string
  status: string
  waiting: { code: string; message: string } | null
  errors: { code: string }[] | null
  request_counts: { failed: number }
}

const HALF_WINDOW_S = 12 * 3600

function catalog(sim: Simulator, locked: Simulator) {
  const offering = (provider: string, fields: Record<string, unknown> = {}) => ({
    provider,
    upstream_model: 'sim-chat',
    input_usd_per_mtok: '1',
    output_usd_per_mtok: '2',
    ...fields,
  })
  // The default min_hours_left (4) and fallback_hours (2): the lane closes at hour 20 of 24.
  const lane = (provider: string) =>
    offering(provider, { lane: 'batch', input_usd_per_mtok: '0.5', poll_s: 1 })
  const model = (id: string, laneProvider: string) => ({
    id,
    endpoints: ['chat'],
    context_tokens: 32_000,
    max_output_tokens: 1024,
    offerings: [offering('sim'), lane(laneProvider)],
  })
  return {
    providers: {
      sim: { kind: 'openai', base_url: `${sim.url}/v1`, max_concurrency: 8, timeout_s: 10 },
      // Its batch API answers 401 to the gateway's key.
      locked: {
        kind: 'openai',
        base_url: `${locked.url}/v1`,
        api_key_env: 'MG_TEST_LOCKED_KEY',
        max_concurrency: 8,
        timeout_s: 10,
      },
      // Nothing listens on port 9.
      down: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1', max_concurrency: 8, timeout_s: 5 },
    },
    models: [
      model('lane/refused', 'sim'),
      model('lane/locked', 'locked'),
      model('lane/down', 'down'),
    ],
  }
}

for (const store of STORES) {
  describe(`starting in time with a batch lane (${store})`, () => {
    let sim: Simulator
    let locked: Simulator
    let gw: TestGateway
    let key: string

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 2 })
      sim.configure({ batchTurnaroundMs: 100, batchFailCode: 'token_limit_exceeded' })
      locked = await startSimulator({ requireApiKey: 'sk-right' })
      gw = await startTestGateway({
        store,
        catalog: catalog(sim, locked),
        env: {
          MULTIGRID_POLL_MS: '20',
          MULTIGRID_CREDIT_WAIT_POLL_MS: '100',
          MG_TEST_LOCKED_KEY: 'sk-wrong',
        },
      })
      ;({ key } = await gw.newAccount('100', { rate_limit_per_minute: 100_000 }))
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
      await locked?.stop()
    })

    const client = nativeClient<Batch, unknown>(
      () => gw,
      () => key,
    )
    const submit = async (model: string) => {
      const lines = ['a', 'b', 'c'].map((id) => chatLine(id, 'hello', {}, model))
      return (await client.submit(jsonl(lines), '?completion_window_hours=24')).id
    }
    const read = client.read
    const refused = (id: string) =>
      waitFor('the lane to refuse its lines', async () => {
        const batch = await read(id)
        return batch.waiting?.code === 'provider_unavailable' ? batch : null
      })
    const age = (id: string, s: number) =>
      editBatchRow(gw, id, `created_at = created_at - ${s}, deadline_at = deadline_at - ${s}`)

    // A failed provider batch (token_limit_exceeded), and an upload refused with a 401.
    for (const [model, how, said] of [
      ['lane/refused', 'refused whole by the lane', 'token_limit_exceeded'],
      ['lane/locked', 'whose upload the provider refused', '401'],
    ] as const) {
      test(`lines ${how} have started it: past half its window it runs on`, async () => {
        const id = await submit(model)
        const { waiting } = await refused(id)
        expect(waiting!.message).toContain(said)
        await age(id, HALF_WINDOW_S + 5)
        // Many turns of the check (every 100 ms here) while the lines wait, pending, for the lane.
        await Bun.sleep(1_500)
        const batch = await read(id)
        expect(batch.status).toBe('in_progress')
        expect(batch.errors).toBeNull()
        await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })
      }, 30_000)
    }

    test('a lane whose provider cannot be reached starts nothing: failed capacity_unavailable', async () => {
      const id = await submit('lane/down')
      await refused(id)
      await age(id, HALF_WINDOW_S + 5)
      const failed = await waitFor('the batch to fail', async () => {
        const batch = await read(id)
        return batch.status === 'failed' ? batch : null
      })
      expect(failed.errors?.map((error) => error.code)).toEqual(['capacity_unavailable'])
      expect(failed.request_counts.failed).toBe(3)
    }, 30_000)
  })
}
