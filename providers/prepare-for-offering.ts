/**
 * A request body as it leaves for one offering, before the adapter's own translation: the
 * gateway's routing object removed, the upstream's model id set, and the output limit under
 * exactly one name (the offering's preference, if it has one). The one place a body is made the
 * upstream's: every adapter starts from it, and the cost ceiling measures what it produces.
 */
import { withOneOutputLimit } from './output-limit.ts'
import type { UpstreamRequest } from './types.ts'

/** What of a request decides its upstream body besides the adapter's kind. */
export type UpstreamTarget = Pick<UpstreamRequest, 'model' | 'maxTokensParam'>

export function prepareForOffering(body: Record<string, unknown>, target: UpstreamTarget): Record<string, unknown> {
  const { provider: _routing, ...rest } = body
  return withOneOutputLimit({ ...rest, model: target.model }, target.maxTokensParam)
}
