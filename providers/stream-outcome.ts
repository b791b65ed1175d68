import { upstreamError } from './classify-error.ts'
import type { StreamOutcome, UpstreamError, Usage } from './types.ts'
import { UpstreamStreamError } from './upstream-stream-error.ts'

/**
 * Wraps translated chunks as a StreamOutcome whose `usage` always settles: when the chunks end
 * (the usage seen), fail or are abandoned with return() — even before the first next(), when a
 * generator's own finally would never run.
 */
export function toStreamOutcome(
  source: AsyncGenerator<Record<string, unknown>>,
  cancel: () => void,
  reportedUsage: () => Usage | null,
): StreamOutcome {
  let settle: (usage: Usage | null) => void = () => {}
  const usage = new Promise<Usage | null>((resolve) => {
    settle = resolve
  })
  let settleBroken: (error: UpstreamError | null) => void = () => {}
  const broken = new Promise<UpstreamError | null>((resolve) => {
    settleBroken = resolve
  })
  let ended = false
  const end = (failure: unknown) => {
    if (ended) return
    ended = true
    cancel()
    settleBroken(failure === undefined ? null : brokenBy(failure))
    settle(failure === undefined ? reportedUsage() : null)
  }
  const chunks: AsyncIterableIterator<Record<string, unknown>> = {
    async next() {
      if (ended) return { done: true, value: undefined }
      try {
        const result = await source.next()
        if (result.done) end(undefined)
        return result
      } catch (error) {
        end(error)
        throw error
      }
    },
    async return() {
      end(undefined)
      await source.return(undefined)
      return { done: true, value: undefined }
    },
    [Symbol.asyncIterator]() {
      return this
    },
  }
  return { ok: true, chunks, usage, broken }
}

/** What broke a stream: the adapter's classified failure, or the connection's. */
function brokenBy(error: unknown): UpstreamError {
  if (error instanceof UpstreamStreamError) return error.error
  return upstreamError('connection', (error as Error)?.message ?? String(error))
}
