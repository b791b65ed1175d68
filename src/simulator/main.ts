/**
 * `npm run sim -- [--port 8090] [--latency-ms 50] [--rate-429 0.1 --retry-after 1] …`: the upstream
 * simulator as a process. Prints one line with its URL. GET /sim/stats, POST /sim/reset and
 * POST /sim/config (a JSON SimulatorOptions) reach a running one from outside. `--capacity N
 * [--max-queued M]` makes it a GPU pool: a vLLM-like replica with a queue and GET /metrics.
 */
import { parseArgs } from 'node:util'
import type { SimulatorOptions } from './options.ts'
import { startSimulator } from './server.ts'

const numberFlags = {
  'latency-ms': 'latencyMs',
  'jitter-ms': 'jitterMs',
  'error-rate': 'errorRate',
  'rate-429': 'rate429',
  'max-concurrency': 'maxConcurrency',
  'max-rps': 'maxRequestsPerSecond',
  'timeout-rate': 'timeoutRate',
  'reset-rate': 'resetRate',
  'malformed-rate': 'malformedRate',
  'cut-rate': 'cutRate',
  'no-usage-rate': 'noUsageRate',
  'trickle-rate': 'trickleRate',
  'trickle-ms': 'trickleMs',
  seed: 'seed',
  'embedding-dims': 'embeddingDims',
  'usage-factor': 'usageFactor',
  capacity: 'gpuCapacity',
  'max-queued': 'gpuMaxQueued',
  'max-loras': 'maxLoras',
  'lora-load-ms': 'loraLoadMs',
  'flex-latency-ms': 'flexLatencyMs',
  'flex-unavailable-rate': 'flexUnavailableRate',
} as const satisfies Record<string, keyof SimulatorOptions>

const usage = [
  'usage: npm run sim -- [--port 8090] [--hostname 127.0.0.1] [--retry-after SECONDS]',
  '  [--require-api-key KEY] [--latency-ms N] [--jitter-ms N] [--max-concurrency N] [--max-rps N]',
  '  [--error-rate F] [--rate-429 F] [--timeout-rate F] [--reset-rate F] [--malformed-rate F] [--cut-rate F]',
  '  [--no-usage-rate F] [--trickle-rate F] [--trickle-ms N] [--seed N] [--embedding-dims N]',
  '  [--usage-factor X] [--capacity N [--max-queued M]] [--max-loras N [--lora-load-ms N]]',
  '  [--structured valid|not_json|off_schema] [--flex-latency-ms N] [--flex-unavailable-rate F]',
  'F is a fraction of inference requests, 0 to 1; X multiplies the usage reported (default 1).',
  '--capacity N plays a vLLM replica: N requests run at once for --latency-ms each, the rest wait',
  'in a FIFO queue (503 beyond M waiting; unbounded without --max-queued), GET /metrics serves',
  'vLLM\'s gauges; POST /sim/config {"gpuCapacity": N} changes it while running.',
  '--max-loras N loads LoRA adapters at runtime as vLLM does (POST /v1/load_lora_adapter), at most',
  'N at once; GET /sim/lora counts loads per fine-tune.',
  '--structured: what requests with response_format get back (default valid JSON for the schema);',
  'a [sim:valid], [sim:not_json] or [sim:off_schema] marker in the last user message picks per request;',
  'after a [sim:answer] marker, the rest of that message is the answer, as it is.',
  'Requests with service_tier "flex" wait --flex-latency-ms longer and a fraction F of them get',
  '429 resource_unavailable. A [sim:cache read=N write=N write1h=N] marker reports that many prompt',
  "tokens as cache reads and writes, in each provider's usage shape.",
].join('\n')

function fail(message: string): never {
  console.error(`${message}\n${usage}`)
  process.exit(2)
}

function toNumber(flag: string, text: string): number {
  const value = Number(text)
  if (text.trim() === '' || !Number.isFinite(value) || value < 0) {
    fail(`--${flag} must be a non-negative number, got "${text}"`)
  }
  return value
}

function readOptions(argv: string[]): SimulatorOptions {
  const stringOptions = Object.fromEntries(
    Object.keys(numberFlags).map((flag) => [flag, { type: 'string' as const }]),
  )
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: argv,
      options: {
        ...stringOptions,
        port: { type: 'string', default: '8090' },
        hostname: { type: 'string', default: '127.0.0.1' },
        'retry-after': { type: 'string' },
        'require-api-key': { type: 'string' },
        structured: { type: 'string' },
        help: { type: 'boolean' },
      },
    }).values
  } catch (error) {
    fail((error as Error).message)
  }
  if (values.help) {
    console.log(usage)
    process.exit(0)
  }
  const options: SimulatorOptions = {
    port: toNumber('port', String(values.port)),
    hostname: String(values.hostname),
    retryAfterSeconds:
      values['retry-after'] === undefined
        ? null
        : toNumber('retry-after', String(values['retry-after'])),
    requireApiKey:
      values['require-api-key'] === undefined ? null : String(values['require-api-key']),
  }
  const structured = values.structured
  if (structured !== undefined) {
    if (structured !== 'valid' && structured !== 'not_json' && structured !== 'off_schema') {
      fail(`--structured must be valid, not_json or off_schema, got "${String(structured)}"`)
    }
    options.structuredAnswers = structured
  }
  for (const [flag, key] of Object.entries(numberFlags)) {
    const text = values[flag]
    if (typeof text === 'string') Object.assign(options, { [key]: toNumber(flag, text) })
  }
  // Requests are whole: a pool of 2.5 slots or a queue of 0.5 places means a typo.
  for (const flag of ['capacity', 'max-queued', 'max-loras'] as const) {
    const value = options[numberFlags[flag]]
    if (value != null && !Number.isInteger(value)) {
      fail(`--${flag} must be a whole number, got "${String(values[flag])}"`)
    }
  }
  return options
}

const options = readOptions(process.argv.slice(2))
const simulator = await startSimulator(options).catch((error: Error) =>
  fail(`cannot listen on ${options.hostname}:${options.port}: ${error.message}`),
)
console.log(`multigrid upstream simulator listening on ${simulator.url}`)

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    void simulator.stop().then(() => process.exit(0))
  })
}
