/**
 * Whether every offering a model may be routed to is on a provider that meets `test`. A request
 * passes through to an upstream API as it came only then (docs/clients/responses.md,
 * docs/clients/anthropic-sdk.md): a model with any other offering is translated for all of them,
 * so that a fallback never meets a body it cannot take. An unknown model meets no test.
 */
import type { Catalog } from './catalog.ts'
import type { ProviderConfig } from './catalog-file.ts'

export function servedOnlyBy(
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
  model: unknown,
  test: (provider: ProviderConfig) => boolean,
): boolean {
  const entry = typeof model === 'string' ? catalog.find(model) : undefined
  const offerings = entry ? catalog.usable(entry) : []
  return (
    offerings.length > 0 &&
    offerings.every((offering) => {
      const provider = catalog.provider(offering.provider)
      return provider !== undefined && test(provider)
    })
  )
}
