/**
 * Lanes (docs/pricing.md) as the rest of the gateway sees them: each flex offering goes to a provider
 * of its own, `<provider>:flex`, derived from its provider with `service_tier: "flex"` and the
 * offering's timeout (900 s unless it sets one). So the gates, the planner's throughput and
 * shares, `routing.providers` and each result line's `provider` count the lane apart from the
 * live one, and it is one more offering to plan with, cheapest first. The live lane keeps the
 * provider's plain name.
 */
import { FLEX_TIMEOUT_S, type CatalogFile, type Lane } from './catalog-file.ts'

export const flexName = (provider: string) => `${provider}:flex`

/**
 * The name an offering is shown and counted under: its provider's, with the lane after a colon
 * unless it is the live lane ("openai:batch"). A flex offering's provider already carries it.
 */
export function offeringName(offering: { provider: string; lane?: Lane }): string {
  const lane = offering.lane ?? 'live'
  if (lane === 'live' || offering.provider.endsWith(`:${lane}`)) return offering.provider
  return `${offering.provider}:${lane}`
}

/** The catalog with each flex offering on its derived provider; a catalog without any as it is. */
export function withLanes(file: CatalogFile): CatalogFile {
  if (!file.models.some((model) => model.offerings.some((o) => o.lane === 'flex'))) return file
  const providers = { ...file.providers }
  const models = file.models.map((model) => ({
    ...model,
    offerings: model.offerings.map((offering) => {
      if (offering.lane !== 'flex') return offering
      const name = flexName(offering.provider)
      const timeout = offering.timeout_s ?? FLEX_TIMEOUT_S
      const existing = providers[name]
      // Offerings of several models share the lane's provider; its timeout is the longest asked.
      providers[name] = {
        ...file.providers[offering.provider],
        service_tier: 'flex',
        timeout_s: Math.max(timeout, existing?.timeout_s ?? 0),
      }
      // Each call takes its own offering's timeout (upstreams.ts), not the longest of the lane's.
      return { ...offering, provider: name, timeout_s: timeout }
    }),
  }))
  return { ...file, providers, models }
}
