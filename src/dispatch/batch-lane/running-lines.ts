/**
 * A chunk's lines read back from the store for its results: each line's input (a Responses line
 * sent to a provider batch as chat gets its Response built with its own request,
 * docs/clients/responses.md; every answer is billed by its line's bounds) and, in a capped batch,
 * its own ceiling. The chunk's lines are leased to it, so they are `running`; read in line order
 * over the span the chunk's line numbers cover, a page at a time.
 */
import type { LineRecord } from '../../domain.ts'
import type { Store } from '../../store/store.ts'

const PAGE = 1000

/** The batch's `lineNos` that are running, by line number. */
export async function runningLines(
  store: Pick<Store, 'readLines'>,
  batchId: string,
  lineNos: readonly number[],
): Promise<Map<number, LineRecord>> {
  const lines = new Map<number, LineRecord>()
  if (lineNos.length === 0) return lines
  const wanted = new Set(lineNos)
  const last = Math.max(...lineNos)
  let after = Math.min(...lineNos) - 1
  while (after < last && lines.size < wanted.size) {
    const page = await store.readLines(batchId, {
      afterLineNo: after,
      limit: Math.min(PAGE, last - after),
      statuses: ['running'],
    })
    for (const line of page) if (wanted.has(line.lineNo)) lines.set(line.lineNo, line)
    if (page.length === 0) break
    after = page[page.length - 1]!.lineNo
  }
  return lines
}

/** A line's body as the caller wrote it. */
export const askedBody = (line: LineRecord): Record<string, unknown> =>
  (JSON.parse(line.input) as { body: Record<string, unknown> }).body
