/**
 * The providers-and-models file (docs/configuration.md): which upstreams exist, which models they serve and at
 * what list price. The zod schema here is the single source of its shape. It is the gateway's,
 * not the adapters': they are given what they need of it (providers/types.ts ProviderOptions).
 */
import { z } from 'zod'
import { batchLaneFields, batchLaneProblems } from './batch-lane.ts'

const decimalString = z
  .string()
  .regex(/^\d+(\.\d+)?$/, 'must be a non-negative decimal string such as "0.40"')

export const providerConfigSchema = z.strictObject({
  kind: z.enum(['openai', 'anthropic']),
  base_url: z.union([z.url(), z.array(z.url()).min(1)]),
  /** Name of the environment variable holding the key; absent for self-hosted servers. */
  api_key_env: z
    .string()
    .regex(/^[A-Z_][A-Z0-9_]*$/)
    .optional(),
  max_concurrency: z.number().int().min(1).max(4096).default(32),
  timeout_s: z.number().positive().max(3600).default(120),
  /**
   * Self-hosted pools (docs/routing.md): `max_concurrency` becomes an upper bound and each replica finds
   * its own working point from latency, busy answers, timeouts and vLLM's load reports.
   */
  adaptive_concurrency: z.boolean().default(false),
  /**
   * Whether this provider's servers load fine-tunes (LoRA adapters) at runtime (vLLM with
   * --enable-lora and
   * VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): only such providers serve `ft:` models (docs/open-models.md).
   */
  lora: z.boolean().default(false),
  /** Fine-tunes one replica holds at once (vLLM's --max-loras; its default is 1). */
  max_loras: z.number().int().min(1).max(1024).default(1),
  /**
   * Kind openai: every chat call asks for this service tier. Set by the gateway on the provider
   * it derives for a flex offering (lanes.ts); an operator need not write it.
   */
  service_tier: z.enum(['flex']).optional(),
  /**
   * Whether the provider serves OpenAI's Responses API (`/v1/responses`): Responses calls are then
   * passed through to it, not translated to chat completions (docs/openai-facade.md). Kind openai only.
   */
  responses_api: z.boolean().default(false),
})

/** Cache-class rates (docs/pricing.md), each absent one billed at its tier's input rate. */
const cacheRates = {
  /** Prompt tokens read from the provider's prompt cache. */
  cached_input_usd_per_mtok: decimalString.optional(),
  /** Prompt tokens written to the cache (OpenAI writes, Anthropic 5-minute writes). */
  cache_write_usd_per_mtok: decimalString.optional(),
  /** Anthropic 1-hour cache writes. */
  cache_write_1h_usd_per_mtok: decimalString.optional(),
}

/**
 * A long-context tier (docs/pricing.md): a request whose prompt tokens, all classes together, exceed
 * `above_input_tokens` is priced wholly at these rates; its absent cache rates are its own input rate.
 */
export const longContextSchema = z.strictObject({
  above_input_tokens: z.number().int().positive(),
  input_usd_per_mtok: decimalString,
  output_usd_per_mtok: decimalString,
  ...cacheRates,
})

/**
 * The lanes an offering may be (docs/pricing.md): `live` (default), `flex` (OpenAI's flex tier,
 * sent `service_tier: "flex"`) and `batch` (the providers' batch APIs, for batch lines only:
 * docs/batch-lanes.md).
 */
export const LANES = ['live', 'flex', 'batch'] as const
export type Lane = (typeof LANES)[number]

/** A flex call may queue at the provider: its timeout unless the offering sets one (docs/pricing.md). */
export const FLEX_TIMEOUT_S = 900

export const laneOf = (offering: { lane?: Lane }): Lane => offering.lane ?? 'live'

/** Whether a model lists a batch-lane offering: its batch lines are marked for the lane engine. */
export const hasBatchLane = (model: { offerings: readonly { lane?: Lane }[] }): boolean =>
  model.offerings.some((offering) => laneOf(offering) === 'batch')

export const offeringSchema = z.strictObject({
  provider: z.string().min(1),
  upstream_model: z.string().min(1),
  input_usd_per_mtok: decimalString,
  output_usd_per_mtok: decimalString.default('0'),
  ...cacheRates,
  long_context: longContextSchema.optional(),
  /** Absent: `live`. */
  lane: z.enum(LANES).optional(),
  /** This offering's own upstream timeout; unset, the provider's (flex: 900 s). */
  timeout_s: z.number().positive().max(3600).optional(),
  /** OpenAI reasoning models refuse max_tokens and want max_completion_tokens. */
  max_tokens_param: z.enum(['max_tokens', 'max_completion_tokens']).optional(),
  /**
   * A reasoning model on the Responses API (OpenAI's gpt-5, o-series): a live Responses call
   * passed through asks for its reasoning as encrypted content, which a stateless next turn must
   * send back. Other models refuse that ask (docs/clients/responses.md).
   */
  encrypted_reasoning: z.boolean().optional(),
  /** Batch lane only (docs/batch-lanes.md): chunk_lines, min_hours_left, fallback_hours, poll_s. */
  ...batchLaneFields,
})

