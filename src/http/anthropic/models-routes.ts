/**
 * Anthropic's Models API under /anthropic (docs/clients/anthropic-sdk.md): `GET /anthropic/v1/models`
 * (`limit`, `after_id`, `before_id`; Anthropic's page shape) and `GET /anthropic/v1/models/{id}`,
 * so a client that lists models to check its key or pick one (`client.models.list()`) works
 * unchanged. They list what the Messages API here can call: the catalog's chat models with a
 * usable offering, then the caller's fine-tunes of such models, as `/v1/models` lists them.
 */
import { Elysia } from 'elysia'
import type { Catalog } from '../../catalog/catalog.ts'
import type { FineTuneLookup } from '../../catalog/fine-tunes.ts'
import type { Authenticator } from '../../auth/authenticate.ts'
import { notFound } from '../../errors.ts'
import type { AnthropicModelObject } from '../../schemas/facade-objects.ts'
import { excerpt } from '../../excerpt.ts'
import { callerMacro } from '../caller-macro.ts'
import { parseQuery } from '../parse-query.ts'
import {
  anthropicAuthorization,
  anthropicErrorResponse,
  inAnthropicShape,
} from './anthropic-errors.ts'
import { pathId } from '../path-id.ts'
import { anthropicPage } from './anthropic-page.ts'
import { listQuery } from './message-batches-routes.ts'
import { ANTHROPIC_PREFIX } from './messages-routes.ts'

export interface AnthropicModelDeps {
  auth: Authenticator
  catalog: Catalog
  /** When the gateway started (Unix seconds): the catalog's models' `created_at`. */
  createdAt: number
  fineTunes: (accountId: string) => Promise<FineTuneLookup>
}

const rfc3339 = (seconds: number) => new Date(seconds * 1000).toISOString()

export function anthropicModelRoutes(deps: AnthropicModelDeps) {
  const { catalog } = deps

  /** Every model the caller can send a Messages request for, in the order they are listed. */
  async function modelsOf(accountId: string): Promise<AnthropicModelObject[]> {
    const chat = catalog.models.filter(
      (model) => model.endpoints.includes('chat') && catalog.usable(model).length > 0,
    )
    const models: AnthropicModelObject[] = chat.map((model) => ({
      type: 'model',
      id: model.id,
      display_name: model.id,
      created_at: rfc3339(deps.createdAt),
    }))
    for (const fineTune of (await deps.fineTunes(accountId)).values()) {
      if (!chat.some((model) => model.id === fineTune.baseModel)) continue
      const created_at = rfc3339(fineTune.createdAt)
      models.push({ type: 'model', id: fineTune.id, display_name: fineTune.id, created_at })
    }
    return models
  }

  async function oneModel(accountId: string, asked: string): Promise<AnthropicModelObject> {
    // An alias names its model here as it does in a Messages request (`claude-haiku-4-5`).
    const id = catalog.find(asked)?.id ?? asked
    const model = (await modelsOf(accountId)).find((m) => m.id === id)
    if (!model) throw notFound(`model ${excerpt(asked)}`)
    return model
  }

  return (
    new Elysia({ name: 'anthropic-models', prefix: `${ANTHROPIC_PREFIX}/models` })
      .use(
        callerMacro(deps.auth, {
          authorization: anthropicAuthorization,
          refusal: anthropicErrorResponse,
        }),
      )
      .get(
        '',
        ({ request, caller, answerHeaders }) =>
          inAnthropicShape(answerHeaders, async () => {
            const query = parseQuery(listQuery, request.url)
            const page = pageOf(await modelsOf(caller.account.id), query)
            return anthropicPage(page.models, page.hasMore)
          }),
        { caller: 'read' },
      )
      // An id with a "/" (the catalog's `vendor/model`) comes URL-encoded, as the SDK sends it, or
      // as it is by hand.
      .get(
        '/:id',
        ({ params, caller, answerHeaders }) =>
          inAnthropicShape(answerHeaders, () => oneModel(caller.account.id, params.id)),
        { caller: 'read' },
      )
      .get(
        '/*',
        ({ params, caller, answerHeaders }) =>
          inAnthropicShape(answerHeaders, () => oneModel(caller.account.id, pathId(params['*']))),
        { caller: 'read' },
      )
  )
}

/** Anthropic's paging over the list: after `after_id`, else just before `before_id`, else the first. */
function pageOf(
  models: AnthropicModelObject[],
  query: { limit: number; after_id?: string; before_id?: string },
): { models: AnthropicModelObject[]; hasMore: boolean } {
  const at = (id: string) => models.findIndex((model) => model.id === id)
  if (query.after_id !== undefined || query.before_id === undefined) {
    const start = query.after_id === undefined ? 0 : at(query.after_id) + 1
    if (query.after_id !== undefined && start === 0) return { models: [], hasMore: false }
    const page = models.slice(start, start + query.limit)
    return { models: page, hasMore: start + query.limit < models.length }
  }
  const end = at(query.before_id)
  if (end < 0) return { models: [], hasMore: false }
  const start = Math.max(0, end - query.limit)
  return { models: models.slice(start, end), hasMore: start > 0 }
}
