/**
 * A request body as it leaves for one offering, before the adapter's own translation: the
 * gateway's routing object removed, the upstream's model id set, and the output limit under
 * exactly one name (the offering's preference, if it has one). Used by every call
 * (src/upstream/upstreams.ts) and by the cost ceiling, which measures what this produces.
 */
import type { Offering } from './catalog.ts'
import { withOneOutputLimit } from './output-limit.ts'

export function prepareForOffering(
  body: Record<string, unknown>,
  offering: Pick<Offering, 'upstream_model' | 'max_tokens_param'>,
): Record<string, unknown> {
  const { provider: _routing, ...rest } = body
  return withOneOutputLimit({ ...rest, model: offering.upstream_model }, offering.max_tokens_param)
}
