/**
 * Lines' bodies as the caller wrote them, read back from the store for a chunk's results: a
 * Responses line sent to a provider batch as chat gets its Response built with its own request
 * (docs/clients/responses.md). The chunk's lines are leased to it, so they are `running`; read
 * in line order over the span the chunk's line numbers cover, a page at a time.
 */
import type { Store } from '../../store/store.ts'

const PAGE = 1000

/** The bodies of the batch's `lineNos` that are running, by line number. */
export async function askedBodies(
  store: Pick<Store, 'readLines'>,
  batchId: string,
  lineNos: readonly number[],
): Promise<Map<number, Record<string, unknown>>> {
  const bodies = new Map<number, Record<string, unknown>>()
  if (lineNos.length === 0) return bodies
  const wanted = new Set(lineNos)
  const last = Math.max(...lineNos)
  let after = Math.min(...lineNos) - 1
  while (after < last && bodies.size < wanted.size) {
    const page = await store.readLines(batchId, {
      afterLineNo: after,
      limit: Math.min(PAGE, last - after),
      statuses: ['running'],
    })
    for (const line of page)
      if (wanted.has(line.lineNo))
        bodies.set(line.lineNo, (JSON.parse(line.input) as { body: Record<string, unknown> }).body)
    if (page.length === 0) break
    after = page[page.length - 1]!.lineNo
  }
  return bodies
}
