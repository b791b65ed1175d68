/**
 * A caller's `service_tier` (OpenAI's chat completions and Responses API): only the provider's
 * default tier, which is what an offering's live prices are. Another tier is billed at other
 * rates than the offering's (priority dearer, flex cheaper), so the tier is the offering's lane's
 * to set (docs/pricing.md): the flex lane sends `service_tier: "flex"` itself.
 */
import { excerpt } from '../excerpt.ts'

/** What `service_tier` may be when a caller sends it: the provider's default either way. */
const DEFAULT_TIERS: readonly unknown[] = ['auto', 'default']
const SHOWN_CHARS = 40

export const TIER_FIX =
  'remove service_tier; for a cheaper, slower tier name the model\'s flex offering in provider.only (e.g. "openai:flex"; GET /v1/models lists each offering\'s lane and prices)'

/** Why this `service_tier` is refused (a message that reads after the field's name; TIER_FIX says what to send), or null. */
export function tierRefusal(tier: unknown): string | null {
  if (tier === undefined || tier === null || DEFAULT_TIERS.includes(tier)) return null
  // The caller's value, at most a few dozen characters of it: it is echoed in every issue.
  const shown = excerpt(JSON.stringify(tier) ?? String(tier), SHOWN_CHARS)
  return `${shown} is a tier billed at other rates than the model's offerings: each offering's lane sets the tier, at its own list prices`
}
