/** Waiting on a Message Batch through the Anthropic SDK, as a client polls it. */
import type Anthropic from '@anthropic-ai/sdk'
import { waitFor } from './wait.ts'

/** The batch once its processing_status is `ended` (within `timeoutMs`). */
export const messageBatchEnded = (client: Anthropic, id: string, timeoutMs = 20_000) =>
  waitFor(
    `message batch ${id} to end`,
    async () => {
      const batch = await client.messages.batches.retrieve(id)
      return batch.processing_status === 'ended' ? batch : null
    },
    timeoutMs,
  )
