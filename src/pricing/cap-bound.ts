/**
 * A line's prompt bound as its price cap needs it (catalog.ts PromptBound, docs/money-and-limits.md):
 * the ceiling's own measure (ceiling.ts) over the offerings the cap is decided among, so that
 * admission, the live call and the dispatcher decide the same line the same way. Measured only
 * when a route asks (a cap below a long-context tier), and once per offerings list.
 */
import type { Endpoint } from '../../providers/types.ts'
import type { ModelEntry, Offering } from '../catalog/catalog-file.ts'
import { upstreamTargets, type Catalog, type PromptBound } from '../catalog/catalog.ts'
import type { ChatBody, EmbeddingsBody } from '../schemas/requests.ts'
import { chatInputBound, embeddingsInputBound } from './ceiling.ts'

export function capPromptBound(
  catalog: Pick<Catalog, 'provider'>,
  endpoint: Endpoint,
  body: Record<string, unknown>,
  model: ModelEntry,
): PromptBound {
  let measuredOver: readonly Offering[] | null = null
  let tokens = 0
  return (offerings) => {
    if (offerings !== measuredOver) {
      tokens =
        endpoint === 'embeddings'
          ? embeddingsInputBound(body as EmbeddingsBody)
          : chatInputBound(body as ChatBody, model, upstreamTargets(catalog, offerings))
      measuredOver = offerings
    }
    return tokens
  }
}
