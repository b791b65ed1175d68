/**
 * The dispatcher's maintenance pass: cancels made on any instance reach the lines still waiting for
 * a slot here, and batches move on through their statuses (finalizing, completed, expired).
 */
import type { DispatchStore, LinesEnded } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'
import type { StoppedBatches } from './stopped-batches.ts'

/**
 * `here` are the batches with lines in flight on this instance; `stopped` those of them that stop
 * dispatching, kept to the batches still here; `onLinesEnded` hears of the lines a pass ended
 * without running them (/metrics). Resolves `true` when a batch changed status, so the next pass
 * (which takes `finalizing` on to its end) can run at once.
 */
export async function maintainBatches(
  store: DispatchStore,
  {
    logger,
    here,
    stopped,
    onLinesEnded,
  }: {
    logger: Logger
    here: { keys(): string[]; has(batchId: string): boolean }
    stopped: Pick<StoppedBatches, 'add' | 'delete' | typeof Symbol.iterator>
    onLinesEnded?: (ended: LinesEnded) => void
  },
): Promise<boolean> {
  const statuses = await store.batchStatuses(here.keys())
  for (const [id, status] of Object.entries(statuses)) if (status !== 'in_progress') stopped.add(id)
  for (const id of stopped) if (!here.has(id)) stopped.delete(id)
  const { changed, ended } = await store.advanceBatches(Math.floor(Date.now() / 1000))
  // What each became, read only when the line is written (a batch changes status a few times).
  if (changed.length > 0 && logger.enabled('info')) {
    const now = await store.batchStatuses(changed)
    for (const id of changed)
      logger.info('batch.status_changed', { batch_id: id, status: now[id] ?? null })
  }
  if (ended.cancelled > 0 || ended.expired > 0) onLinesEnded?.(ended)
  return changed.length > 0
}
