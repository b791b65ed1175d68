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

export function prepareAnthropicBody(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  target: UpstreamTarget,
  stream: boolean,
  providerName = 'Anthropic',
): AnthropicRequestConversion {
  if (endpoint !== 'chat') {
    return { ok: false, message: `${providerName} (Anthropic) does not serve embeddings` }
  }
  const converted = convertToAnthropicMessages(prepareForOffering(body, target))
  if (converted.ok && stream) converted.body.stream = true
  return converted
}
