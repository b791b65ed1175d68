/**
 * A request body as it leaves for one offering, before the adapter's own translation: the
 * gateway's routing object removed, the upstream's model id set, and the output limit under
 * exactly one name (the offering's preference, if it has one). The one place a body is made the
 * upstream's: every adapter starts from it, and the cost ceiling measures what it produces.
 */
import { withOneOutputLimit } from './output-limit.ts'
import type { UpstreamRequest } from './types.ts'

/** What of a request decides its upstream body besides the adapter's kind. */
export type UpstreamTarget = Pick<UpstreamRequest, 'model' | 'maxTokensParam' | 'modelLimits'>

/**
 * `without`: fields the adapter drops too (OpenAI's non-streaming call drops `stream`), so that
 * the body is copied once on the live path rather than once per step.
 */
export function prepareForOffering(
  body: Record<string, unknown>,
  target: UpstreamTarget,
  without: readonly string[] = [],
): Record<string, unknown> {
  const prepared: Record<string, unknown> = {}
  for (const key of Object.keys(body)) {
    if (key !== 'provider' && !without.includes(key)) prepared[key] = body[key]
  }
  // In the place the gateway's id had, so the body reads as the user wrote it.
  prepared.model = target.model
  return withOneOutputLimit(prepared, target.maxTokensParam)
}
