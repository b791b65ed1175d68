/**
 * `POST /v1/responses` (also under /openai/v1), docs/clients/responses.md: the Responses API on the live call path
 * (live.ts), so a call is held, routed and settled exactly as a chat call is. The request is
 * translated into chat completions for the common subset and the answer back into a Response
 * object, or OpenAI's Responses stream events.
 */
import { Elysia } from 'elysia'
import type { Catalog } from '../../catalog/catalog.ts'
import { servesResponses } from '../../catalog/responses-api.ts'
import { badRequest, GatewayError } from '../../errors.ts'
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../ingest/json-depth.ts'
import { inResponsesNames, responsesParam } from '../../ingest/responses-line.ts'
import type { LiveService, StreamRender } from '../live.ts'
import { convertChatToResponse } from '../../../providers/responses/convert-chat-to-response.ts'
import { convertResponsesToChat } from '../../../providers/responses/convert-responses-to-chat.ts'
import { responseStreamRender } from './render-response-stream.ts'
import { responseHeaders } from '../caller-macro.ts'

/** The request as chat completions, or the 400 that names the field it cannot translate. */
export function chatBodyOfResponses(raw: unknown, lenient = false): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw badRequest('the body must be a JSON object: a Responses API request')
  if (nestsDeeperThan(raw))
    throw badRequest(`the body nests more than ${MAX_JSON_DEPTH} levels deep; flatten it`)
  const converted = convertResponsesToChat(raw as Record<string, unknown>, { lenient })
  if (!converted.ok) throw badRequest(`${converted.param} ${converted.message}`, converted.param)
  return converted.body
}

/**
 * A refusal of the translated chat body (its validation, the hold), told in the Responses body's
 * names: the caller sent max_output_tokens and input, not max_tokens and messages.
 */
function inResponsesTermsError(error: unknown): unknown {
  if (!(error instanceof GatewayError)) return error
  const { param } = error.options
  return new GatewayError(error.refusal, inResponsesNames(error.message), {
    ...error.options,
    param: param ? responsesParam(param) : param,
  })
}

/** A passed-through stream: the provider's events as they came, under their own names. */
const rawEvents = (): StreamRender => ({
  chunk: (event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`,
  end: () => '',
  broken: () =>
    `event: error\ndata: ${JSON.stringify({ type: 'error', code: 'server_error', message: 'the upstream stream broke off', param: null })}\n\n`,
})

export function responsesRoutes(prefix: string, live: LiveService, catalog: Catalog) {
  return new Elysia({ name: `responses${prefix}`, prefix }).post(
    '/v1/responses',
    async ({ request, set }) => {
      const headers = responseHeaders(set)
      const input = await live.readJson(request, headers)
      const params = input.raw as Record<string, unknown>
      const through = servesResponses(catalog, (params as { model?: unknown } | null)?.model)
      const chat = { ...input, raw: chatBodyOfResponses(params, through) }
      if (through) {
        // OpenAI stores a response unless told not to; the gateway promises nothing is stored.
        const body = { ...params, store: false }
        const passed = { ...chat, passThrough: { body, api: 'responses' as const } }
        if (params.stream === true) return live.stream(request, headers, passed, rawEvents())
        return live.call(request, passed, 'chat')
      }
      try {
        if (params.stream === true)
          return await live.stream(request, headers, chat, responseStreamRender(params))
        return convertChatToResponse(await live.call(request, chat, 'chat'), params)
      } catch (error) {
        throw inResponsesTermsError(error)
      }
    },
    { parse: 'none' },
  )
}
