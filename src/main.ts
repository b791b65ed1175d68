/** The gateway process: `npm start`. */
import { ConfigError, loadConfig } from './config.ts'
import { startGateway } from './gateway.ts'
import { DataDirInUse } from './store/data-dir-lock.ts'
import {
  databaseProblem,
  dataDirProblem,
  adminCommand,
  firstKeyNote,
  listenProblem,
  missingKeys,
  missingKeysNote,
  OFFLINE_HINT,
} from './cli/start-up-notes.ts'

let config
try {
  config = loadConfig()
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`multigrid: configuration error: ${error.message}`)
    process.exit(78) // EX_CONFIG
  }
  throw error
}
let gateway
try {
  gateway = await startGateway(config)
} catch (error) {
  const problem =
    dataDirProblem(error, config) ?? databaseProblem(error, config) ?? listenProblem(error, config)
  if (problem) {
    console.error(`multigrid: configuration error: ${problem}`)
    process.exit(78) // EX_CONFIG
  }
  if (error instanceof DataDirInUse) {
    console.error(`multigrid: MULTIGRID_DATA_DIR ${error.message}`)
    process.exit(69) // EX_UNAVAILABLE
  }
  if ((error as { code?: unknown }).code === 'EADDRINUSE') {
    console.error(
      `multigrid: port ${config.port} on ${config.host} is in use: stop what is listening there, or set PORT`,
    )
    process.exit(69) // EX_UNAVAILABLE
  }
  throw error
}
// Signals are handled from the moment the server listens: a SIGTERM right after start-up
// still stops it gracefully.
let stopping = false
/** What a stop may take past the drain (writing charges, closing the store) before it gives up. */
const STOP_GRACE_MS = 10_000
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, async () => {
    if (stopping) return
    stopping = true
    gateway.logger.info('gateway.stopping', { signal })
    // Bounded (SPEC §6): a part waiting on a store out of reach would hold the stop for good.
    // What is lost then is what a SIGKILL loses, never a charge twice (docs/live.md).
    const limitMs = config.dispatch.drainMs + STOP_GRACE_MS
    setTimeout(() => {
      gateway.logger.error('gateway.stop_timed_out', { after_ms: limitMs })
      process.exit(1)
    }, limitMs).unref()
    await gateway.stop()
    process.exit(0)
  })
}
// MULTIGRID_ variables nothing reads (a typo of a setting was refused above): said, not ignored.
if (config.unknownVariables.length > 0) {
  gateway.logger.warn('config.unknown_variables', { names: config.unknownVariables })
  console.error(
    `multigrid: ignored ${config.unknownVariables.join(', ')}: not a variable of the gateway (docs/configuration.md lists them); remove or rename it`,
  )
}
// Providers without a key: logged, and said plainly, with the way to try everything offline.
const missing = missingKeys(config)
if (missing.providers.length > 0) {
  gateway.logger.warn('providers.missing_keys', {
    providers: missing.providers.map((p) => p.name),
    env: missing.providers.map((p) => p.env),
    models_without_offering: missing.modelsWithoutOffering,
    offline: OFFLINE_HINT,
  })
  console.error(missingKeysNote(missing).join('\n'))
}
// A fresh install has no account: say, for the person who started it, how to make the first one.
// (A store closed meanwhile by a signal needs no advice.)
if (!(await gateway.store.hasAccounts().catch(() => true))) {
  const started = { byNpm: config.startedByNpm, bunPath: process.execPath }
  console.error(firstKeyNote(config, gateway.port, adminCommand(started)).join('\n'))
}
