/**
 * Starting in time (docs/open-models.md): a batch none of whose lines has started by half its window — by
 * 48 hours for a window of 72 hours or more, so that a batch that starts has at least 24 hours
 * left — ends `failed` with `capacity_unavailable`: nothing run, its hold released, nothing
 * charged. A line has started once it is in flight, has ended, or was tried upstream (an
 * attempt used), or once a batch lane's chunk of it reached the provider (its provider batch
 * created, or the chunk refused by the provider as a whole: refused_at), though the lines wait
 * for the lane again, pending without an attempt: lines claimed and handed back unsent (an
 * unreachable provider) use none, so a batch of such lines has not started, which `started_at`
 * alone cannot tell. The rule is here; each dialect applies it in one transaction
 * (sqlite-start-in-time.ts, postgres-start-in-time.ts).
 */

/** From this window on, a batch must start within 48 hours. */
export const LONG_WINDOW_HOURS = 72
const LONG_START_BY_SECONDS = 48 * 3600

/** Seconds after its creation by which a batch of this window must have started a line. */
export function startBySeconds(windowHours: number): number {
  return windowHours >= LONG_WINDOW_HOURS ? LONG_START_BY_SECONDS : windowHours * 1800
}

/** The same offset as an SQL expression over the batches table, for the dialects' queries. */
export const START_BY_SQL = `CASE WHEN completion_window_hours >= ${LONG_WINDOW_HOURS} THEN ${LONG_START_BY_SECONDS} ELSE completion_window_hours * 1800 END`

/**
 * No line of the batch (the outer query's `batches` row) has started: in flight, ended, or tried
 * upstream and waiting to be tried again (an attempt used; a line handed back unsent uses none),
 * nor sent to the provider in a lane's chunk that it created or refused whole (sql/0024).
 */
export const NO_LINE_STARTED_SQL = `(NOT EXISTS (
  SELECT 1 FROM lines l WHERE l.batch_id = batches.id AND (l.status <> 'pending' OR l.attempts > 0))
  AND NOT EXISTS (SELECT 1 FROM batch_chunks c WHERE c.batch_id = batches.id
    AND (c.provider_batch_id IS NOT NULL OR c.refused_at IS NOT NULL)))`

export const CAPACITY_UNAVAILABLE = 'capacity_unavailable'

export function capacityUnavailableMessage(windowHours: number, startBy: number): string {
  const hours = startBySeconds(windowHours) / 3600
  return `no capacity could start this batch within ${hours} hours of its ${windowHours}-hour window (by ${new Date(startBy * 1000).toISOString()}); nothing ran and nothing was charged: submit it again, with a longer window or when the providers have room`
}
