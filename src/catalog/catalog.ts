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
   * batch lines only, through the batch-lane engine). Empty: nothing can serve it. `bound`: the
   * line's prompt bound (PromptBound), which a `max_price` below a long-context tier needs (an
   * offering whose tier the line can reach is priced at it); without it, the base prices. The
   * same for the two routes below.
   */
  route(model: ModelEntry, routing: Routing | undefined, bound?: PromptBound): Offering[]
  /**
   * The same offerings for a batch line, in the planner's order (docs/routing.md): `provider.order`
   * when given, else cheapest first (input + output price per million tokens; ties keep the
   * catalog's order). `allow_fallbacks: false` keeps the first of that order alone. The batch
   * lanes are left out: these are the offerings the live dispatcher sends to.
   */
  routeBatch(model: ModelEntry, routing: Routing | undefined, bound?: PromptBound): Offering[]
  /**
   * routeBatch with the batch lanes in (docs/batch-lanes.md): what the batch-lane engine chooses
   * from, and what a batch line's ceiling prices. With `allow_fallbacks: false` and a batch lane
   * first, the first live offering stays beside it: it serves a batch the lane was never open for.
   */
  routeWithLanes(model: ModelEntry, routing: Routing | undefined, bound?: PromptBound): Offering[]
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
 * A line's prompt bound in tokens (src/pricing/ceiling.ts), measured over `offerings`: those its
 * routing and the base prices' cap leave, with the batch lanes. A route asks for it only when the
 * line's price cap is below the long-context tier of one of them, whose threshold it decides.
 */
export type PromptBound = (offerings: readonly Offering[]) => number

/**
 * The prices a line whose prompt bound is `promptBound` may be billed at on an offering, as the
 * catalog writes them: the long-context tier's where the bound passes its threshold and the tier
 * is dearer (the ceiling's rule, src/pricing/ceiling-rates.ts), else the base prices.
 */
export function linePrices(o: Offering, promptBound: number) {
  const long = o.long_context
  const tier = long !== undefined && promptBound > long.above_input_tokens ? long : null
  const dearer = (base: string, tiered: string | undefined) =>
    tiered !== undefined && new Money(tiered).gt(base) ? tiered : base
  return {
    prompt: dearer(o.input_usd_per_mtok, tier?.input_usd_per_mtok),
    completion: dearer(o.output_usd_per_mtok, tier?.output_usd_per_mtok),
  }
}

/**
 * The offerings a per-line price cap leaves (docs/money-and-limits.md): neither side dearer than
 * its cap, at the prices a line with this prompt bound may be billed (linePrices; 0: the base
 * prices). Exact decimal comparison; a cap arrives as a decimal string or a JSON number (the
 * stored line is re-read by the dispatcher as sent).
 */
export function withinMaxPrice(cap: NonNullable<Routing['max_price']>, promptBound = 0) {
  const prompt = cap.prompt === undefined ? null : new Money(String(cap.prompt))
  const completion = cap.completion === undefined ? null : new Money(String(cap.completion))
  return (o: Offering) => {
    const prices = linePrices(o, promptBound)
    return (
      (prompt === null || prompt.gte(prices.prompt)) &&
      (completion === null || completion.gte(prices.completion))
    )
  }
}

export const endpointOf = (url: string): Endpoint =>
  url === ENDPOINT_URLS.embeddings ? 'embeddings' : 'chat'

const notBatchLane = (offering: Offering) => offering.lane !== 'batch'

/** How one route is made: cheapest first or in the catalog's order, with the batch lanes or not. */
interface RouteHow {
  byPrice: boolean
  lanes: boolean
}

