/** A set of lines, kept by batch (no key string made per line): lines launched and not yet sent. */
import type { LineKey } from '../store/store.ts'

export class LinesByBatch {
  private readonly byBatch = new Map<string, Set<number>>()

  add(batchId: string, lineNo: number): void {
    let lines = this.byBatch.get(batchId)
    if (!lines) this.byBatch.set(batchId, (lines = new Set()))
    lines.add(lineNo)
  }

  delete(batchId: string, lineNo: number): void {
    const lines = this.byBatch.get(batchId)
    if (!lines?.delete(lineNo) || lines.size > 0) return
    this.byBatch.delete(batchId)
  }

  keys(): LineKey[] {
    const keys: LineKey[] = []
    for (const [batchId, lines] of this.byBatch)
      for (const lineNo of lines) keys.push({ batchId, lineNo })
    return keys
  }
}
