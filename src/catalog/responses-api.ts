/**
 * Whether a Responses API request for a model is passed through as it came (docs/clients/responses.md):
 * when every offering it may be routed to serves the Responses API (`responses_api`). A model
 * with any chat-only offering is translated for all of them. The same rule for live calls and
 * batch lines.
 */
import type { Catalog } from './catalog.ts'
import { servedOnlyBy } from './served-only-by.ts'

export const servesResponses = (
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  model: unknown,
): boolean => servedOnlyBy(catalog, model, (provider) => provider.responses_api === true)