export const modelSchema = z.strictObject({
  id: z.string().min(1),
  endpoints: z.array(z.enum(['chat', 'embeddings'])).min(1),
  context_tokens: z.number().int().positive(),
  /** Chat models: the most a request may ask for. Embedding models: 0. */
  max_output_tokens: z.number().int().min(0),
  aliases: z.array(z.string().min(1)).default([]),
  /** Request parameters this model refuses; a line using one is an issue, never silently dropped. */
  unsupported_params: z.array(z.string().min(1)).default([]),
  /**
   * The most input tokens one image part can be billed at by this model (its largest size and
   * detail), which the cost ceiling counts per image instead of the image's bytes. Absent: the
   * safe default below.
   */
  image_input_tokens: z.number().int().min(0).max(1_000_000).optional(),
  /**
   * Present when a pool can serve fine-tunes of this model: what one batch may name of
   * them (docs/open-models.md). `limits_by_rank` maps a rank to how many fine-tunes above the next lower rank
   * listed a batch may name ({"64": 4, "32": 8}: at most 4 of rank 33–64, 8 in all); a fine-tune
   * of a rank above the highest listed cannot be registered.
   */
  adapters: z
    .strictObject({
      max_per_batch: z.number().int().min(1).max(1024),
      limits_by_rank: z
        .record(
          z.string().regex(/^[1-9]\d{0,3}$/, 'must be a rank such as "64"'),
          z.number().int().min(1),
        )
        .optional(),
      max_total_mib: z.number().int().min(1).optional(),
    })
    .optional(),
  offerings: z.array(offeringSchema).min(1),
  /** The day the prices above were read from the provider's published page (docs/pricing.md). */
  prices_as_of: z.iso.date().optional(),
  /** Where they were read: the provider's pricing page. */
  price_source: z.url().optional(),
})

/**
 * The per-image bound of a model whose entry sets none: above the dearest image any shipped
 * model bills (gpt-4o-mini: 2,833 + 5,667 per 512-px tile, 8 tiles for a 768×2048 high-detail
 * image = 48,169 tokens), so an unknown vision model is never under-held.
 */
export const DEFAULT_IMAGE_INPUT_TOKENS = 50_000

export const imageInputTokens = (model: Pick<ModelEntry, 'image_input_tokens'>): number =>
  model.image_input_tokens ?? DEFAULT_IMAGE_INPUT_TOKENS

export const catalogSchema = z.strictObject({
  $comment: z.string().optional(),
  /** The date the list prices below were read from the providers' pricing pages. */
  prices_read_on: z.string().optional(),
  providers: z.record(z.string().regex(/^[a-z0-9][a-z0-9_-]*$/), providerConfigSchema),
  models: z.array(modelSchema),
})

export type ProviderConfig = z.infer<typeof providerConfigSchema>
export type Offering = z.infer<typeof offeringSchema>

/** A model's limits as an upstream request carries them (providers/types.ts ModelLimits). */
export const limitsOf = (model: Pick<ModelEntry, 'max_output_tokens' | 'context_tokens'>) => ({
  outputTokens: model.max_output_tokens,
  contextTokens: model.context_tokens,
})
export type ModelEntry = z.infer<typeof modelSchema>
export type CatalogFile = z.infer<typeof catalogSchema>

