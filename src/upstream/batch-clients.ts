/**
 * The batch clients of the providers the catalog gives a batch lane (docs/batch-lanes.md): one a
 * provider, at its first base URL, with its key and timeout, as for its live adapter.
 */
import {
  createAnthropicBatchClient,
  createOpenAIBatchClient,
  type AnthropicBatchClient,
  type OpenAIBatchClient,
} from '../../providers/batch-api/index.ts'
import { laneOf } from '../catalog/catalog-file.ts'
import type { Config } from '../config.ts'

export type BatchClient = OpenAIBatchClient | AnthropicBatchClient

export function createBatchClients(
  config: Pick<Config, 'catalog' | 'providerKeys'>,
): Map<string, BatchClient> {
  const clients = new Map<string, BatchClient>()
  const { providers, models } = config.catalog
  for (const model of models)
    for (const offering of model.offerings) {
      const name = offering.provider
      const provider = providers[name]
      if (laneOf(offering) !== 'batch' || !provider || clients.has(name)) continue
      if (provider.api_key_env && !config.providerKeys[name]) continue // not usable; never called
      const options = {
        name,
        baseUrl: Array.isArray(provider.base_url) ? provider.base_url[0]! : provider.base_url,
        apiKey: config.providerKeys[name] ?? null,
        timeoutMs: provider.timeout_s * 1000,
      }
      clients.set(
        name,
        provider.kind === 'anthropic'
          ? createAnthropicBatchClient(options)
          : createOpenAIBatchClient(options),
      )
    }
  return clients
}
