/**
 * Live endpoints (docs/live.md): chat completions (also streamed as server-sent events), embeddings
 * and the model list, through the same catalog, adapters and prices as batches. The call itself —
 * validated, held, sent, settled — is src/live/ (live-call.ts); these routes read and render.
 * Mounted at the root and under /openai/v1.
 */
import { Elysia } from 'elysia'
import { loraOfferings, type FineTuneRecord } from '../catalog/fine-tunes.ts'
import { offeringName } from '../catalog/lanes.ts'
import type { ModelEntry, Offering } from '../catalog/catalog-file.ts'
import { ENDPOINT_URLS } from '../domain.ts'
import { refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import { liveService } from '../live/live-call.ts'
import type { LiveDeps } from '../live/live-types.ts'
import { pathId } from './path-id.ts'
import { renderFineTuneModel } from './render-model.ts'

export { liveService, type LiveService } from '../live/live-call.ts'
export type {
  LiveCharge,
  LiveDeps,
  LiveInput,
  NativeCall,
  StreamRender,
} from '../live/live-types.ts'

export function liveRoutes(prefix: string, deps: LiveDeps) {
  const { auth, catalog } = deps
  const { readJson, call, stream } = liveService(deps)

  /** A catalog model, OpenAI's model object with its prices. */
  const catalogModel = (model: ModelEntry) => ({
    id: model.id,
    object: 'model',
    created: deps.createdAt,
    owned_by: model.offerings[0].provider,
    endpoints: model.endpoints,
    aliases: model.aliases,
    context_tokens: model.context_tokens,
    max_output_tokens: model.max_output_tokens,
    pricing: pricingOf(catalog.usable(model)),
  })

  /** Whether a catalog model can be called here: some offering has its provider configured. */
  const callable = (model: ModelEntry) => catalog.usable(model).length > 0

  /**
   * The caller's own fine-tuned model, with its base as `parent` and what it inherits from it:
   * endpoints, limits, and its prices (its LoRA offerings').
   */
  const fineTuneModel = (fineTune: FineTuneRecord) => {
    const base = catalog.find(fineTune.baseModel)
    return {
      ...renderFineTuneModel(fineTune),
      endpoints: base?.endpoints ?? [],
      context_tokens: base?.context_tokens ?? null,
      max_output_tokens: base?.max_output_tokens ?? null,
      pricing: base ? pricingOf(loraOfferings(catalog, catalog.usable(base))) : [],
    }
  }

  const caller = (request: Request, headers: unknown) =>
    auth.authenticate(
      request.headers.get('authorization'),
      'any',
      headers as Record<string, string>,
    )

  async function oneModel(request: Request, headers: unknown, id: string) {
    const { account } = await caller(request, headers)
    const model = catalog.find(id)
    if (model && callable(model)) return catalogModel(model)
    const fineTune = model ? undefined : (await deps.fineTunes(account.id)).get(id)
    if (fineTune) return fineTuneModel(fineTune)
    throw refuse(
      'model_not_found',
      `the model ${JSON.stringify(excerpt(id))} does not exist or is not yours; GET ${prefix}/v1/models lists the models you can call`,
      { param: 'model' },
    )
  }

  return (
    new Elysia({ name: `live${prefix}`, prefix })
      .get('/v1/models', async ({ request, set }) => {
        const { account } = await caller(request, set.headers)
        return {
          object: 'list',
          // The catalog's, then the caller's own fine-tunes.
          data: [
            ...catalog.models.filter(callable).map(catalogModel),
            ...[...(await deps.fineTunes(account.id)).values()].map(fineTuneModel),
          ],
        }
      })
      // One model, as the list has it: by its id or an alias (`models.retrieve` in OpenAI's SDK). A
      // catalog id holds a "/": sent URL-encoded by the SDKs, or as it is by hand.
      .get('/v1/models/:id', ({ request, set, params }) =>
        oneModel(request, set.headers, params.id),
      )
      .get('/v1/models/*', ({ request, set, params }) =>
        oneModel(request, set.headers, pathId(params['*'])),
      )
      .post(
        ENDPOINT_URLS.chat,
        async ({ request, set }) => {
          const headers = set.headers as Record<string, string>
          const input = await readJson(request, headers)
          const wantsStream = (input.raw as { stream?: unknown } | null)?.stream === true
          return wantsStream ? stream(request, headers, input) : call(request, input, 'chat')
        },
        { parse: 'none' },
      )
      .post(
        ENDPOINT_URLS.embeddings,
        async ({ request, set }) =>
          call(
            request,
            await readJson(request, set.headers as Record<string, string>),
            'embeddings',
          ),
        { parse: 'none' },
      )
  )
}

/** Each offering's prices: the class rates and long-context tier it sets (docs/pricing.md), its lane. */
function pricingOf(offerings: readonly Offering[]) {
  return offerings.map((o) => ({
    // The name routing.providers and results use, and `provider.only` takes ("openai:batch").
    provider: offeringName(o),
    lane: o.lane ?? 'live',
    input_usd_per_mtok: o.input_usd_per_mtok,
    output_usd_per_mtok: o.output_usd_per_mtok,
    ...(o.cached_input_usd_per_mtok && { cached_input_usd_per_mtok: o.cached_input_usd_per_mtok }),
    ...(o.cache_write_usd_per_mtok && { cache_write_usd_per_mtok: o.cache_write_usd_per_mtok }),
    ...(o.cache_write_1h_usd_per_mtok && {
      cache_write_1h_usd_per_mtok: o.cache_write_1h_usd_per_mtok,
    }),
    ...(o.long_context && { long_context: o.long_context }),
  }))
}