/** One routing object's route, and what a line's prompt bound can change of it. */
interface RouteEntry {
  /** The route at the base prices. */
  offerings: Offering[]
  /**
   * The offerings routing and the base prices' cap leave, with the batch lanes: what a line's
   * prompt bound is measured over (PromptBound).
   */
  measured: Offering[]
  /** Those of `measured` whose long-context tier is dearer than the cap: empty, no bound needed. */
  tiered: Offering[]
  /** The route with some of `tiered` past their threshold, by which ones ('1' each). */
  byTier: Map<string, Offering[]>
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
  const routeCache = new Map<ModelEntry, Map<string, RouteEntry>>()
  const batchRouteCache = new Map<ModelEntry, Map<string, RouteEntry>>()
  const laneRouteCache = new Map<ModelEntry, Map<string, RouteEntry>>()
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
    route(model, routing, bound) {
      if (!routing) return sendable(model)
      return cached(routeCache, { model, routing, bound }, { byPrice: false, lanes: false })
    },
    routeBatch(model, routing, bound) {
      const offerings = sendable(model)
      if (!routing && offerings.length < 2) return offerings
      const line = { model, routing: routing ?? {}, bound }
      return cached(batchRouteCache, line, { byPrice: true, lanes: false })
    },
    routeWithLanes(model, routing, bound) {
      const line = { model, routing: routing ?? {}, bound }
      return cached(laneRouteCache, line, { byPrice: true, lanes: true })
    },
  }
  // Lines of a file mostly share one routing object: the same answer (the same array) for each
  // keeps the ceiling tally at one group, and the prices are compared once, not per line. A line's
  // prompt bound is measured only when its cap is below a long-context tier it may reach, and the
  // lines that pass the same thresholds share one answer too.
  function cached(
    cache: Map<ModelEntry, Map<string, RouteEntry>>,
    line: { model: ModelEntry; routing: Routing; bound: PromptBound | undefined },
    how: RouteHow,
  ): Offering[] {
    const { model, routing, bound } = line
    const key = JSON.stringify(routing)
    let routes = cache.get(model)
    if (!routes) cache.set(model, (routes = new Map()))
    let entry = routes.get(key)
    if (!entry) {
      if (routes.size >= ROUTE_CACHE_SIZE) routes.clear()
      entry = routeEntry(model, routing, how)
      routes.set(key, entry)
    }
    if (!bound || entry.tiered.length === 0) return entry.offerings
    const tokens = bound(entry.measured)
    let passed = ''
    for (const o of entry.tiered) passed += tokens > o.long_context!.above_input_tokens ? '1' : '0'
    if (!passed.includes('1')) return entry.offerings
    let offerings = entry.byTier.get(passed)
    if (!offerings)
      entry.byTier.set(passed, (offerings = routeUncached(model, routing, how, tokens)))
    return offerings
  }
  function routeEntry(model: ModelEntry, routing: Routing, how: RouteHow): RouteEntry {
    const offerings = routeUncached(model, routing, how, 0)
    const cap = routing.max_price
    if (!cap || !usable(model).some((o) => o.long_context))
      return { offerings, measured: offerings, tiered: [], byTier: new Map() }
    const measured = allowed(usable(model), routing).filter(withinMaxPrice(cap))
    // A bound past every threshold: the offerings whose tier the cap leaves out.
    const atTier = withinMaxPrice(cap, Number.MAX_SAFE_INTEGER)
    const tiered = measured.filter((o) => o.long_context && !atTier(o))
    return { offerings, measured, tiered, byTier: new Map() }
  }
  /** By the names lines are shown under: "openai" is the live lane alone, "openai:batch" its batch lane. */
  function allowed(offerings: Offering[], routing: Routing): Offering[] {
    if (routing.only) offerings = offerings.filter((o) => routing.only!.includes(offeringName(o)))
    if (routing.ignore)
      offerings = offerings.filter((o) => !routing.ignore!.includes(offeringName(o)))
    return offerings
  }
  function routeUncached(
    model: ModelEntry,
    routing: Routing,
    how: RouteHow,
    promptBound: number,
  ): Offering[] {
    let offerings = allowed(how.lanes ? usable(model) : sendable(model), routing)
    if (routing.max_price)
      offerings = offerings.filter(withinMaxPrice(routing.max_price, promptBound))
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
