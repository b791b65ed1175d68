/**
 * The janitor: results are deleted a number of days after their batch ended, uploaded files a
 * number of days after they were last used. It runs on every instance; the store hands each
 * item to one of them.
 *
 * It also clears what a crash leaves of uploads: the reservation and content of an upload whose
 * instance died (its reservation stopped being renewed, upload-lease.ts), and content that no
 * file record and no upload in progress knows of (e.g. a kill between deleting a file's record
 * and its content). An upload still arriving on another instance holds a renewed reservation
 * from before its first byte was stored, so it is never taken. Expired dashboard sessions go too.
 */
import type { BlobStore } from '../store/files/blob-store.ts'
import { UPLOAD_STALE_MS } from '../store/files/upload-lease.ts'
import type { RetentionStore } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'

const DAY = 86_400
const PER_ROUND = 50
/** Rounds per run: a backlog is worked off over several runs rather than in one long stall. */
const MAX_ROUNDS = 20
const SWEEP_PAGE = 500

export interface Janitor {
  /** One pass as if the time were `now` (Unix seconds); returns what it deleted. */
  runOnce(now?: number): Promise<JanitorReport>
  /**
   * Runs one pass at once, then every `intervalMs`. With `singleInstance` (the embedded store:
   * no other process shares it) every upload reservation found at start-up is a dead one.
   */
  start(intervalMs: number, options?: { singleInstance?: boolean }): void
  /** Stops scheduling and waits for a sweep under way, so the store can close after it. */
  stop(): Promise<void>
}

export interface JanitorReport {
  purgedBatches: string[]
  deletedFiles: string[]
  /** Uploads whose instance died mid-stream: reservation and content deleted. */
  abandonedUploads: string[]
  /** Content with no file record and no upload in progress. */
  orphanedContent: string[]
  expiredSessions: number
}

export function createJanitor(
  store: RetentionStore,
  blobs: BlobStore,
  logger: Logger,
  retention: { resultDays: number; fileDays: number },
): Janitor {
  let timer: ReturnType<typeof setTimeout> | null = null
  let running: Promise<void> | null = null
  let stopped = false

  async function runOnce(
    now = Math.floor(Date.now() / 1000),
    staleBeforeMs = now * 1000 - UPLOAD_STALE_MS,
  ): Promise<JanitorReport> {
    const purgedBatches: string[] = []
    const deletedFiles: string[] = []
    const abandonedUploads: string[] = []
    const orphanedContent: string[] = []
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const ids = await store.purgeResults(now - retention.resultDays * DAY, PER_ROUND, now)
      purgedBatches.push(...ids)
      if (ids.length < PER_ROUND) break
    }
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const ids = await store.deleteStaleUploads(now - retention.fileDays * DAY, PER_ROUND, now)
      // The record is gone first, so no one can start reading content that is being deleted.
      for (const id of ids) await blobs.delete(id)
      deletedFiles.push(...ids)
      if (ids.length < PER_ROUND) break
    }
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const ids = await store.expireUploads(staleBeforeMs, PER_ROUND)
      for (const id of ids) await blobs.delete(id)
      abandonedUploads.push(...ids)
      if (ids.length < PER_ROUND) break
    }
    let after: string | null = null
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const ids = await blobs.listIds(after, SWEEP_PAGE)
      if (ids.length === 0) break
      const known = await store.knownFileIds(ids)
      for (const id of ids) {
        if (known.has(id)) continue
        await blobs.delete(id)
        orphanedContent.push(id)
      }
      after = ids.at(-1)!
      if (ids.length < SWEEP_PAGE) break
    }
    const expiredSessions = await store.deleteExpiredSessions(now)
    if (
      purgedBatches.length ||
      deletedFiles.length ||
      abandonedUploads.length ||
      orphanedContent.length
    ) {
      logger.info('retention.deleted', {
        batches: purgedBatches.length,
        files: deletedFiles.length,
        abandoned_uploads: abandonedUploads.length,
        orphaned_content: orphanedContent.length,
      })
    }
    return { purgedBatches, deletedFiles, abandonedUploads, orphanedContent, expiredSessions }
  }

  return {
    runOnce: (now) => runOnce(now),
    start(intervalMs, options = {}) {
      const schedule = () => {
        // Jitter, so instances started together do not all wake at once.
        timer = setTimeout(tick, intervalMs * (0.75 + Math.random() / 2))
        timer.unref?.()
      }
      const sweep = async (staleBeforeMs?: number) => {
        try {
          await runOnce(undefined, staleBeforeMs)
        } catch (error) {
          logger.warn('retention.failed', { reason: (error as Error).message })
        }
      }
      const tick = (staleBeforeMs?: number) => {
        if (running) return schedule()
        running = sweep(staleBeforeMs).finally(() => {
          running = null
          if (!stopped) schedule()
        })
      }
      stopped = false
      // At start-up, what the last run of this store left behind goes at once; on the embedded
      // store that is every reservation older than this process.
      const startedAtMs = Date.now()
      timer = setTimeout(() => tick(options.singleInstance ? startedAtMs : undefined), 0)
      timer.unref?.()
    },
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      timer = null
      await running
    },
  }
}
