/**
 * Which offerings take a request in a provider's own API as it came (SPEC §18,
 * docs/clients/responses.md, docs/clients/anthropic-sdk.md): a Responses API request goes as it
 * came to a provider with `responses_api`, a Messages API request to an Anthropic provider. Every
 * other offering gets the chat body the request translates to. The decision is per offering, so
 * a call that falls back from one kind to the other is sent in each one's own API.
 */
import type { PassThrough } from '../../providers/types.ts'
import type { Catalog } from './catalog.ts'
import type { Offering, ProviderConfig } from './catalog-file.ts'

export function speaksApi(provider: ProviderConfig | undefined, api: PassThrough): boolean {
  if (!provider) return false
  return api === 'responses' ? provider.responses_api === true : provider.kind === 'anthropic'
}

/** Whether `offering` takes a request in `api` as it came. */
export const offeringSpeaks = (
  catalog: Pick<Catalog, 'provider'>,
  offering: Offering,
  api: PassThrough,
): boolean => speaksApi(catalog.provider(offering.provider), api)

/** The offerings that take `api` as it came. */
export const offeringsSpeaking = (
  catalog: Pick<Catalog, 'provider'>,
  offerings: readonly Offering[],
  api: PassThrough,
): Offering[] => offerings.filter((offering) => offeringSpeaks(catalog, offering, api))

/**
 * The offerings a request in `api` may go to: all of them, unless its chat body left fields out
 * (`untranslated`), when only those that take it as it came; null when that leaves none.
 */
export function offeringsTaking(
  catalog: Pick<Catalog, 'provider'>,
  offerings: Offering[],
  request: { api: PassThrough; untranslated?: unknown } | undefined,
): Offering[] | null {
  if (!request?.untranslated) return offerings
  const speaking = offeringsSpeaking(catalog, offerings, request.api)
  return speaking.length > 0 ? speaking : null
}

/**
 * A request in a provider's own API as the chat body it is validated, priced and held by: its
 * translation for the common subset; else, when a field lies outside it and some usable offering
 * of its model takes the request as it came, the lenient translation that only prices and routes
 * it, with the strict one's problem as `untranslated` (what keeps it to those offerings). The
 * same rule for live calls and batch lines; `P` is each one's problem.
 */
export function chatBodyFor<T, P extends T>(
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  request: { model: unknown; api: PassThrough },
  translate: (lenient: boolean) => T,
  isProblem: (translated: T) => translated is P,
): { chat: Exclude<T, P>; untranslated?: P } | P {
  const strict = translate(false)
  if (!isProblem(strict)) return { chat: strict as Exclude<T, P> }
  // A model not in the catalog: the lenient body goes on to validation, which says so, rather
  // than a field the caller would remove only to learn next that the model does not exist. The
  // strict problem stays with it: an account's adapter, unknown to the catalog, still gets it.
  const known = inCatalog(catalog, request.model)
  if (known && !spokenBySome(catalog, request.model, request.api)) return strict
  const lenient = translate(true)
  if (!known)
    return isProblem(lenient) ? strict : { chat: lenient as Exclude<T, P>, untranslated: strict }
  if (isProblem(lenient)) return lenient
  return { chat: lenient as Exclude<T, P>, untranslated: strict }
}

/** Whether `model` names a model of the catalog (an account's adapter does not). */
export const inCatalog = (catalog: Pick<Catalog, 'find'>, model: unknown): boolean =>
  typeof model === 'string' && catalog.find(model) !== undefined

/** Whether any usable offering of `model` takes `api` as it came. An unknown model: none. */
export function spokenBySome(
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  model: unknown,
  api: PassThrough,
): boolean {
  const entry = typeof model === 'string' ? catalog.find(model) : undefined
  return (entry ? catalog.usable(entry) : []).some((o) => offeringSpeaks(catalog, o, api))
}
