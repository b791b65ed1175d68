/**
 * The model catalog as the gateway uses it: lookup by id or alias, which offerings are usable
 * (their provider is configured), and routing of one request among them (docs/configuration.md).
 */
import type { CatalogFile, ModelEntry, Offering, ProviderConfig } from './catalog-file.ts'
import type { Endpoint } from '../../providers/types.ts'
import { ENDPOINT_URLS } from '../domain.ts'
import type { Routing } from '../schemas/requests.ts'
import { Money } from '../money/decimal.ts'
import { offeringName } from './lanes.ts'

export interface Catalog {
  readonly models: readonly ModelEntry[]
  /** By id or alias. */
  find(name: string): ModelEntry | undefined
  provider(name: string): ProviderConfig | undefined
  /** Offerings whose provider has what it needs to be called (its API key, when it needs one). */
  usable(model: ModelEntry): Offering[]
  /**
   * Offerings a request may go to, in the order to try them, the batch lanes left out (they take
   * batch lines only, through the batch-lane engine). Empty: nothing can serve it.
   */
  route(model: ModelEntry, routing: Routing | undefined): Offering[]
  /**
   * The same offerings for a batch line, in the planner's order (docs/routing.md): `provider.order`
   * when given, else cheapest first (input + output price per million tokens; ties keep the
   * catalog's order). `allow_fallbacks: false` keeps the first of that order alone. The batch
   * lanes are left out: these are the offerings the live dispatcher sends to.
   */
  routeBatch(model: ModelEntry, routing: Routing | undefined): Offering[]
  /**
   * routeBatch with the batch lanes in (docs/batch-lanes.md): what the batch-lane engine chooses
   * from, and what a batch line's ceiling prices. With `allow_fallbacks: false` and a batch lane
   * first, the first live offering stays beside it: it serves a batch the lane was never open for.
   */
  routeWithLanes(model: ModelEntry, routing: Routing | undefined): Offering[]
  /** The environment variable a provider is missing, if any. */
  missingKey(providerName: string): string | null
}

/** Which adapter kind builds each offering's body: what the cost ceiling measures (src/pricing/ceiling.ts). */
export function upstreamTargets(
  catalog: Pick<Catalog, 'provider'>,
  offerings: readonly Offering[],
) {
  return offerings.map((offering) => ({
    kind: catalog.provider(offering.provider)?.kind ?? 'openai',
    offering,
  }))
}

/**
 * The offerings a per-line price cap leaves (docs/money-and-limits.md): neither side dearer than its cap. Exact
 * decimal comparison; a cap arrives as a decimal string or a JSON number (the stored line is
 * re-read by the dispatcher as sent).
 */
export function withinMaxPrice(cap: NonNullable<Routing['max_price']>) {
  const prompt = cap.prompt === undefined ? null : new Money(String(cap.prompt))
  const completion = cap.completion === undefined ? null : new Money(String(cap.completion))
  return (o: Offering) =>
    (prompt === null || prompt.gte(o.input_usd_per_mtok)) &&
    (completion === null || completion.gte(o.output_usd_per_mtok))
}

export const endpointOf = (url: string): Endpoint =>
  url === ENDPOINT_URLS.embeddings ? 'embeddings' : 'chat'

const notBatchLane = (offering: Offering) => offering.lane !== 'batch'

/** How one route is made: cheapest first or in the catalog's order, with the batch lanes or not. */
interface RouteHow {
  byPrice: boolean
  lanes: boolean
}

/** Distinct routing objects remembered per model; past it the memory starts over (bounded). */
const ROUTE_CACHE_SIZE = 256

