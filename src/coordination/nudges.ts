/**
 * Nudges: "new work was admitted", so idle dispatchers look now instead of at their next poll.
 * In one process (SQLite) a nudge is a function call; on PostgreSQL it is also a message on the
 * store's channel (NOTIFY, src/store/postgres/channel.ts), heard by every instance. Polling
 * (MULTIGRID_POLL_MS) stays the source of truth: a nudge lost while the database restarts only
 * costs a poll.
 */
import type { StoreChannel } from '../store/store-channel.ts'
import type { Logger } from '../telemetry/logger.ts'

/** The store channel nudges go on (open-store.ts openStoreChannel). */
export const NUDGE_CHANNEL = 'multigrid_work'

export interface Nudges {
  /** Wakes this instance's dispatcher and, on PostgreSQL, every other instance's. */
  publish(): void
  close(): Promise<void>
}

/** Nudges on the store's channel when it has one (PostgreSQL), else a function call. */
export async function openNudges(
  channel: StoreChannel | null,
  instance: string,
  logger: Logger,
  onNudge: () => void,
): Promise<Nudges> {
  if (!channel) return createLocalNudges(onNudge)
  return createChannelNudges(onNudge, channel, { instance, logger })
}

/** The embedded store: one process, one dispatcher. */
export function createLocalNudges(onNudge: () => void): Nudges {
  return {
    publish: onNudge,
    async close() {},
  }
}

export async function createChannelNudges(
  onNudge: () => void,
  channel: StoreChannel,
  options: { instance: string; logger: Logger },
): Promise<Nudges> {
  await channel.listen((payload) => {
    // Our own admissions already woke our dispatcher.
    if (payload !== options.instance) onNudge()
  })

  return {
    publish() {
      onNudge()
      channel.send(options.instance).catch((error) => {
        options.logger.debug('nudges.notify_failed', { reason: (error as Error).message })
      })
    },
    async close() {
      await channel.close()
    },
  }
}
