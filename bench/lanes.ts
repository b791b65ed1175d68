/**
 * bench:lanes — a 20,000-line batch with a 24-hour window through the batch lane (docs/batch-lanes.md):
 * its cost against the same usage at the live prices, and the time to its first and last result.
 *
 * Scaled time: the simulator's provider batches take BATCH_TURNAROUND_MS (default 3 s) where the
 * providers take minutes, and the lane polls every 0.25 s where it polls every minute; the
 * figures are the engine's (src/dispatch/batch-lane) on the embedded store, without the HTTP
 * layer or the live dispatcher, which the lane does not use while the deadline allows.
 * Usage: bun bench/lanes.ts [lines] [chunk_lines]
 */
import Decimal from 'decimal.js'
import { laneKey } from '../src/catalog/lane-mark.ts'
import { createOpenAIBatchClient } from '../providers/batch-api/index.ts'
import { catalogSchema, type Offering } from '../src/catalog/catalog-file.ts'
import { createCatalog } from '../src/catalog/catalog.ts'
import { createBatchLaneEngine } from '../src/dispatch/batch-lane/batch-lane-engine.ts'
import { DEFAULT_RETRY } from '../src/dispatch/retry-policy.ts'
import { priceUsage } from '../src/pricing/price-usage.ts'
import { mapOpenAIUsage } from '../providers/openai/map-openai-usage.ts'
import { startSimulator } from '../src/simulator/server.ts'
import { createSqliteStore } from '../src/store/sqlite/sqlite-store.ts'

const LINES = Number(process.argv[2] ?? 20_000)
const CHUNK_LINES = Number(process.argv[3] ?? 1000)
const TURNAROUND_MS = 3000
const LIMIT_MS = 120_000

const live = {
  provider: 'openai',
  upstream_model: 'gpt-sim',
  input_usd_per_mtok: '0.15',
  output_usd_per_mtok: '0.6',
}
const file = catalogSchema.parse({
  providers: { openai: { kind: 'openai', base_url: 'http://127.0.0.1:1/v1' } },
  models: [
    {
      id: 'gpt-lane',
      endpoints: ['chat'],
      context_tokens: 8192,
      max_output_tokens: 1024,
      offerings: [
        live,
        {
          ...live,
          lane: 'batch',
          input_usd_per_mtok: '0.075',
          output_usd_per_mtok: '0.3',
          chunk_lines: CHUNK_LINES,
          poll_s: 0.25,
        },
      ],
    },
  ],
})
const catalog = createCatalog(file, {})
const liveOffering = file.models[0].offerings[0] as Offering

const sim = await startSimulator({ batchTurnaroundMs: TURNAROUND_MS })
const client = createOpenAIBatchClient({
  name: 'openai',
  baseUrl: `${sim.url}/v1`,
  apiKey: null,
  timeoutMs: 60_000,
})
const { store, dispatch, chunks } = createSqliteStore(null)
const now = Math.floor(Date.now() / 1000)
await store.createAccount({
  id: 'acct',
  name: 'acct',
  creditUsd: '1000',
  maxOpenBatches: 10,
  rateLimitPerMinute: 600,
  createdAt: now,
})
const lines = Array.from({ length: LINES }, (_, index) => ({
  lineNo: index + 1,
  customId: `line-${index + 1}`,
  input: JSON.stringify({
    custom_id: `line-${index + 1}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: {
      model: 'gpt-lane',
      max_tokens: 64,
      messages: [{ role: 'user', content: `Summarise ticket ${index + 1} in one line.` }],
    },
  }),
  // Marked for the model's batch lane, as admission marks them (NewLine.batchLane, laneKey).
  batchLane: laneKey('gpt-lane', 'openai'),
}))
await store.admitBatch({
  id: 'batch_bench',
  accountId: 'acct',
  name: null,
  endpoint: '/v1/chat/completions',
  completionWindowHours: 24,
  createdAt: now,
  deadlineAt: now + 86_400,
  costCeilingUsd: '100',
  lineCount: LINES,
  source: 'native',
  metadata: null,
  inputFileId: null,
  idempotencyKey: null,
  lines,
})

const engine = createBatchLaneEngine(
  { chunks, dispatch, batches: store, catalog, client: () => client, retry: DEFAULT_RETRY },
  { holder: 'bench', leaseMs: 60_000 },
)
const started = performance.now()
let firstMs: number | null = null
let lastMs: number | null = null
while (performance.now() - started < LIMIT_MS) {
  await engine.tick()
  const batch = await store.getBatch('acct', 'batch_bench')
  if (firstMs === null && batch!.counts.succeeded > 0) firstMs = performance.now() - started
  if (batch!.counts.succeeded + batch!.counts.failed === LINES) {
    lastMs = performance.now() - started
    break
  }
  await Bun.sleep(50)
}

let laneCost = new Decimal(0)
let liveCost = new Decimal(0)
for (let after = 0; ;) {
  const page = await store.readLines('batch_bench', {
    afterLineNo: after,
    limit: 5000,
    statuses: null,
  })
  if (page.length === 0) break
  for (const line of page) {
    if (line.costUsd) laneCost = laneCost.plus(line.costUsd)
    const usage = line.response ? mapOpenAIUsage(JSON.parse(line.response).usage) : null
    if (usage) liveCost = liveCost.plus(priceUsage(usage, liveOffering))
    after = line.lineNo
  }
}
const jobs = sim.batches().jobs
console.log(`bench:lanes — ${LINES} lines, 24 h window, chunk_lines ${CHUNK_LINES}`)
console.log(
  `  scaled time: provider turnaround ${TURNAROUND_MS} ms (minutes upstream), poll 0.25 s`,
)
console.log(
  `  provider batches: ${jobs.length}, largest ${Math.max(...jobs.map((j) => j.customIds.length))} lines`,
)
console.log(
  `  cost: ${laneCost.toFixed()} USD through the lane vs ${liveCost.toFixed()} USD all-live`,
)
console.log(
  `  ratio: ${liveCost.isZero() ? 'n/a' : laneCost.div(liveCost).toFixed(4)}× (aim ≤ 0.51×)`,
)
console.log(
  `  first result after ${firstMs === null ? 'none' : (firstMs / 1000).toFixed(2) + ' s'}`,
)
const last = lastMs === null ? `not within ${LIMIT_MS / 1000} s` : `${(lastMs / 1000).toFixed(2)} s`
console.log(`  last result after ${last}`)
await client.close()
await store.close()
await sim.stop()
