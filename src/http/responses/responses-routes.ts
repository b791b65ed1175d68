/**
 * `POST /v1/responses` (also under /openai/v1), docs/clients/responses.md: the Responses API on the live call path
 * (live.ts), so a call is held, routed and settled exactly as a chat call is. Offerings with
 * `responses_api` get the request as it came; the others get it translated into chat completions
 * for the common subset, and their answer back into a Response object, or OpenAI's Responses
 * stream events (catalog/speaks-api.ts).
 */
import { Elysia } from 'elysia'
import type { Catalog } from '../../catalog/catalog.ts'
import { translateCall } from '../../live/translate-call.ts'
import { badRequest, GatewayError, refuse } from '../../errors.ts'
import { inCallersTerms } from '../in-callers-terms.ts'
import { excerpt } from '../../excerpt.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../ingest/json-depth.ts'
import { RESPONSES_NAMES } from '../../ingest/responses-line.ts'
import type { LiveService, NativeCall, StreamRender } from '../live.ts'
import { convertChatToResponse } from '../../../providers/responses/convert-chat-to-response.ts'
import { convertResponsesToChat } from '../../../providers/responses/convert-responses-to-chat.ts'
import { brokenOffEvent, responseStreamRender } from './render-response-stream.ts'
import { responseHeaders } from '../caller-macro.ts'

/** The request as chat completions, or the 400 that names the field it cannot translate. */
export function chatBodyOfResponses(raw: unknown, lenient = false): Record<string, unknown> {
  const body = translated(raw, lenient)
  if (body instanceof GatewayError) throw body
  return body
}

function translated(raw: unknown, lenient: boolean) {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw badRequest('the body must be a JSON object: a Responses API request')
  if (nestsDeeperThan(raw))
    throw badRequest(`the body nests more than ${MAX_JSON_DEPTH} levels deep; flatten it`)
  const converted = convertResponsesToChat(raw as Record<string, unknown>, { lenient })
  if (!converted.ok) return badRequest(`${converted.param} ${converted.message}`, converted.param)
  return converted.body
}

/**
 * A Responses request as the live path takes it (docs/clients/responses.md): the chat body it
 * translates to, validated, priced and sent to chat-only offerings, and the request itself for
 * offerings with `responses_api`. A field outside the translated subset keeps the call to those;
 * with none among the model's offerings it is the 400 that names the field.
 */
export function responsesCall(
  params: Record<string, unknown>,
  catalog: Catalog,
): { raw: Record<string, unknown>; passThrough: NativeCall } {
  const { chat, untranslated } = translateCall(
    catalog,
    { model: params.model, api: 'responses' },
    (lenient) => translated(params, lenient),
  )
  return {
    raw: chat,
    passThrough: {
      api: 'responses',
      // OpenAI stores a response unless told not to; the gateway promises nothing is stored.
      body: { ...params, store: false },
      reasoningBack: true,
      untranslated,
      fromChat: (answer) => convertChatToResponse(answer, params),
      streamRender: (native) => (native ? rawEvents() : responseStreamRender(params)),
    },
  }
}

/**
 * A passed-through stream: the provider's events as they came, under their own names. The error
 * that ends a stream broken off is numbered next after the last event passed on, as OpenAI
 * numbers every event of a stream.
 */
function rawEvents(): StreamRender {
  let next = 0
  return {
    chunk(event) {
      if (typeof event.sequence_number === 'number') next = event.sequence_number + 1
      return `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`
    },
    end: () => '',
    broken: () => brokenOffEvent(next),
  }
}

/**
 * OpenAI's routes for one stored response: retrieve, delete, cancel, input_items. Not its routes
 * under /v1/responses that are no response (input_tokens, compact): those are plain unknown routes.
 */
const STORED_RESPONSE =
  /^((?:\/openai)?\/v1\/responses)\/(?!(?:input_tokens|compact)(?:\/|$))([^/]+)(?:\/input_items|\/cancel)?$/

/**
 * A call to one of OpenAI's routes for a stored response: none is stored here, so it is a 404
 * that says so, the same for any id and any caller (it tells nothing of an account). Null for
 * any other path. Answered where unknown routes are (app.ts), as no route here serves it.
 */
export function storedResponseRefusal(path: string): GatewayError | null {
  const asked = STORED_RESPONSE.exec(path)
  if (!asked) return null
  const id = safeDecode(asked[2]!)
  return refuse(
    'not_found',
    `response ${JSON.stringify(excerpt(id))} not found: this gateway stores no responses, so none can be read back, cancelled or deleted; keep the answer POST ${asked[1]} returned`,
  )
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

export function responsesRoutes(prefix: string, live: LiveService, catalog: Catalog) {
  return new Elysia({ name: `responses${prefix}`, prefix }).post(
    '/v1/responses',
    async ({ request, set }) => {
      const headers = responseHeaders(set)
      const input = await live.readJson(request, headers)
      const call = { ...input, ...responsesCall(input.raw as Record<string, unknown>, catalog) }
      try {
        if (call.passThrough.body.stream === true) return await live.stream(request, headers, call)
        return await live.call(request, call, 'chat')
      } catch (error) {
        throw inCallersTerms(error, RESPONSES_NAMES)
      }
    },
    { parse: 'none' },
  )
}
