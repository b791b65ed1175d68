/**
 * Whether a Responses API request for a model is passed through as it came (docs/clients/responses.md):
 * when every offering it may be routed to serves the Responses API (`responses_api`). A model
 * with any chat-only offering is translated for all of them, so that a fallback never meets a
 * body it cannot take. The same rule for live calls and batch lines.
 */
import type { Catalog } from './catalog.ts'

export function servesResponses(
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  model: unknown,
): boolean {
  const entry = typeof model === 'string' ? catalog.find(model) : undefined
  const offerings = entry ? catalog.usable(entry) : []
  return (
    offerings.length > 0 &&
    offerings.every((offering) => catalog.provider(offering.provider)?.responses_api === true)
  )
}
