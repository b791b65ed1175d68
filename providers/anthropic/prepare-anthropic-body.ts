/**
 * The Messages API body the Anthropic adapter sends for one request, or the reason it cannot be
 * sent (never retried: the line is wrong). The cost ceiling measures this same body.
 */
import { prepareForOffering, type UpstreamTarget } from '../prepare-for-offering.ts'
import type { Endpoint } from '../types.ts'
import {
  convertToAnthropicMessages,
  type AnthropicRequestConversion,
} from './convert-to-anthropic-messages.ts'

/** How the body is sent: streamed or not, and the provider's name for a refusal's message. */
export interface AnthropicSend {
  stream: boolean
  /** Default: Anthropic. */
  providerName?: string
}

/** Sent without streaming, by the provider named Anthropic. */
export const UNSTREAMED: AnthropicSend = Object.freeze({ stream: false })
/** Streamed, by the provider named Anthropic. */
export const STREAMED: AnthropicSend = Object.freeze({ stream: true })

export function prepareAnthropicBody(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  target: UpstreamTarget,
  { stream, providerName = 'Anthropic' }: AnthropicSend,
): AnthropicRequestConversion {
  if (endpoint !== 'chat') {
    return { ok: false, message: `${providerName} (Anthropic) does not serve embeddings` }
  }
  const converted = convertToAnthropicMessages(prepareForOffering(body, target), target.modelLimits)
  if (converted.ok && stream) converted.body.stream = true
  return converted
}
