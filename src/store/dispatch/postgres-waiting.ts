/** Why an open batch waits, on PostgreSQL: set and cleared by the parts that know. */
import type postgres from 'postgres'
import { OPEN_BATCH_STATUSES, WAITING_CODES } from '../../domain.ts'
import type { WaitingChange } from './dispatch-store.ts'

export async function setWaiting(
  sql: postgres.Sql,
  { batchId, waiting, replaces = WAITING_CODES }: WaitingChange,
) {
  const code = waiting?.code ?? null
  const message = waiting?.message ?? null
  const until = waiting?.until ?? null
  const result = await sql`
    UPDATE batches SET waiting_code = ${code}, waiting_message = ${message},
      waiting_until = ${until}
    WHERE id = ${batchId} AND status = ANY(${[...OPEN_BATCH_STATUSES]}::text[])
      AND (waiting_code IS NULL OR waiting_code = ANY(${[...replaces]}::text[]))
      AND (waiting_code IS DISTINCT FROM ${code}::text
        OR waiting_message IS DISTINCT FROM ${message}::text
        OR waiting_until IS DISTINCT FROM ${until}::bigint)`
  return result.count > 0
}
