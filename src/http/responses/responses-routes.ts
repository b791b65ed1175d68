/**
 * `POST /v1/responses` (also under /openai/v1), SPEC §18: the Responses API on the live call path
 * (live.ts), so a call is held, routed and settled exactly as a chat call is. The request is
 * translated into chat completions for the common subset and the answer back into a Response
 * object, or OpenAI's Responses stream events.
 */
import { Elysia } from 'elysia'
import { badRequest } from '../../errors.ts'
import type { LiveService } from '../live.ts'
import { convertChatToResponse } from './convert-chat-to-response.ts'
import { convertResponsesToChat } from './convert-responses-to-chat.ts'
import { responseStreamRender } from './render-response-stream.ts'

/** The request as chat completions, or the 400 that names the field it cannot translate. */
export function chatBodyOfResponses(raw: unknown): Record<string, unknown> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw badRequest('the body must be a JSON object: a Responses API request')
  const converted = convertResponsesToChat(raw as Record<string, unknown>)
  if (!converted.ok) throw badRequest(`${converted.param} ${converted.message}`, converted.param)
  return converted.body
}

export function responsesRoutes(prefix: string, live: LiveService) {
  return new Elysia({ name: `responses${prefix}`, prefix }).post(
    '/v1/responses',
    async ({ request, set }) => {
      const headers = set.headers as Record<string, string>
      const input = await live.readJson(request, headers)
      const params = input.raw as Record<string, unknown>
      const chat = { ...input, raw: chatBodyOfResponses(params) }
      if (params.stream === true)
        return live.stream(request, headers, chat, responseStreamRender(params))
      return convertChatToResponse(await live.call(request, chat, 'chat'), params)
    },
    { parse: 'none' },
  )
}
