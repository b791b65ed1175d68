/**
 * A catalog with batch lanes (docs/batch-lanes.md) for the end-to-end tests: `lane/chat` (OpenAI
 * Files + Batches, on a provider that speaks the Responses API), `lane/claude` (Anthropic Message Batches), each beside its live offering at
 * twice the price, `lane/twin` (lane/chat's upstream model, its lane at half lane/chat's price),
 * `lane/none` (live only), `lane/dear` (its lane dearer than its live offering) and `lane/soon`, whose lane falls back FALLBACK_AFTER_S after the batch starts.
 */
import { catalogSchema } from '../../src/catalog/catalog-file.ts'

export const CHUNK_LINES = 4
/** A fallback this long after the batch's creation: deadline (24 h) − fallback_hours. */
export const FALLBACK_AFTER_S = 4

const live = (provider: string, upstream: string, input: string, output: string) => ({
  provider,
  upstream_model: upstream,
  input_usd_per_mtok: input,
  output_usd_per_mtok: output,
})

const model = (id: string, offerings: unknown[]) => ({
  id,
  endpoints: ['chat'],
  context_tokens: 32_000,
  max_output_tokens: 1024,
  offerings,
})

export function laneCatalog(openaiUrl: string, anthropicUrl: string) {
  const lane = { lane: 'batch', chunk_lines: CHUNK_LINES, poll_s: 0.05, min_hours_left: 1 }
  return {
    providers: {
      sim: {
        kind: 'openai',
        base_url: `${openaiUrl}/v1`,
        max_concurrency: 16,
        timeout_s: 10,
        // As OpenAI's own: its batch lane takes Responses lines as they came.
        responses_api: true,
      },
      claude: {
        kind: 'anthropic',
        base_url: anthropicUrl,
        api_key_env: 'MG_TEST_ANTHROPIC_KEY',
        max_concurrency: 16,
        timeout_s: 10,
      },
    },
    models: [
      {
        ...model('lane/chat', [
          live('sim', 'sim-chat', '1', '2'),
          { ...live('sim', 'sim-chat', '0.5', '1'), ...lane, fallback_hours: 0.5 },
        ]),
        aliases: ['chat-lane'],
      },
      // The same provider's upstream model as lane/chat, its batch lane at its own price.
      model('lane/twin', [
        live('sim', 'sim-chat', '1', '2'),
        { ...live('sim', 'sim-chat', '0.25', '0.5'), ...lane, fallback_hours: 0.5 },
      ]),
      // No batch lane: a mixed batch's lines of it run live.
      model('lane/none', [live('sim', 'sim-none', '1', '2')]),
      // Its batch lane dearer than its live offering: only a line whose own routing puts the
      // lane first goes there.
      model('lane/dear', [
        live('sim', 'sim-dear', '0.5', '1'),
        { ...live('sim', 'sim-dear', '1', '2'), ...lane, fallback_hours: 0.5 },
      ]),
      model('lane/claude', [
        live('claude', 'claude-sim', '3', '15'),
        { ...live('claude', 'claude-sim', '1.5', '7.5'), ...lane, fallback_hours: 0.5 },
      ]),
      model('lane/soon', [
        live('sim', 'sim-soon', '1', '2'),
        {
          ...live('sim', 'sim-soon', '0.5', '1'),
          ...lane,
          min_hours_left: 0,
          fallback_hours: 24 - FALLBACK_AFTER_S / 3600,
        },
      ]),
    ],
  }
}

/**
 * A catalog file of one provider `up` (of `kind`) and one chat model `m`: its live offering at 1 /
 * 2 USD per million tokens (unless `withLive` is false), and a second offering of the same
 * upstream model at 0.5 with `fields` (its lane and the lane's settings).
 */
export function oneLaneCatalog(fields: Record<string, unknown>, kind = 'openai', withLive = true) {
  const lane = { provider: 'up', upstream_model: 'u', input_usd_per_mtok: '0.5', ...fields }
  return catalogSchema.parse({
    providers: { up: { kind, base_url: 'http://127.0.0.1:1/v1' } },
    models: [
      {
        id: 'm',
        endpoints: ['chat'],
        context_tokens: 8192,
        max_output_tokens: 1024,
        offerings: withLive ? [live('up', 'u', '1', '2'), lane] : [lane],
      },
    ],
  })
}
