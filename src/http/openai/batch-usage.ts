/**
 * What the facade's batch object reports beyond the native one (docs/openai-facade.md): OpenAI's `usage`,
 * summed over the answers recorded so far, and `model` when every line names the same one (by
 * one name, or by several of one catalog model: then its id).
 * Both are read from the batch's lines, a page at a time, and kept per batch version: a poll of
 * a batch that has not moved costs nothing, an ended batch is read once. (The store keeps no
 * token totals per batch; reading the lines is linear in the batch, bounded by its 50,000.)
 */
import type { BatchRecord, LineRecord } from '../../domain.ts'
import type { BatchStore } from '../../store/store.ts'

export interface BatchUsage {
  input_tokens: number
  input_tokens_details: { cached_tokens: number }
  output_tokens: number
  output_tokens_details: { reasoning_tokens: number }
  total_tokens: number
}

export interface BatchSummary {
  usage: BatchUsage
  /** The one model every line names, or null when they name several (or there are none). */
  model: string | null
}

const PAGE = 1000
/** Batches whose summary is kept; the least recently computed goes first. */
const KEPT = 1000

interface ChatUsage {
  prompt_tokens?: number
  completion_tokens?: number
  prompt_tokens_details?: { cached_tokens?: number }
  completion_tokens_details?: { reasoning_tokens?: number }
  input_tokens?: number
  output_tokens?: number
  input_tokens_details?: { cached_tokens?: number }
  output_tokens_details?: { reasoning_tokens?: number }
  cache_read_input_tokens?: number
  cache_creation_input_tokens?: number
}

const count = (value: unknown) => (typeof value === 'number' && value >= 0 ? value : 0)

function modelOf(input: string): string | null {
  try {
    const model = (JSON.parse(input) as { body?: { model?: unknown } }).body?.model
    return typeof model === 'string' ? model : null
  } catch {
    return null
  }
}

/**
 * The answer a line was billed for: its response, or the one kept in its error when a failure is
 * billed (structured_output_unchecked: the upstream answered, the check ran out of time).
 */
function billedAnswer(line: Pick<LineRecord, 'response' | 'error'>): { usage?: unknown } | null {
  if (line.response !== null) return JSON.parse(line.response) as { usage?: unknown }
  const kept = line.error?.code === 'structured_output_unchecked' ? line.error.upstream : null
  return typeof kept === 'object' && kept !== null ? (kept as { usage?: unknown }) : null
}

async function summarize(
  store: BatchStore,
  batchId: string,
  modelId: (name: string) => string,
): Promise<BatchSummary> {
  let input = 0
  let cached = 0
  let output = 0
  let reasoning = 0
  /** The name the lines use while they all use one; the catalog's id once they use two of one. */
  let model: string | null | undefined
  for (let after = 0; ;) {
    const lines = await store.readLines(batchId, {
      afterLineNo: after,
      limit: PAGE,
      statuses: null,
    })
    for (const line of lines) {
      const named = modelOf(line.input)
      if (model === undefined || model === named) model = named
      else if (model !== null && named !== null && modelId(model) === modelId(named))
        model = modelId(named)
      else model = null
      const answer = billedAnswer(line)
      if (answer === null) continue
      const usage = (answer.usage ?? {}) as ChatUsage
      // Chat and embeddings name them prompt/completion; a Response names them input/output; an
      // Anthropic message (a Message Batch's line) counts its cache reads and writes beside input.
      const read = count(usage.cache_read_input_tokens)
      input += count(usage.prompt_tokens ?? usage.input_tokens)
      input += read + count(usage.cache_creation_input_tokens)
      output += count(usage.completion_tokens ?? usage.output_tokens)
      cached += count(
        usage.prompt_tokens_details?.cached_tokens ??
          usage.input_tokens_details?.cached_tokens ??
          read,
      )
      reasoning += count(
        usage.completion_tokens_details?.reasoning_tokens ??
          usage.output_tokens_details?.reasoning_tokens,
      )
    }
    if (lines.length < PAGE) break
    after = lines[lines.length - 1].lineNo
  }
  return {
    usage: {
      input_tokens: input,
      input_tokens_details: { cached_tokens: cached },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: reasoning },
      total_tokens: input + output,
    },
    model: model ?? null,
  }
}

/** A summary per batch, recomputed only when the batch's version moved. */
export function createBatchSummaries(
  store: BatchStore,
  modelId: (name: string) => string = (name) => name,
) {
  const kept = new Map<string, { version: number; summary: BatchSummary }>()
  return async function summaryOf(batch: BatchRecord): Promise<BatchSummary> {
    const hit = kept.get(batch.id)
    if (hit && hit.version === batch.version) return hit.summary
    const summary = await summarize(store, batch.id, modelId)
    kept.delete(batch.id)
    kept.set(batch.id, { version: batch.version, summary })
    if (kept.size > KEPT) kept.delete(kept.keys().next().value!)
    return summary
  }
}
