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
import type { BatchCall } from '../../providers/batch-api/types.ts'
import { laneOf } from '../catalog/catalog-file.ts'
import type { Config } from '../config.ts'
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.ts'

export type BatchClient = OpenAIBatchClient | AnthropicBatchClient

export function createBatchClients(
  config: Pick<Config, 'catalog' | 'providerKeys'>,
  telemetry: Telemetry = noTelemetry,
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
      const client =
        provider.kind === 'anthropic'
          ? createAnthropicBatchClient(options)
          : createOpenAIBatchClient(options)
      clients.set(name, traced(client, `${name}:batch`, telemetry))
    }
  return clients
}

/**
 * The client with each of its calls (upload, create, poll, read, cancel) an upstream call of its
 * lane's (`openai:batch`) in the spans and the latency and error metrics, as a line's call is.
 */
function traced<C extends BatchClient>(client: C, provider: string, telemetry: Telemetry): C {
  const wrapped: Record<string, unknown> = { ...client }
  for (const [method, call] of Object.entries(client)) {
    if (typeof call !== 'function' || method === 'close') continue
    wrapped[method] = (...args: unknown[]) => {
      const started = performance.now()
      return telemetry.upstream(
        { provider, model: '', endpoint: `batch.${method}` },
        () => call.apply(client, args) as Promise<BatchCall<unknown>>,
        (result) => ({
          status: result.ok ? 200 : result.error.status,
          latencyMs: performance.now() - started,
          errorKind: result.ok ? null : result.error.kind,
          usage: null,
        }),
      )
    }
  }
  return wrapped as C
}
