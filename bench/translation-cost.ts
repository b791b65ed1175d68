/**
 * What the clients' APIs add to a live call in CPU, timed in this process (bench/proxy.ts): the
 * request translated into a chat body, the chat answer translated back, and the translated answer
 * serialized, less what chat itself does there (serializing its answer). Steadier than the
 * gateways' CPU per request on a shared box, which it complements.
 */
import { chatBodyOf } from '../src/http/anthropic/messages-routes.ts'
import { convertChatToMessage } from '../providers/anthropic/convert-chat-to-message.ts'
import { chatBodyOfResponses } from '../src/http/responses/responses-routes.ts'
import { convertChatToResponse } from '../providers/responses/convert-chat-to-response.ts'
import { TIMED_CALLS, timeOf } from './lib.ts'

/** µs per call over chat's own work, for a Responses request and a Messages request. */
export function timeTranslations(
  responsesRequest: Record<string, unknown>,
  messagesRequest: Record<string, unknown>,
  completion: Record<string, unknown>,
): { calls: number; responsesUs: number; messagesUs: number } {
  // Chat answers with the upstream's object, serialized once.
  const chat = () => JSON.stringify(completion)
  const responses = () => {
    chatBodyOfResponses(responsesRequest)
    return JSON.stringify(convertChatToResponse(completion, responsesRequest))
  }
  const messages = () => {
    const { body } = chatBodyOf(messagesRequest)
    return JSON.stringify(convertChatToMessage(completion, String(body.model)))
  }
  // Warmed alike first, so the JIT has compiled each before it is timed.
  for (const work of [chat, responses, messages]) timeOf(work)
  const chatUs = timeOf(chat)
  return {
    calls: TIMED_CALLS,
    responsesUs: timeOf(responses) - chatUs,
    messagesUs: timeOf(messages) - chatUs,
  }
}