/** Cross-field checks zod cannot express per field: offerings name known providers, ids are unique. */
export function checkCatalog(catalog: CatalogFile): string[] {
  const problems: string[] = []
  for (const [name, provider] of Object.entries(catalog.providers)) {
    problems.push(...replicaProblems(name, provider.base_url))
    // Loading fine-tunes at runtime is vLLM's API (load_lora_adapter), spoken by kind openai only.
    if (provider.lora && provider.kind !== 'openai')
      problems.push(`providers.${name}.lora: only a provider of kind "openai" can load fine-tunes`)
    if (provider.responses_api && provider.kind !== 'openai')
      problems.push(
        `providers.${name}.responses_api: only a provider of kind "openai" serves the Responses API`,
      )
  }
  const seen = new Set<string>()
  catalog.models.forEach((model, index) => {
    for (const name of [model.id, ...model.aliases]) {
      if (seen.has(name)) problems.push(`models[${index}]: "${name}" is used by two models`)
      seen.add(name)
    }
    const lanes = new Set<string>()
    model.offerings.forEach((offering, o) => {
      const at = `models[${index}].offerings[${o}]`
      const provider = catalog.providers[offering.provider]
      if (!provider) {
        problems.push(`${at}.provider: "${offering.provider}" is not in providers`)
      }
      problems.push(...batchLaneProblems(at, offering, provider?.kind))
      if (offering.timeout_s !== undefined && laneOf(offering) !== 'flex')
        problems.push(
          `${at}.timeout_s: an offering's own timeout is for its flex lane; set the provider's timeout_s for the live lane`,
        )
      if (offering.lane === 'flex' && provider && provider.kind !== 'openai')
        problems.push(
          `${at}.lane: "flex" is OpenAI's service tier; only a provider of kind "openai" has it`,
        )
      // One model lists a provider's upstream model once per lane (docs/pricing.md).
      const key = `${offering.provider}\u0000${offering.upstream_model}\u0000${laneOf(offering)}`
      if (lanes.has(key))
        problems.push(
          `${at}: "${offering.provider}" serves "${offering.upstream_model}" on lane "${laneOf(offering)}" twice; list it once per lane`,
        )
      lanes.add(key)
    })
    // After its offerings: a provider misnamed there is the problem to tell first, not what
    // the model's other fields make of the missing provider.
    problems.push(...modelProblems(catalog, model, `models[${index}]`))
    // A batch lane never serves live calls, and its lines fall back to the live lanes in time.
    if (model.offerings.length > 0 && model.offerings.every((o) => laneOf(o) === 'batch'))
      problems.push(
        `models[${index}].offerings: a batch lane needs a "live" or "flex" offering beside it, for live calls and the fallback before the deadline; add one`,
      )
  })
  return problems
}

/**
 * A provider's replicas: each an http(s) URL (an upstream is spoken HTTP to), each listed once (a
 * replica twice would get twice its share of the pool's lines and be counted as two in its health).
 */
function replicaProblems(name: string, baseUrl: string | string[]): string[] {
  const problems: string[] = []
  const urls = typeof baseUrl === 'string' ? [baseUrl] : baseUrl
  const seen = new Set<string>()
  urls.forEach((url, i) => {
    const at =
      typeof baseUrl === 'string'
        ? `providers.${name}.base_url`
        : `providers.${name}.base_url[${i}]`
    const parsed = new URL(url)
    // Said without its user and password: this goes to a terminal and to logs.
    const shown = url.includes('@') ? `…@${url.slice(url.lastIndexOf('@') + 1)}` : url
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      problems.push(
        `${at}: "${shown}" is not an http:// or https:// URL; upstreams are reached over HTTP`,
      )
    // Trailing slashes aside, the same URL names the same replica.
    const same = parsed.href.replace(/\/+$/, '')
    if (seen.has(same)) problems.push(`${at}: "${shown}" is listed twice; list each replica once`)
    seen.add(same)
  })
  return problems
}

/** A model's own limits hold together, and its fine-tune limits have a pool to serve them. */
function modelProblems(catalog: CatalogFile, model: ModelEntry, at: string): string[] {
  const problems: string[] = []
  // The output is part of the context: a request can never be given more than the context.
  if (model.max_output_tokens > model.context_tokens)
    problems.push(
      `${at}.max_output_tokens: ${model.max_output_tokens} is more than its context_tokens (${model.context_tokens}); output tokens count toward the context, so set it at most that`,
    )
  const loraOffering = model.offerings.some(
    (offering) => catalog.providers[offering.provider]?.lora === true,
  )
  if (model.adapters && !loraOffering)
    problems.push(
      `${at}.adapters: none of its offerings is on a provider with "lora": true, so no fine-tune of it could be served; set "lora": true on the pool that loads them, or remove "adapters"`,
    )
  return problems
}

/**
 * The catalog with each 1-hour cache-write rate kept only where it can be billed: on Anthropic's
 * offerings. The other adapters drop `cache_control`, so no line there writes to a 1-hour cache,
 * and the rate would only raise the ceilings of lines that ask for one (docs/pricing.md).
 */
export function withBillableRates(file: CatalogFile): CatalogFile {
  const unbillable = (offering: Offering) =>
    file.providers[offering.provider]?.kind !== 'anthropic' &&
    (offering.cache_write_1h_usd_per_mtok !== undefined ||
      offering.long_context?.cache_write_1h_usd_per_mtok !== undefined)
  if (!file.models.some((model) => model.offerings.some(unbillable))) return file
  const models = file.models.map((model) => ({
    ...model,
    offerings: model.offerings.map((offering) => {
      if (!unbillable(offering)) return offering
      const { cache_write_1h_usd_per_mtok: _, ...rest } = offering
      if (!rest.long_context) return rest
      const { cache_write_1h_usd_per_mtok: __, ...long } = rest.long_context
      return { ...rest, long_context: long }
    }),
  }))
  return { ...file, models }
}
