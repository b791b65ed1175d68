/**
 * Nudges: "new work was admitted", so idle dispatchers look now instead of at their next poll.
 * In one process (SQLite) a nudge is a function call; on PostgreSQL it is also a NOTIFY on a
 * channel of the store's schema, LISTENed to by every instance. Polling (MULTIGRID_POLL_MS)
 * stays the source of truth: a nudge lost while the database restarts only costs a poll.
 *
 * postgres.js holds the LISTEN on a connection of its own and LISTENs again when that connection
 * comes back (checked on 3.4.9 with the server restarted, and stopped for 4 s then started).
 */
import postgres from 'postgres'
import type { Config } from '../config.ts'
import { splitSchema } from '../store/open-store.ts'
import type { Logger } from '../telemetry/logger.ts'

export interface Nudges {
  /** Wakes this instance's dispatcher and, on PostgreSQL, every other instance's. */
  publish(): void
  close(): Promise<void>
}

/** Nudges for the configured store: NOTIFY on PostgreSQL, a function call on SQLite. */
export async function openNudges(
  config: Pick<Config, 'databaseUrl'>,
  instance: string,
  logger: Logger,
  onNudge: () => void,
): Promise<Nudges> {
  if (!config.databaseUrl) return createLocalNudges(onNudge)
  const { url, schema } = splitSchema(config.databaseUrl)
  return createPostgresNudges(onNudge, { url, schema, instance, logger })
}

/** The embedded store: one process, one dispatcher. */
export function createLocalNudges(onNudge: () => void): Nudges {
  return {
    publish: onNudge,
    async close() {},
  }
}

export interface PostgresNudgesOptions {
  /** postgres:// URL without the search_path parameter. */
  url: string
  /** The store's schema: instances on other schemas (other fleets, test files) stay apart. */
  schema: string | undefined
  instance: string
  logger: Logger
}

export async function createPostgresNudges(
  onNudge: () => void,
  options: PostgresNudgesOptions,
): Promise<Nudges> {
  // Two connections: one to NOTIFY on, and the one postgres.js opens for LISTEN.
  const sql = postgres(options.url, { max: 1, onnotice: () => {}, idle_timeout: 60 })
  const channel = `multigrid_work.${options.schema ?? 'public'}`.slice(0, 63)
  await sql.listen(channel, (payload) => {
    // Our own admissions already woke our dispatcher.
    if (payload !== options.instance) onNudge()
  })

  return {
    publish() {
      onNudge()
      sql.notify(channel, options.instance).catch((error) => {
        options.logger.debug('nudges.notify_failed', { reason: (error as Error).message })
      })
    },
    async close() {
      await sql.end({ timeout: 1 })
    },
  }
}
