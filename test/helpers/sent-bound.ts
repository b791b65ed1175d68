/**
 * What a body that went upstream can cost at most, measured on the body itself (as an upstream
 * received it, or as an adapter built it): the check the cost ceiling must pass, written from
 * the sent body's side and independent of src/pricing/ceiling.ts.
 *
 * Tokens of the prompt ≤ the body's UTF-8 bytes with image payloads left out, + 4 per message
 * (a system prompt counts as one) + 3 priming the reply + 1,000 for a tool-use prompt when tools
 * are defined, + each image at its model's bound. Output ≤ the one limit sent × n, or the
 * model's own limit when none was sent, + a prediction's bytes.
 */
import Decimal from 'decimal.js'
import { expect } from 'bun:test'

export interface SentMeasure {
  /** Bytes of the body without image payloads. */
  bytes: number
  messages: number
  images: number
  tools: boolean
  /** The output limit sent, null when none was. */
  limit: number | null
  n: number
  prediction: number
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8')

/** Measures an OpenAI- or Anthropic-shaped body; expects at most one output limit in it. */
export function measureSent(
  body: Record<string, unknown>,
  kind: 'openai' | 'anthropic',
): SentMeasure {
  const copy = structuredClone(body) as Record<string, any>
  let images = 0
  for (const message of (copy.messages ?? []) as Record<string, any>[]) {
    if (!Array.isArray(message.content)) continue
    for (const part of message.content) {
      if (part?.type === 'image_url') {
        images++
        part.image_url.url = String(part.image_url.url)
          .replace(/^(data:[^;,]+;base64,).*$/s, '$1')
          .replace(/^(?!data:).*$/s, '')
      } else if (part?.type === 'image') {
        images++
        if (part.source?.data !== undefined) part.source.data = ''
        if (part.source?.url !== undefined) part.source.url = ''
      }
    }
  }
  const limits = ['max_tokens', 'max_completion_tokens'].filter((name) => copy[name] !== undefined)
  expect(limits.length).toBeLessThanOrEqual(1) // an upstream is never left to choose between two
  const limit = limits.length === 1 ? Number(copy[limits[0]!]) : null
  const tools =
    (Array.isArray(copy.tools) && copy.tools.length > 0) ||
    (Array.isArray(copy.functions) && copy.functions.length > 0)
  const messages =
    (copy.messages?.length ?? 0) + (kind === 'anthropic' && copy.system !== undefined ? 1 : 0)
  const prediction = copy.prediction === undefined ? 0 : utf8(JSON.stringify(copy.prediction))
  return {
    bytes: utf8(JSON.stringify(copy)),
    messages,
    images,
    tools,
    limit,
    n: Number(copy.n ?? 1),
    prediction,
  }
}

/** Input and output tokens the upstream can bill for a measured body, at most. */
export function sentTokens(sent: SentMeasure, imageTokens: number, modelMaxOutput: number) {
  const input =
    sent.bytes + 4 * sent.messages + 3 + (sent.tools ? 1_000 : 0) + sent.images * imageTokens
  const output = ((sent.limit ?? modelMaxOutput) + sent.prediction) * sent.n
  return { input, output }
}

/** USD, exact: tokens at per-million prices. */
export function priceTokens(
  tokens: { input: number; output: number },
  prices: { input: string; output: string },
) {
  return new Decimal(tokens.input)
    .times(prices.input)
    .plus(new Decimal(tokens.output).times(prices.output))
    .div(1e6)
}
