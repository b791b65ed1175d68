/** The planner's projected finish of open batches on PostgreSQL (whole seconds), in one statement. */
import type postgres from 'postgres'

export async function recordEtas(
  sql: postgres.Sql,
  etas: readonly { batchId: string; eta: number | null }[],
) {
  if (etas.length === 0) return
  await sql`
    UPDATE batches b SET eta = e.eta
    FROM unnest(${etas.map((e) => e.batchId)}::text[],
                ${etas.map((e) => (e.eta === null ? null : Math.ceil(e.eta)))}::bigint[]) AS e (id, eta)
    WHERE b.id = e.id AND b.status IN ('in_progress', 'cancelling')
      AND b.eta IS DISTINCT FROM e.eta`
}
