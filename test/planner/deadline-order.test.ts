/**
 * Batches due earlier get capacity first (docs/open-models.md), also once their lines wait at a
 * full provider: a 72-hour batch's lines already queued for a one-slot provider let a 24-hour
 * batch's lines, submitted after, go first; a live call goes before both. And while a batch due
 * earlier has lines for a provider, one due days later (the same account's or another's) takes
 * none of its slots.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

let sim: Simulator
let gw: TestGateway

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 100 })
  gw = await startTestGateway({
    catalog: {
      providers: {
        // One call at a time: every line waits its turn at the gate.
        narrow: { kind: 'openai', base_url: `${sim.url}/v1`, max_concurrency: 1, timeout_s: 10 },
        // Unused here, but the dispatcher claims ahead for every provider's slots: the 72-hour
        // batch's lines are all claimed, and wait at narrow's gate, before the 24-hour one comes.
        wide: { kind: 'openai', base_url: `${sim.url}/v1`, max_concurrency: 64, timeout_s: 10 },
        four: { kind: 'openai', base_url: `${sim.url}/v1`, max_concurrency: 4, timeout_s: 10 },
      },
      models: [
        {
          id: 'narrow/chat',
          endpoints: ['chat'],
          context_tokens: 32000,
          max_output_tokens: 1024,
          offerings: [
            {
              provider: 'narrow',
              upstream_model: 'sim-chat',
              input_usd_per_mtok: '1',
              output_usd_per_mtok: '2',
            },
          ],
        },
        {
          id: 'four/chat',
          endpoints: ['chat'],
          context_tokens: 32000,
          max_output_tokens: 1024,
          offerings: [
            {
              provider: 'four',
              upstream_model: 'sim-chat',
              input_usd_per_mtok: '1',
              output_usd_per_mtok: '2',
            },
          ],
        },
        {
          id: 'wide/chat',
          endpoints: ['chat'],
          context_tokens: 32000,
          max_output_tokens: 1024,
          offerings: [
            {
              provider: 'wide',
              upstream_model: 'sim-chat',
              input_usd_per_mtok: '1',
              output_usd_per_mtok: '2',
            },
          ],
        },
      ],
    },
    env: { MULTIGRID_POLL_MS: '20' },
  })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

const file = (count: number, prefix: string) =>
  jsonl(
    Array.from({ length: count }, (_, i) =>
      chatLine(`${prefix}-${i}`, `question ${i}`, {}, 'narrow/chat'),
    ),
  )

test('at a full provider: a live call goes first, and a 24-hour batch submitted after a 72-hour one finishes first', async () => {
  const { key } = await gw.newAccount('10')
  const submit = async (hours: number, body: string) => {
    const answer = await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
      method: 'POST',
      headers: { 'content-type': 'application/jsonl' },
      body,
    })
    expect(answer.status).toBe(201)
    return ((await answer.json()) as { id: string }).id
  }
  const status = async (id: string) =>
    ((await (await gw.request(`/v1/batches/${id}`, key)).json()) as { status: string }).status
  const late = await submit(72, file(20, 'late'))
  // The 72-hour batch's lines are claimed and queued at the gate before the next one comes.
  await waitFor('the first lines to run', async () => sim.stats().requests > 0)
  // A live call waits for the call in flight only, not for the lines queued (20 × 100 ms).
  const started = performance.now()
  const live = await gw.request('/v1/chat/completions', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(chatLine('live', 'now', {}, 'narrow/chat').body),
  })
  expect(live.status).toBe(200)
  expect(performance.now() - started).toBeLessThan(1_000)
  const soon = await submit(24, file(3, 'soon'))
  await waitFor('the 24-hour batch to complete', async () => (await status(soon)) === 'completed')
  expect(await status(late)).toBe('in_progress')
  await waitFor('the 72-hour batch to complete', async () => (await status(late)) === 'completed')
})

for (const accounts of ['one account', 'two accounts'])
  test(`${accounts}: a 72-hour batch submitted after a 1-hour one takes no slot of their provider until it is done`, async () => {
    const first = await gw.newAccount('10')
    const second = accounts === 'one account' ? first : await gw.newAccount('10')
    const submit = async (key: string, hours: number, count: number, prefix: string) => {
      const lines = Array.from({ length: count }, (_, i) =>
        chatLine(`${prefix}-${i}`, `question ${i}`, {}, 'four/chat'),
      )
      const answer = await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
        method: 'POST',
        body: jsonl(lines),
      })
      expect(answer.status).toBe(201)
      return ((await answer.json()) as { id: string }).id
    }
    const read = async (key: string, id: string) =>
      (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
        status: string
        request_counts: { succeeded: number }
      }
    // 60 lines at 4 slots and 100 ms: 1.5 s of work, the later batch there from its first lines.
    const soon = await submit(first.key, 1, 60, 'soon')
    await waitFor(
      'the first lines to run',
      async () => (await read(first.key, soon)).request_counts.succeeded > 0,
    )
    const later = await submit(second.key, 72, 20, 'later')
    let laterDone = 0
    await waitFor('the 1-hour batch to complete', async () => {
      // Read the later one first: what it had done by the time the first is seen complete.
      laterDone = (await read(second.key, later)).request_counts.succeeded
      return (await read(first.key, soon)).status === 'completed'
    })
    // Lines it had claimed before the first's took the room may run, a round at most.
    expect(laterDone).toBeLessThanOrEqual(4)
    await waitFor(
      'the 72-hour batch to complete',
      async () => (await read(second.key, later)).status === 'completed',
    )
  })
