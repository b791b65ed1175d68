/** The gateway process: `npm start`. */
import { ConfigError, loadConfig } from './config.ts'
import { startGateway } from './gateway.ts'

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
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, async () => {
    if (stopping) return
    stopping = true
    gateway.logger.info('gateway.stopping', { signal })
    await gateway.stop()
    process.exit(0)
  })
}
// A fresh install has no account: say, for the person who started it, how to make the first one.
// (A store closed meanwhile by a signal needs no advice.)
if (!(await gateway.store.hasAccounts().catch(() => true))) {
  console.error(
    [
      `multigrid: listening on port ${gateway.port}; there is no account yet. Make one with credit, then a key for it:`,
      '  npm run mg -- accounts create acme --credit 10',
      '  npm run mg -- keys create <the account id it printed>',
      '(the key is shown once; send it as "Authorization: Bearer <key>")',
    ].join('\n'),
  )
}
