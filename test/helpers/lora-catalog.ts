/**
 * A providers file with a LoRA pool: the test catalog plus provider `pool` (`"lora": true`) and
 * model `sim/lora-base`, whose entry declares the fine-tune limits of docs/open-models.md's example.
 */
import { testCatalog, type TestUpstreams } from './catalog.ts'

export const LORA_BASE = 'sim/lora-base'
/** What the pool's replicas call the base model (their `models`). */
export const LORA_UPSTREAM_MODEL = 'sim-base'

export function loraCatalog(
  pool: string | string[],
  options: { maxLoras?: number; maxConcurrency?: number; upstreams?: TestUpstreams } = {},
) {
  const catalog = testCatalog(options.upstreams ?? { openai: 'http://127.0.0.1:9/v1' })
  return {
    ...catalog,
    providers: {
      ...catalog.providers,
      pool: {
        kind: 'openai',
        base_url: pool,
        max_concurrency: options.maxConcurrency ?? 16,
        timeout_s: 10,
        lora: true,
        max_loras: options.maxLoras ?? 2,
      },
    },
    models: [
      ...catalog.models,
      {
        id: LORA_BASE,
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        adapters: { max_per_batch: 8, limits_by_rank: { '64': 4, '32': 8 }, max_total_mib: 1008 },
        offerings: [
          {
            provider: 'pool',
            upstream_model: LORA_UPSTREAM_MODEL,
            input_usd_per_mtok: '0.20',
            output_usd_per_mtok: '0.60',
          },
        ],
      },
    ],
  }
}
