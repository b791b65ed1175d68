/**
 * The Anthropic Messages API under /anthropic (docs/clients/anthropic-sdk.md): `POST /anthropic/v1/messages`
 * (streaming and not) and `POST /anthropic/v1/messages/count_tokens`. A request is translated
 * into the chat body the engine knows and goes through the live call path (live.ts): held,
 * routed to any offering of its model, settled from usage; the answer comes back as an Anthropic
 * message or Anthropic's stream events. Key in `x-api-key` or as a Bearer key; `anthropic-version`
 * and `anthropic-beta` are accepted and not needed.
 */
import { Elysia } from 'elysia'
import { badRequest, refuse } from '../../errors.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../ingest/json-depth.ts'
import { validateBody } from '../../ingest/validate-body.ts'
import { sendWithFallback } from '../../upstream/send-with-fallback.ts'
import type { Catalog } from '../../catalog/catalog.ts'
import { servedOnlyBy } from '../../catalog/served-only-by.ts'
import type { LiveDeps, LiveService, StreamRender } from '../live.ts'
import { responseHeaders } from '../caller-macro.ts'
import { anthropicAuthorization, inAnthropicShape } from './anthropic-errors.ts'
import { convertChatToMessage } from './convert-chat-to-message.ts'
import { convertMessagesToChat } from './convert-messages-to-chat.ts'
import { anthropicStreamRender } from './render-message-stream.ts'

export const ANTHROPIC_PREFIX = '/anthropic/v1'

/** The Messages params as a chat body, or the 400 that names what cannot be translated. */
export function chatBodyOf(params: unknown, lenient = false) {
  // The translation walks the blocks (and serializes tool inputs): bounded before it does.
  if (nestsDeeperThan(params))
    throw badRequest(`the body nests more than ${MAX_JSON_DEPTH} levels deep; flatten it`)
  const converted = convertMessagesToChat(params, { lenient })
  if (!converted.ok)
    throw badRequest(
      `${converted.param || 'the body'} ${converted.message}`,
      converted.param || null,
    )
  return converted.body
}

/** Whether a Messages request passes through as it came: every offering of its model is Anthropic's. */
export const passesThrough = (catalog: Catalog, model: unknown): boolean =>
  servedOnlyBy(catalog, model, (provider) => provider.kind === 'anthropic')

/** A passed-through stream: Anthropic's events as they came, under their own names. */
const rawEvents = (): StreamRender => ({
  chunk: (event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`,
  end: () => '',
  broken: () =>
    `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'the upstream stream broke off' } })}\n\n`,
})

export function anthropicMessagesRoutes(deps: LiveDeps, live: LiveService) {
  async function messages(request: Request, headers: Record<string, string>) {
    const input = await live.readJson(request, headers, anthropicAuthorization(request))
    const params = input.raw as { model?: unknown; stream?: unknown } | null
    if (passesThrough(deps.catalog, params?.model)) {
      // Anthropic's own API: sent as it came, answered as Anthropic answered (docs/clients/anthropic-sdk.md).
      const chat = { ...input, raw: chatBodyOf(params, true) }
      const passed = {
        ...chat,
        passThrough: { body: params as Record<string, unknown>, api: 'messages' as const },
      }
      if (params?.stream === true) return live.stream(request, headers, passed, rawEvents())
      return live.call(request, passed, 'chat')
    }
    const body = chatBodyOf(input.raw)
    const model = String(body.model)
    const chat = { ...input, raw: body }
    if (body.stream === true)
      return live.stream(request, headers, chat, anthropicStreamRender(model))
    return convertChatToMessage(await live.call(request, chat, 'chat'), model)
  }

  /**
   * Anthropic's own count for a model served only by Anthropic offerings (passed through, like
   * its messages); otherwise, or when Anthropic cannot answer, the gateway's pessimistic bound of
   * the prompt (docs/money-and-limits.md), the count its ceiling holds.
   */
  async function countTokens(request: Request, headers: Record<string, string>) {
    const input = await live.readJson(request, headers, anthropicAuthorization(request))
    // count_tokens takes no max_tokens; one output token lets the body pass as a request.
    const raw = input.raw as Record<string, unknown> | null
    // Passed through, Anthropic's own fields (thinking, documents, …) are Anthropic's to count.
    const through = passesThrough(deps.catalog, raw?.model)
    const body = chatBodyOf(
      typeof raw === 'object' && raw !== null && !Array.isArray(raw)
        ? { ...raw, max_tokens: 1 }
        : raw,
      through,
    )
    const checked = validateBody(body, 'chat', deps.catalog, { live: true })
    if (!checked.ok) {
      const problem = checked.problems[0]
      const message = `${problem.path || 'body'} ${problem.message}; ${problem.fix}`
      if (problem.code === 'model_not_found')
        throw refuse('model_not_found', message, { param: problem.path || null })
      throw badRequest(message, problem.path || null)
    }
    if (through) {
      const tried = await sendWithFallback(deps.upstreams, {
        endpoint: 'chat',
        body: raw as Record<string, unknown>,
        passThrough: 'count_tokens',
        offerings: checked.value.offerings,
        signal: request.signal,
      })
      if (tried?.outcome.ok) return { input_tokens: tried.outcome.body.input_tokens }
    }
    return { input_tokens: checked.value.inputTokens }
  }

  return new Elysia({ name: 'anthropic-messages', prefix: ANTHROPIC_PREFIX })
    .post(
      '/messages',
      ({ request, set }) =>
        inAnthropicShape(responseHeaders(set), () => messages(request, responseHeaders(set))),
      { parse: 'none' },
    )
    .post(
      '/messages/count_tokens',
      ({ request, set }) =>
        inAnthropicShape(responseHeaders(set), () => countTokens(request, responseHeaders(set))),
      { parse: 'none' },
    )
}
