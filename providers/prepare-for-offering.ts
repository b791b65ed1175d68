/**
 * A request body as it leaves for one offering, before the adapter's own translation: the
 * gateway's routing object removed, the upstream's model id set, and the output limit under
 * exactly one name (the offering's preference, if it has one). Used by every call
 * (src/upstream/upstreams.ts) and by the cost ceiling, which measures what this produces.
 */
import { withOneOutputLimit, type MaxTokensParam } from './output-limit.ts'

export function prepareForOffering(
  body: Record<string, unknown>,
  /** The fields of a catalog offering this needs (src/catalog/catalog-file.ts). */
  offering: { upstream_model: string; max_tokens_param?: MaxTokensParam },
): Record<string, unknown> {
  const { provider: _routing, ...rest } = body
  return withOneOutputLimit({ ...rest, model: offering.upstream_model }, offering.max_tokens_param)
}
