/**
 * Windows are whole hours (completion_window_hours 1–168), too long for a test of the planner:
 * this moves an admitted batch's deadline to `seconds` after its creation, in the gateway's own
 * store (SQLite file or PostgreSQL schema), as data, the way an hours-long batch near its end looks.
 * The dispatcher reads the deadline from the store on every claim (its list of runnable batches
 * is at most 200 ms old), so the lines it decided before the change are at most that old.
 */
import { editBatchRow } from './edit-batch.ts'
import type { TestGateway } from './gateway.ts'

export async function shortenWindow(gw: TestGateway, batchId: string, seconds: number) {
  await editBatchRow(gw, batchId, `deadline_at = created_at + ${seconds}`)
}
