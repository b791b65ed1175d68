/**
 * The providers package: `createProvider` picks the adapter for a provider's kind. The
 * dispatcher and the live endpoints use only this and the types in types.ts.
 */
import { createAnthropicAdapter } from './anthropic/anthropic-adapter.ts'
import { createOpenAIAdapter } from './openai/openai-adapter.ts'
import type { ProviderAdapter, ProviderOptions } from './types.ts'

export type * from './types.ts'
export { UpstreamStreamError } from './upstream-stream-error.ts'

/** One adapter for one configured provider (one base URL or a pool of replicas). */
export function createProvider(options: ProviderOptions): ProviderAdapter {
  if (options.baseUrls.length === 0) throw new Error(`provider ${options.name} has no base URL`)
  return options.kind === 'anthropic'
    ? createAnthropicAdapter(options)
    : createOpenAIAdapter(options)
}
