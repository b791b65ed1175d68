import type { StreamOutcome, Usage } from './types.ts'

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
  let ended = false
  const end = (failed: boolean) => {
    if (ended) return
    ended = true
    cancel()
    settle(failed ? null : reportedUsage())
  }
  const chunks: AsyncIterableIterator<Record<string, unknown>> = {
    async next() {
      if (ended) return { done: true, value: undefined }
      try {
        const result = await source.next()
        if (result.done) end(false)
        return result
      } catch (error) {
        end(true)
        throw error
      }
    },
    async return() {
      end(false)
      await source.return(undefined)
      return { done: true, value: undefined }
    },
    [Symbol.asyncIterator]() {
      return this
    },
  }
  return { ok: true, chunks, usage }
}
