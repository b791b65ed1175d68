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

/**
 * The offerings that take `api` as it came: where a request with fields its chat translation
 * leaves out may go. Returns `offerings` itself when all of them do.
 */
export function offeringsSpeaking(
  catalog: Pick<Catalog, 'provider'>,
  offerings: readonly Offering[],
  api: PassThrough,
): readonly Offering[] {
  if (offerings.every((offering) => offeringSpeaks(catalog, offering, api))) return offerings
  return offerings.filter((offering) => offeringSpeaks(catalog, offering, api))
}

/** Whether any usable offering of `model` takes `api` as it came. An unknown model: none. */
export function spokenBySome(
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  model: unknown,
  api: PassThrough,
): boolean {
  const entry = typeof model === 'string' ? catalog.find(model) : undefined
  return (entry ? catalog.usable(entry) : []).some((o) => offeringSpeaks(catalog, o, api))
}
