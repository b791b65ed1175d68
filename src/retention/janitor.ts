/**
 * The janitor: results are deleted a number of days after their batch ended, uploaded files a
 * number of days after they were last used. It runs on every instance; the store hands each
 * item to one of them.
 */
import type { BlobStore } from '../files/blob-store.ts'
import type { RetentionStore } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'

const DAY = 86_400
const PER_ROUND = 50
/** Rounds per run: a backlog is worked off over several runs rather than in one long stall. */
const MAX_ROUNDS = 20

export interface Janitor {
  /** One pass as if the time were `now` (Unix seconds); returns what it deleted. */
  runOnce(now?: number): Promise<{ purgedBatches: string[]; deletedFiles: string[] }>
  start(intervalMs: number): void
  stop(): void
}

export function createJanitor(
  store: RetentionStore,
  blobs: BlobStore,
  logger: Logger,
  retention: { resultDays: number; fileDays: number },
): Janitor {
  let timer: ReturnType<typeof setTimeout> | null = null
  let running = false

  async function runOnce(now = Math.floor(Date.now() / 1000)) {
    const purgedBatches: string[] = []
    const deletedFiles: string[] = []
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const ids = await store.purgeResults(now - retention.resultDays * DAY, PER_ROUND, now)
      purgedBatches.push(...ids)
      if (ids.length < PER_ROUND) break
    }
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const ids = await store.deleteStaleUploads(now - retention.fileDays * DAY, PER_ROUND)
      // The record is gone first, so no one can start reading content that is being deleted.
      for (const id of ids) await blobs.delete(id)
      deletedFiles.push(...ids)
      if (ids.length < PER_ROUND) break
    }
    if (purgedBatches.length || deletedFiles.length) {
      logger.info('retention.deleted', { batches: purgedBatches.length, files: deletedFiles.length })
    }
    return { purgedBatches, deletedFiles }
  }

  return {
    runOnce,
    start(intervalMs) {
      const schedule = () => {
        // Jitter, so instances started together do not all wake at once.
        timer = setTimeout(tick, intervalMs * (0.75 + Math.random() / 2))
        timer.unref?.()
      }
      const tick = async () => {
        if (running) return schedule()
        running = true
        try {
          await runOnce()
        } catch (error) {
          logger.warn('retention.failed', { reason: (error as Error).message })
        } finally {
          running = false
          schedule()
        }
      }
      schedule()
    },
    stop() {
      if (timer) clearTimeout(timer)
      timer = null
    },
  }
}
