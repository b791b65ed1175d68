/**
 * Starts batches that wait for a top-up (docs/open-models.md) as soon as a deposit makes their hold fit,
 * and fails those still short after half their window. Runs on every instance: a deposit on
 * any of them (or by the CLI) is a nudge on the store's channel that runs it everywhere at once,
 * and a poll every `everyMs` catches what a lost nudge missed. The store takes each batch once.
 */
import type { BatchStore, WaitingPass } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'
import { createPeriodicTask, type PeriodicTask } from './periodic-task.ts'

export interface WaitingBatchesOptions {
  everyMs: number
  logger: Logger
  /** Batches started: the dispatchers should look now. */
  onStarted: (ids: string[]) => void
  /** Batches failed here (not started in time): their progress streams should hear it. */
  onEnded?: (ids: string[]) => void
  /** Lines failed with their batches here, none of them run (no credit or no capacity in time). */
  onLinesFailed?: (count: number) => void
  /** Unix ms. */
  now?: () => number
}

/** The pass as a periodic task whose `stop` also waits for a pass under way (before the store closes). */
export type WaitingBatches = Omit<PeriodicTask, 'stop'> & { stop(): Promise<void> }

export function createWaitingBatches(
  store: Pick<BatchStore, 'admitWaitingBatches' | 'failUnstartedBatches'>,
  options: WaitingBatchesOptions,
): WaitingBatches {
  const now = options.now ?? Date.now
  let current: Promise<WaitingPass> | null = null
  const task = createPeriodicTask(
    async () => {
      current = store.admitWaitingBatches(now())
      const pass = await current.finally(() => {
        current = null
      })
      for (const id of pass.started) options.logger.info('batch.credit_arrived', { batch_id: id })
      for (const id of pass.failed)
        options.logger.info('batch.credit_wait_ended', { batch_id: id, status: 'failed' })
      if (pass.started.length > 0) options.onStarted(pass.started)
      if (pass.failedLines > 0) options.onLinesFailed?.(pass.failedLines)
      // Starting in time (docs/open-models.md), in the same pass: the batches no capacity started in time.
      const unstarted = await store.failUnstartedBatches(now())
      for (const id of unstarted.failed)
        options.logger.info('batch.not_started_in_time', { batch_id: id, status: 'failed' })
      if (unstarted.failed.length > 0) options.onEnded?.(unstarted.failed)
      if (unstarted.lines > 0) options.onLinesFailed?.(unstarted.lines)
      return false
    },
    {
      everyMs: options.everyMs,
      earlyGapMs: 50,
      onError: (error) =>
        options.logger.warn('dispatch.waiting_batches_failed', { reason: error.message }),
    },
  )
  return {
    start: task.start,
    soon: task.soon,
    async stop() {
      task.stop()
      await current?.catch(() => {})
    },
  }
}