export function createCatalog(
  file: CatalogFile,
  providerKeys: Record<string, string | null>,
): Catalog {
  const byName = new Map<string, ModelEntry>()
  for (const model of file.models) {
    byName.set(model.id, model)
    for (const alias of model.aliases) byName.set(alias, model)
  }
  const missingKey = (name: string) => {
    const provider = file.providers[name]
    if (!provider?.api_key_env) return null
    return providerKeys[name] ? null : provider.api_key_env
  }
  const usableCache = new Map<ModelEntry, Offering[]>()
  const liveCache = new Map<ModelEntry, Offering[]>()
  const routeCache = new Map<ModelEntry, Map<string, Offering[]>>()
  const batchRouteCache = new Map<ModelEntry, Map<string, Offering[]>>()
  const laneRouteCache = new Map<ModelEntry, Map<string, Offering[]>>()
  const usable = (model: ModelEntry) => {
    let offerings = usableCache.get(model)
    if (!offerings) {
      offerings = model.offerings.filter((o) => missingKey(o.provider) === null)
      usableCache.set(model, offerings)
    }
    return offerings
  }
  /** The usable offerings a request can be sent to one by one: all but the batch lanes. */
  const sendable = (model: ModelEntry) => {
    let offerings = liveCache.get(model)
    if (!offerings) liveCache.set(model, (offerings = usable(model).filter(notBatchLane)))
    return offerings
  }
  return {
    models: file.models,
    find: (name) => byName.get(name),
    provider: (name) => file.providers[name],
    usable,
    missingKey,
    route(model, routing) {
      if (!routing) return sendable(model)
      return cached(routeCache, model, routing, { byPrice: false, lanes: false })
    },
    routeBatch(model, routing) {
      const offerings = sendable(model)
      if (!routing && offerings.length < 2) return offerings
      return cached(batchRouteCache, model, routing ?? {}, { byPrice: true, lanes: false })
    },
    routeWithLanes(model, routing) {
      return cached(laneRouteCache, model, routing ?? {}, { byPrice: true, lanes: true })
    },
  }
  // Lines of a file mostly share one routing object: the same answer (the same array) for each
  // keeps the ceiling tally at one group, and the prices are compared once, not per line.
  function cached(
    cache: Map<ModelEntry, Map<string, Offering[]>>,
    model: ModelEntry,
    routing: Routing,
    how: RouteHow,
  ): Offering[] {
    const key = JSON.stringify(routing)
    let routes = cache.get(model)
    if (!routes) cache.set(model, (routes = new Map()))
    let offerings = routes.get(key)
    if (!offerings) {
      if (routes.size >= ROUTE_CACHE_SIZE) routes.clear()
      offerings = routeUncached(model, routing, how)
      routes.set(key, offerings)
    }
    return offerings
  }
  function routeUncached(model: ModelEntry, routing: Routing, how: RouteHow): Offering[] {
    let offerings = how.lanes ? usable(model) : sendable(model)
    // By the names lines are shown under: "openai" is the live lane alone, "openai:batch" its batch lane.
    if (routing.only) offerings = offerings.filter((o) => routing.only!.includes(offeringName(o)))
    if (routing.ignore)
      offerings = offerings.filter((o) => !routing.ignore!.includes(offeringName(o)))
    if (routing.max_price) offerings = offerings.filter(withinMaxPrice(routing.max_price))
    if (routing.order) {
      const rank = (o: Offering) => {
        const index = routing.order!.indexOf(offeringName(o))
        return index === -1 ? routing.order!.length : index
      }
      offerings = [...offerings].sort((a, b) => rank(a) - rank(b))
    } else if (how.byPrice) {
      const price = (o: Offering) => new Money(o.input_usd_per_mtok).plus(o.output_usd_per_mtok)
      offerings = [...offerings].sort((a, b) => price(a).comparedTo(price(b)))
    }
    if (routing.allow_fallbacks !== false) return offerings
    // The first alone. A batch lane first keeps the first live offering beside it: a batch whose
    // window never opens the lane runs there instead (docs/batch-lanes.md).
    const [first] = offerings
    const live = first && !notBatchLane(first) ? offerings.find(notBatchLane) : undefined
    return live ? [first, live] : offerings.slice(0, 1)
  }
}
