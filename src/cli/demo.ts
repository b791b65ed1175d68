/**
 * `npm run demo`: everything offline in one command. Starts the upstream simulator and a gateway
 * on the embedded store with every model of providers/catalog.simulator.json served by it (at the
 * real list prices), makes an account with credit and a key, and prints them with a line to
 * paste. Ctrl-C (or SIGTERM) stops both.
 *
 *   npm run demo -- [--port 8080] [--sim-port 8090] [--data-dir ./data/demo] [--credit 10]
 *                   [--latency-ms 50]
 *
 * The ports default to PORT and SIM_PORT when set, and the data directory to MULTIGRID_DATA_DIR, as
 * `npm start` and the walk-through read them.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { createAccounts } from '../accounts/accounts.ts'
import { ConfigError, loadConfigWith } from '../config.ts'
import { ALL_SCOPES } from '../domain.ts'
import { startGateway } from '../gateway.ts'
import { creditAmountProblem } from '../money/credit-amount.ts'
import { startSimulator } from '../simulator/server.ts'
import { demoText } from './demo-text.ts'

const USAGE = `usage: npm run demo -- [--port 8080] [--sim-port 8090] [--data-dir ./data/demo]
                       [--credit USD] [--latency-ms 50]
Starts the upstream simulator and a gateway on it (SQLite in --data-dir), makes an account with
--credit (default 10) and a key, prints them; Ctrl-C stops both. The ports default to PORT and
SIM_PORT when they are set, the data directory to MULTIGRID_DATA_DIR.`

const SIM_CATALOG = resolve(import.meta.dir, '../../providers/catalog.simulator.json')
/** The address catalog.simulator.json gives the simulator; the demo's may be another port. */
const SIM_ADDRESS = '127.0.0.1:8090'

function fail(message: string): never {
  console.error(`demo: ${message}\n\n${USAGE}`)
  process.exit(2)
}

function readOptions() {
  let values
  try {
    values = parseArgs({
      options: {
        port: { type: 'string', default: process.env.PORT || '8080' },
        'sim-port': { type: 'string', default: process.env.SIM_PORT || '8090' },
        'data-dir': { type: 'string', default: process.env.MULTIGRID_DATA_DIR || './data/demo' },
        credit: { type: 'string', default: '10' },
        'latency-ms': { type: 'string', default: '50' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values
  } catch (error) {
    fail((error as Error).message)
  }
  if (values.help) {
    console.log(USAGE)
    process.exit(0)
  }
  const port = (flag: 'port' | 'sim-port') => {
    const text = values[flag]!
    if (!/^\d{1,5}$/.test(text) || Number(text) > 65535)
      fail(`--${flag} (or ${flag === 'port' ? 'PORT' : 'SIM_PORT'}) must be a port, 0 to 65535`)
    return Number(text)
  }
  const problem = creditAmountProblem(values.credit!, false)
  if (problem) fail(`--credit ${problem}`)
  if (!/^\d{1,5}$/.test(values['latency-ms']!)) fail('--latency-ms must be a whole number of ms')
  return {
    port: port('port'),
    simPort: port('sim-port'),
    dataDir: resolve(values['data-dir']!),
    credit: values.credit!,
    latencyMs: Number(values['latency-ms']),
  }
}

const options = readOptions()
const simulator = await startSimulator({
  port: options.simPort,
  hostname: '127.0.0.1',
  latencyMs: options.latencyMs,
}).catch((error: Error) =>
  fail(
    `the simulator cannot listen on port ${options.simPort} (${error.message}): pass --sim-port`,
  ),
)
// The simulator catalog, pointed at this simulator's port, kept beside the demo's store.
mkdirSync(options.dataDir, { recursive: true })
const catalogPath = join(options.dataDir, 'catalog.simulator.json')
writeFileSync(
  catalogPath,
  readFileSync(SIM_CATALOG, 'utf8').replaceAll(SIM_ADDRESS, `127.0.0.1:${simulator.port}`),
)
const adminToken = crypto.randomUUID().replaceAll('-', '')
let config
try {
  config = loadConfigWith({
    PORT: String(options.port),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: options.dataDir,
    MULTIGRID_CONFIG: catalogPath,
    MULTIGRID_ADMIN_TOKEN: adminToken,
    // The embedded store and in-process limits, whatever this shell has exported.
    DATABASE_URL: undefined,
    REDIS_URL: undefined,
    LOG_LEVEL: 'warn',
  })
} catch (error) {
  await simulator.stop()
  if (error instanceof ConfigError) fail(`configuration error: ${error.message}`)
  throw error
}
const gateway = await startGateway(config).catch(async (error: { code?: string }) => {
  await simulator.stop()
  if (error.code === 'EADDRINUSE') fail(`port ${options.port} is in use: pass --port`)
  throw error
})

let stopping = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, async () => {
    if (stopping) return
    stopping = true
    console.error('\ndemo: stopping the gateway and the simulator')
    await gateway.stop()
    await simulator.stop()
    process.exit(0)
  })
}

const accounts = createAccounts(gateway.store, {
  maxOpenBatches: config.limits.defaultMaxOpenBatches,
  rateLimitPerMinute: config.limits.defaultRateLimitPerMinute,
  maxFiles: config.limits.defaultMaxFiles,
  maxStoredBytes: config.limits.defaultMaxStoredBytes,
})
const account = await accounts.createAccount({ name: 'demo', creditUsd: options.credit })
const made = (await accounts.createKey(account.id, {
  name: 'demo',
  scopes: [...ALL_SCOPES],
  rateLimitPerMinute: null,
}))!
console.log(
  demoText({
    url: gateway.url,
    simulatorUrl: simulator.url,
    dataDir: options.dataDir,
    accountId: account.id,
    creditUsd: options.credit,
    key: made.key,
    adminToken,
  }),
)
