/** A providers file for tests: every model served by simulators on 127.0.0.1. */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface TestUpstreams {
  /** OpenAI-compatible base URL(s), e.g. `${sim.url}/v1`. */
  openai: string | string[]
  /** Anthropic-compatible base URL (no /v1). */
  anthropic?: string
}

export function testCatalog(
  upstreams: TestUpstreams,
  extra: { maxConcurrency?: number; timeoutS?: number } = {},
) {
  const concurrency = extra.maxConcurrency ?? 64
  return {
    prices_read_on: 'test',
    providers: {
      sim: {
        kind: 'openai',
        base_url: upstreams.openai,
        max_concurrency: concurrency,
        timeout_s: extra.timeoutS ?? 10,
      },
      'sim-anthropic': {
        kind: 'anthropic',
        base_url: upstreams.anthropic ?? 'http://127.0.0.1:9/',
        api_key_env: 'MG_TEST_ANTHROPIC_KEY',
        max_concurrency: concurrency,
        timeout_s: extra.timeoutS ?? 10,
      },
      paid: {
        kind: 'openai',
        base_url: 'http://127.0.0.1:9/v1',
        api_key_env: 'MG_TEST_PAID_KEY',
        max_concurrency: 4,
      },
    },
    models: [
      {
        id: 'sim/chat',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 4096,
        aliases: ['chat-small'],
        offerings: [
          {
            provider: 'sim',
            upstream_model: 'sim-chat',
            input_usd_per_mtok: '0.50',
            output_usd_per_mtok: '1.50',
          },
        ],
      },
      {
        id: 'sim/strict',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        unsupported_params: ['temperature', 'logprobs'],
        offerings: [
          {
            provider: 'sim',
            upstream_model: 'sim-strict',
            input_usd_per_mtok: '1',
            output_usd_per_mtok: '2',
          },
        ],
      },
      {
        id: 'sim/claude',
        endpoints: ['chat'],
        context_tokens: 200000,
        max_output_tokens: 8192,
        offerings: [
          {
            provider: 'sim-anthropic',
            upstream_model: 'claude-sim',
            input_usd_per_mtok: '3',
            output_usd_per_mtok: '15',
          },
        ],
      },
      {
        id: 'sim/multi',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 2048,
        offerings: [
          {
            provider: 'sim',
            upstream_model: 'sim-multi',
            input_usd_per_mtok: '0.50',
            output_usd_per_mtok: '1.50',
          },
          {
            provider: 'sim-anthropic',
            upstream_model: 'claude-multi',
            input_usd_per_mtok: '3',
            output_usd_per_mtok: '15',
          },
        ],
      },
      {
        id: 'sim/embed',
        endpoints: ['embeddings'],
        context_tokens: 8191,
        max_output_tokens: 0,
        offerings: [{ provider: 'sim', upstream_model: 'sim-embed', input_usd_per_mtok: '0.02' }],
      },
      {
        // The simulator refuses every request to this upstream model with a 400.
        id: 'sim/refused',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        offerings: [
          {
            provider: 'sim',
            upstream_model: 'fail-400',
            input_usd_per_mtok: '0.50',
            output_usd_per_mtok: '1.50',
          },
        ],
      },
      {
        id: 'paid/chat',
        endpoints: ['chat'],
        context_tokens: 8000,
        max_output_tokens: 1000,
        offerings: [
          {
            provider: 'paid',
            upstream_model: 'paid-chat',
            input_usd_per_mtok: '1',
            output_usd_per_mtok: '1',
          },
        ],
      },
    ],
  }
}

/** Writes a catalog to a fresh temp file and returns its path. */
export function writeCatalog(catalog: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'mg-catalog-'))
  const path = join(dir, 'catalog.json')
  writeFileSync(path, JSON.stringify(catalog))
  return path
}

/**
 * testCatalog with `sim-responses` beside, a provider that serves the Responses API itself (its
 * calls pass through: docs/clients/responses.md); the models that use it are the caller's to add.
 */
export function responsesCatalog(simUrl: string) {
  const catalog = testCatalog({ openai: `${simUrl}/v1`, anthropic: simUrl }) as {
    providers: Record<string, unknown>
    models: unknown[]
  }
  catalog.providers['sim-responses'] = {
    kind: 'openai',
    base_url: `${simUrl}/v1`,
    max_concurrency: 8,
    responses_api: true,
  }
  return catalog
}

/**
 * A model served only by responsesCatalog's provider that takes the Responses API: its calls
 * pass through (docs/clients/responses.md). 32,000 tokens of context, $1 / $2 per million.
 */
export const responsesModel = () => ({
  id: 'sim/responses',
  endpoints: ['chat'],
  context_tokens: 32000,
  max_output_tokens: 4096,
  offerings: [
    {
      provider: 'sim-responses',
      upstream_model: 'sim-responses-model',
      input_usd_per_mtok: '1',
      cached_input_usd_per_mtok: '0.1',
      output_usd_per_mtok: '2',
    },
  ],
})
