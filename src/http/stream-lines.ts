/**
 * Streams a batch's lines in submitted order, a page at a time, so a 50,000-line result never
 * sits in memory whole. Each page is one indexed range read.
 */
import type { LineRecord, LineStatus } from '../domain.ts'
import type { BatchStore } from '../store/store.ts'

const PAGE = 1000
const encoder = new TextEncoder()

export function streamLines(
  store: BatchStore,
  batchId: string,
  statuses: readonly LineStatus[] | null,
  render: (line: LineRecord) => string,
): ReadableStream<Uint8Array> {
  let after = 0
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const lines = await store.readLines(batchId, { afterLineNo: after, limit: PAGE, statuses })
      if (lines.length === 0) return controller.close()
      let text = ''
      for (const line of lines) text += render(line) + '\n'
      after = lines[lines.length - 1].lineNo
      controller.enqueue(encoder.encode(text))
      if (lines.length < PAGE) controller.close()
    },
  })
}
