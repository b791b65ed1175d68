/**
 * A gateway over two simulators, one offering of a model on each, so where a line or live call
 * went is what each simulator received (the price cap's tests: test/native/max-price*.test.ts).
 * `start` in beforeAll, `stop` in afterAll; the rest once started.
 */
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { startTestGateway, type TestGateway } from './gateway.ts'
import { FINAL_BATCH, waitFor } from './wait.ts'

export interface TwoOfferings {
  start(): Promise<void>
  stop(): Promise<void>
  /** The two simulators, by the provider names the catalog is given them under. */
  sims(): { first: Simulator; second: Simulator }
  /** POST /v1/batches with a JSONL file (and a query, `?dry_run=true`). */
  submit(file: string, query?: string): Promise<Response>
  /** A batch's dry-run ceiling. */
  ceiling(file: string): Promise<Decimal>
  /** Submits a batch, waits for it to end, and reads its result lines. */
  run(file: string): Promise<{ custom_id: string; status: string; provider: string }[]>
  /** A live chat call with this body. */
  call(body: Record<string, unknown>): Promise<Response>
}

/**
 * `model`: the model's id; `offerings`: its two offerings, each with the name of its provider,
 * the first on the first simulator.
 */
export function twoOfferings(
  storeKind: 'sqlite' | 'postgres',
  model: string,
  offerings: [Record<string, unknown>, Record<string, unknown>],
): TwoOfferings {
  let first: Simulator
  let second: Simulator
  let gw: TestGateway
  let key: string
  const submit = (file: string, query = '') =>
    gw.request(`/v1/batches${query}`, key, {
      method: 'POST',
      body: file,
      headers: { 'content-type': 'application/jsonl' },
    })
  return {
    async start() {
      first = await startSimulator({ keepBodies: 50 })
      second = await startSimulator({ keepBodies: 50 })
      gw = await startTestGateway({
        store: storeKind,
        catalog: catalog(model, offerings, [first.url, second.url]),
        env: { MULTIGRID_POLL_MS: '50' },
      })
      ;({ key } = await gw.newAccount('100'))
    },
    async stop() {
      await gw?.stop()
      await first?.stop()
      await second?.stop()
    },
    sims: () => ({ first, second }),
    submit,
    async ceiling(file) {
      const response = await submit(file, '?dry_run=true')
      if (response.status !== 200) throw new Error(`dry run answered ${response.status}`)
      return new Decimal(((await response.json()) as { cost_ceiling_usd: string }).cost_ceiling_usd)
    },
    async run(file) {
      const response = await submit(file)
      if (response.status !== 201) throw new Error(`submit answered ${response.status}`)
      const created = (await response.json()) as { id: string }
      await waitFor('the batch to finish', async () => {
        const batch = (await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as {
          status: string
        }
        return FINAL_BATCH.includes(batch.status) ? batch : null
      })
      const text = await (await gw.request(`/v1/batches/${created.id}/results`, key)).text()
      return text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { custom_id: string; status: string; provider: string })
    },
    call: (body) =>
      gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
  }
}

function catalog(
  model: string,
  offerings: [Record<string, unknown>, Record<string, unknown>],
  urls: [string, string],
) {
  const provider = (url: string) => ({ kind: 'openai', base_url: `${url}/v1`, max_concurrency: 16 })
  return {
    providers: Object.fromEntries(
      offerings.map((offering, i) => [String(offering.provider), provider(urls[i]!)]),
    ),
    models: [
      { id: model, endpoints: ['chat'], context_tokens: 32000, max_output_tokens: 4096, offerings },
    ],
  }
}
