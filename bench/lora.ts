/**
 * LoRA: what fine-tune switching costs on a pool (docs/open-models.md). A gateway process sends batches to a
 * pool of two simulated vLLM replicas (processes of their own) with --max-loras 2: the same
 * batch on the base model alone, then mixing the base with 8 fine-tunes, round robin, in lines/s
 * from the POST to `completed`, with the loads and unloads it took. Reference: the ideal,
 * concurrency ÷ latency, that the base-only batch approaches.
 *
 *   bun bench/lora.ts [--lines 3000] [--concurrency 64] [--latency-ms 50] [--load-ms 200]
 *     [--max-loras 2] [--fine-tunes 8] [--runs 1]
 *
 * --load-ms is how long one replica takes to load a fine-tune (vLLM loads a 7B rank-16 fine-tune
 * from local disk in a few hundred milliseconds).
 */
import { parseArgs } from 'node:util'
import { writeCatalog } from '../test/helpers/catalog.ts'
import { median, randomPort, spawnGateway, spawnSimulator } from './lib.ts'

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '64' },
    'latency-ms': { type: 'string', default: '50' },
    'load-ms': { type: 'string', default: '200' },
    'max-loras': { type: 'string', default: '2' },
    'fine-tunes': { type: 'string', default: '8' },
    runs: { type: 'string', default: '1' },
  },
})
const lines = Number(values.lines)
const concurrency = Number(values.concurrency)
const latencyMs = Number(values['latency-ms'])
const maxLoras = Number(values['max-loras'])
const fineTuneCount = Number(values['fine-tunes'])
const runs = Number(values.runs)
const BASE = 'bench/lora-base'
const ADMIN = {
  authorization: 'Bearer bench-admin-token-0123456789',
  'content-type': 'application/json',
}

const simPorts = [randomPort(19100), randomPort(19700)]
const sims = await Promise.all(
  simPorts.map((port) =>
    spawnSimulator(
      [
        '--latency-ms',
        String(latencyMs),
        '--max-loras',
        String(maxLoras),
        '--lora-load-ms',
        values['load-ms']!,
      ],
      port,
    ),
  ),
)
const catalog = writeCatalog({
  providers: {
    pool: {
      kind: 'openai',
      base_url: sims.map((sim) => `${sim.url}/v1`),
      max_concurrency: concurrency,
      timeout_s: 120,
      lora: true,
      max_loras: maxLoras,
    },
  },
  models: [
    {
      id: BASE,
      endpoints: ['chat'],
      context_tokens: 32000,
      max_output_tokens: 1024,
      adapters: { max_per_batch: 8, limits_by_rank: { '64': 4, '32': 8 }, max_total_mib: 1008 },
      offerings: [
        {
          provider: 'pool',
          upstream_model: 'sim-chat',
          input_usd_per_mtok: '0.05',
          output_usd_per_mtok: '0.40',
        },
      ],
    },
  ],
})
const gateway = await spawnGateway(
  { MULTIGRID_CONFIG: catalog, MULTIGRID_POLL_MS: '10' },
  randomPort(20300),
)

async function admin(path: string, body: unknown) {
  const response = await fetch(`${gateway.url}/admin/v1${path}`, {
    method: 'POST',
    headers: ADMIN,
    body: JSON.stringify(body),
  })
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`)
  return (await response.json()) as { id: string; key?: string }
}

try {
  const account = await admin('/accounts', {
    name: 'bench',
    credit_usd: '100000',
    max_open_batches: 1000,
    rate_limit_per_minute: 1_000_000,
  })
  const { key } = await admin(`/accounts/${account.id}/keys`, {})
  const fineTunes: string[] = []
  for (let i = 0; i < fineTuneCount; i++) {
    const made = await admin(`/accounts/${account.id}/adapters`, {
      base_model: BASE,
      name: `tenant-${i}`,
      rank: 16,
      size_mib: 64,
      source: `/srv/lora/tenant-${i}`,
    })
    fineTunes.push(made.id)
  }
  const file = (models: string[]) =>
    Array.from({ length: lines }, (_, i) =>
      JSON.stringify({
        custom_id: `l${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: {
          model: models[i % models.length],
          messages: [{ role: 'user', content: `ticket ${i}: the parcel never came` }],
          max_tokens: 16,
        },
      }),
    ).join('\n') + '\n'

  const loraCounts = async () => {
    let loads = 0
    let unloads = 0
    for (const sim of sims) {
      const stats = (await (await fetch(`${sim.url}/sim/lora`)).json()) as {
        loads: Record<string, number>
        unloads: Record<string, number>
      }
      loads += Object.values(stats.loads).reduce((a, b) => a + b, 0)
      unloads += Object.values(stats.unloads).reduce((a, b) => a + b, 0)
    }
    return { loads, unloads }
  }

  async function run(models: string[]) {
    const before = await loraCounts()
    const started = performance.now()
    const created = await fetch(`${gateway.url}/v1/batches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/jsonl' },
      body: file(models),
    })
    if (created.status !== 201) throw new Error(`submit: ${created.status} ${await created.text()}`)
    const { id } = (await created.json()) as { id: string }
    for (let polls = 0; ; polls++) {
      const batch = (await (
        await fetch(`${gateway.url}/v1/batches/${id}`, {
          headers: { authorization: `Bearer ${key}` },
        })
      ).json()) as { status: string; request_counts: { succeeded: number; failed: number } }
      if (['completed', 'failed', 'cancelled', 'expired'].includes(batch.status)) {
        const seconds = (performance.now() - started) / 1000
        const after = await loraCounts()
        return {
          rate: lines / seconds,
          failed: batch.request_counts.failed,
          loads: after.loads - before.loads,
          unloads: after.unloads - before.unloads,
        }
      }
      if (polls > 60_000) throw new Error('the batch did not finish in 10 minutes')
      await Bun.sleep(10)
    }
  }

  const baseRates: number[] = []
  const mixedRates: number[] = []
  let mixed = { loads: 0, unloads: 0, failed: 0 }
  for (let r = 0; r < runs; r++) {
    const base = await run([BASE])
    baseRates.push(base.rate)
    const mix = await run([BASE, ...fineTunes])
    mixedRates.push(mix.rate)
    mixed = mix
    console.log(
      `run ${r + 1}: base alone ${base.rate.toFixed(0)} lines/s; base + ${fineTuneCount} fine-tunes ${mix.rate.toFixed(0)} lines/s (${mix.loads} loads, ${mix.unloads} unloads, ${mix.failed} failed)`,
    )
  }
  const ideal = (concurrency / latencyMs) * 1000
  console.log(
    [
      `lora: ${lines} lines, 2 replicas × max_loras ${maxLoras}, concurrency ${concurrency}, latency ${latencyMs} ms, load ${values['load-ms']} ms`,
      `  base model alone:               ${median(baseRates).toFixed(0)} lines/s (ideal ${ideal.toFixed(0)})`,
      `  base + ${fineTuneCount} fine-tunes, round robin: ${median(mixedRates).toFixed(0)} lines/s (${(median(mixedRates) / median(baseRates)).toFixed(2)}× the base alone), ${mixed.loads} loads, ${mixed.unloads} unloads in the last run`,
    ].join('\n'),
  )
} finally {
  await gateway.stop()
  await Promise.all(sims.map((sim) => sim.stop()))
}
