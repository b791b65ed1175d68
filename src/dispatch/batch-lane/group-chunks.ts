/**
 * Grouping (docs/batch-lanes.md): the lines the planner routes to a batch lane go out as provider batches
 * of one upstream model and one endpoint, at most `chunk_lines` lines and within the provider's
 * caps on lines and bytes. Lines keep their submitted order within a chunk, and chunks are cut
 * in that order, so the earliest lines' results come back first.
 */
import type { ChunkEndpoint } from '../../store/batch-chunks/chunk-store.ts'

/** One line about to join a chunk. */
export interface ChunkCandidate {
  lineNo: number
  upstreamModel: string
  endpoint: ChunkEndpoint
  /** Bytes of the line as the provider's input will hold it (its JSONL row or request object). */
  bytes: number
}

export interface ChunkLimits {
  chunkLines: number
  maxLines: number
  maxBytes: number
}

/** A chunk: one model, one endpoint, its lines in submitted order. */
export interface PlannedChunk {
  upstreamModel: string
  endpoint: ChunkEndpoint
  lineNos: number[]
  bytes: number
}

/**
 * Cuts candidates into chunks. A line that alone passes the byte cap is returned in `tooBig`:
 * no provider batch can hold it, so it stays for the live lanes.
 */
export function groupIntoChunks(
  candidates: readonly ChunkCandidate[],
  limits: ChunkLimits,
): { chunks: PlannedChunk[]; tooBig: number[] } {
  const most = Math.max(1, Math.min(limits.chunkLines, limits.maxLines))
  const open = new Map<string, PlannedChunk>()
  const chunks: PlannedChunk[] = []
  const tooBig: number[] = []
  for (const line of [...candidates].sort((a, b) => a.lineNo - b.lineNo)) {
    if (line.bytes > limits.maxBytes) {
      tooBig.push(line.lineNo)
      continue
    }
    const key = `${line.endpoint}\u0000${line.upstreamModel}`
    let chunk = open.get(key)
    if (chunk && (chunk.lineNos.length >= most || chunk.bytes + line.bytes > limits.maxBytes)) {
      chunk = undefined
    }
    if (!chunk) {
      chunk = { upstreamModel: line.upstreamModel, endpoint: line.endpoint, lineNos: [], bytes: 0 }
      open.set(key, chunk)
      chunks.push(chunk)
    }
    chunk.lineNos.push(line.lineNo)
    chunk.bytes += line.bytes
  }
  return { chunks, tooBig }
}
