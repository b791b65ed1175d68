/**
 * The Anthropic Messages API under /anthropic (docs/clients/anthropic-sdk.md): `POST /anthropic/v1/messages`
 * (streaming and not) and `POST /anthropic/v1/messages/count_tokens`. A request goes through the
 * live call path (live.ts) as the chat body it translates to: held, routed to any offering of its
 * model, settled from usage. Anthropic offerings get it as it came, the others that chat body
 * (catalog/speaks-api.ts); the answer comes back as an Anthropic message or Anthropic's stream
 * events either way. Key in `x-api-key` or as a Bearer key; `anthropic-version`
 * and `anthropic-beta` are accepted and not needed.
 */
import { Elysia } from 'elysia'
import { badRequest, GatewayError, refuse } from '../../errors.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../ingest/json-depth.ts'
import { validateBody } from '../../ingest/validate-body.ts'
import { sendWithFallback } from '../../upstream/send-with-fallback.ts'
import type { Catalog } from '../../catalog/catalog.ts'
import { inCatalog, offeringsSpeaking, spokenBySome } from '../../catalog/speaks-api.ts'
import { translateCall } from '../../live/translate-call.ts'
import type { LiveDeps, LiveService, NativeCall, StreamRender } from '../live.ts'
import { responseHeaders } from '../caller-macro.ts'
import { anthropicAuthorization, inAnthropicShape } from './anthropic-errors.ts'
import { convertChatToMessage } from '../../../providers/anthropic/convert-chat-to-message.ts'
import {
  convertMessagesToChat,
  type MessageOrigin,
} from '../../../providers/anthropic/convert-messages-to-chat.ts'
import { messagesNames } from '../../../providers/anthropic/messages-path.ts'
import { inCallersTerms } from '../in-callers-terms.ts'
import { anthropicStreamRender } from './render-message-stream.ts'
import { limitsOf } from '../../catalog/catalog-file.ts'

export const ANTHROPIC_PREFIX = '/anthropic/v1'

/**
 * The Messages params as a chat body, or the 400 that names what cannot be translated; `names`
 * name the body's fields as the caller's (messages-path.ts).
 */
export function chatBodyOf(params: unknown, lenient = false) {
  const converted = translated(params, lenient)
  if (converted instanceof GatewayError) throw converted
  return { body: converted.body, names: messagesNames(converted.origins) }
}

function translated(params: unknown, lenient: boolean) {
  // The translation walks the blocks (and serializes tool inputs): bounded before it does.
  if (nestsDeeperThan(params))
    throw badRequest(`the body nests more than ${MAX_JSON_DEPTH} levels deep; flatten it`)
  const converted = convertMessagesToChat(params, { lenient })
  if (!converted.ok)
    return badRequest(
      `${converted.param || 'the body'} ${converted.message}`,
      converted.param || null,
    )
  return converted
}

/**
 * A Messages request as the live path takes it (docs/clients/anthropic-sdk.md): sent as it came to
 * Anthropic offerings, as the chat body it translates to to the others. A field outside the
 * translated subset keeps the call to Anthropic's offerings; with none it is the 400 naming it.
 */
function messagesCall(
  params: Record<string, unknown>,
  catalog: Catalog,
): {
  raw: Record<string, unknown>
  passThrough: NativeCall
  names: ReturnType<typeof messagesNames>
} {
  // The origins of the translation the call goes by: the lenient one when the strict one failed.
  let origins: MessageOrigin[] = []
  const { chat, untranslated } = translateCall(
    catalog,
    { model: params?.model, api: 'messages' },
    (lenient) => {
      const converted = translated(params, lenient)
      if (converted instanceof GatewayError) return converted
      origins = converted.origins
      return converted.body
    },
  )
  const model = String(chat.model)
  return {
    raw: chat,
    names: messagesNames(origins),
    passThrough: {
      api: 'messages',
      body: params,
      untranslated,
      fromChat: (answer) => convertChatToMessage(answer, model),
      streamRender: (native) => (native ? rawEvents() : anthropicStreamRender(model)),
    },
  }
}

/** A passed-through stream: Anthropic's events as they came, under their own names. */
const rawEvents = (): StreamRender => ({
  chunk: (event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`,
  end: () => '',
  broken: () =>
    `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'the upstream stream broke off' } })}\n\n`,
})

/**
 * The caller's `anthropic-beta` header (comma-separated feature names), sent on to Anthropic
 * offerings with the request passed through, empty names left out; Anthropic judges the names,
 * and another provider never sees them. Only its length is bounded here.
 */
function anthropicBeta(request: Request): string | undefined {
  const betas = request.headers.get('anthropic-beta')
  if (betas === null) return undefined
  if (betas.length > 1024)
    throw badRequest(
      'the anthropic-beta header is over 1,024 characters; send only the beta names the request needs',
    )
  const names = betas
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '')
  return names.length > 0 ? names.join(',') : undefined
}

export function anthropicMessagesRoutes(deps: LiveDeps, live: LiveService) {
  async function messages(request: Request, headers: Record<string, string>) {
    const input = await live.readJson(request, headers, anthropicAuthorization(request))
    const { names, ...call } = {
      ...input,
      ...messagesCall(input.raw as Record<string, unknown>, deps.catalog),
    }
    call.passThrough.anthropicBeta = anthropicBeta(request)
    try {
      if (call.raw.stream === true) return await live.stream(request, headers, call)
      return await live.call(request, call, 'chat')
    } catch (error) {
      throw inCallersTerms(error, names)
    }
  }

  /**
   * Anthropic's own count where the call may go to Anthropic offerings (passed through, like its
   * messages); otherwise, or when Anthropic cannot answer, the gateway's pessimistic bound of the
   * prompt (docs/money-and-limits.md), the count its ceiling holds.
   */
  async function countTokens(request: Request, headers: Record<string, string>) {
    const input = await live.readJson(request, headers, anthropicAuthorization(request))
    // count_tokens takes no max_tokens; one output token lets the body pass as a request.
    const raw = input.raw as Record<string, unknown> | null
    // Where Anthropic counts, its own fields (thinking, documents, …) are Anthropic's to count;
    // for a model not in the catalog, validation says so before any field is judged.
    const through = spokenBySome(deps.catalog, raw?.model, 'count_tokens')
    const { body, names } = chatBodyOf(
      typeof raw === 'object' && raw !== null && !Array.isArray(raw)
        ? { ...raw, max_tokens: 1 }
        : raw,
      through || !inCatalog(deps.catalog, raw?.model),
    )
    const checked = validateBody(body, 'chat', deps.catalog, { live: true })
    if (!checked.ok) {
      const problem = checked.problems[0]
      const message = `${problem.path || 'body'} ${problem.message}; ${problem.fix}`
      if (problem.code === 'model_not_found')
        throw refuse('model_not_found', message, { param: problem.path || null })
      throw inCallersTerms(badRequest(message, problem.path || null), names)
    }
    const counting = offeringsSpeaking(deps.catalog, checked.value.offerings, 'count_tokens')
    if (counting.length > 0) {
      const tried = await sendWithFallback(deps.upstreams, {
        endpoint: 'chat',
        body,
        passThrough: {
          api: 'count_tokens',
          body: raw as Record<string, unknown>,
          anthropicBeta: anthropicBeta(request),
        },
        offerings: counting,
        modelLimits: limitsOf(checked.value.model),
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
