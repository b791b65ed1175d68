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
    console.error(`multigrid: port ${config.port} on ${config.host} is in use: stop what is listening there, or set PORT`)
    process.exit(69) // EX_UNAVAILABLE
  }
  throw error
}
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
