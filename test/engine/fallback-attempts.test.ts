/**
 * A batch line that failed on its first offering and could not go on to the next (its provider
 * down) used an attempt: it is retried with backoff and fails once its attempts are spent, rather
 * than handed back as unsent and sent to the failing offering again and again until its deadline.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { freePort } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

let broken: Simulator
let gw: TestGateway
beforeAll(async () => {
  // Every call a 500; the dearer offering's provider listens nowhere.
  broken = await startSimulator({ latencyMs: 1, errorRate: 1 })
  const provider = (url: string) => ({ kind: 'openai', base_url: `${url}/v1`, max_concurrency: 4 })
  const offering = (name: string, price: string) => ({
    provider: name,
    upstream_model: 'sim-chat',
    input_usd_per_mtok: price,
    output_usd_per_mtok: price,
  })
  gw = await startTestGateway({
    catalog: {
      providers: {
        broken: provider(broken.url),
        down: provider(`http://127.0.0.1:${freePort()}`),
      },
      models: [
        {
          id: 'two/chat',
          endpoints: ['chat'],
          context_tokens: 32000,
          max_output_tokens: 1024,
          offerings: [offering('broken', '0.1'), offering('down', '1')],
        },
      ],
    },
    env: { MULTIGRID_POLL_MS: '20', MULTIGRID_MAX_ATTEMPTS: '3' },
  })
})
afterAll(async () => {
  await gw.stop()
  await broken.stop()
})

test('a line that failed and could not fall back to a provider that is down spends its attempts, then fails', async () => {
  const { key } = await gw.newAccount('1')
  const submitted = await gw.request('/v1/batches', key, {
    method: 'POST',
    body: jsonl([chatLine('one', 'hello', {}, 'two/chat')]),
  })
  expect(submitted.status).toBe(201)
  const { id } = (await submitted.json()) as { id: string }
  const batch = await waitFor(
    'the line to fail',
    async () => {
      const view = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as any
      return view.status === 'failed' ? view : null
    },
    30_000,
  )
  expect(batch.request_counts.failed).toBe(1)
  const [row] = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line))
  expect(row.error.code).toBe('upstream_error')
  expect(row.attempts).toBe(3)
  // Each attempt one call to the failing offering, with its backoff: not sent again and again.
  expect(broken.stats().byPath['/v1/chat/completions']).toBeLessThanOrEqual(4)
})
