import type { Payload } from './respond.ts'

/** A valid inference request, understood and ready to be answered (or faulted). */
export interface Prepared {
  /** Hash of the prompt, for SimStats.promptCounts. */
  key: string
  /** The normal answer; `noUsage` leaves usage out, as the no-usage fault wants. */
  build(noUsage: boolean): Payload
}
