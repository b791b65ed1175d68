/**
 * The pessimistic cost ceiling (docs/money-and-limits.md): a bound the upstream's bill can never pass.
 *
 * Input: every byte of the body that goes upstream is counted, measured on the very body each
 * offering's adapter builds (the OpenAI body or the Anthropic translation, each starting from
 * providers/prepare-for-offering.ts), so a field the gateway does not know (legacy `functions`,
 * `function_call`, `prediction`, anything new) counts like any other. Every byte-level BPE
 * token covers at least one byte and a prompt's text is in its JSON at least as long as it is
 * raw, so B bytes are at most B tokens. On top: what the upstream adds that is not in the body —
 * at most 4 tokens of role and separators per message and 3 priming the reply (OpenAI's
 * published chat overhead), a tool-use system prompt when tools are defined (Anthropic
 * documents 313–346 tokens; OpenAI wraps definitions in a namespace), and each image at its
 * model's catalog bound instead of its URL's bytes. Content the provider fetches or reads itself
 * (a document by URL or file id, a PDF, a Responses input_file: providers/unsized-content.ts)
 * has no such bound: a prompt holding it counts as the model's whole context window.
 *
 * Output: the limit the adapter sends (providers/output-limit.ts: one rule for both token
 * parameters), or what the upstream may use when none is sent, × n, plus a predicted output's
 * bytes, which OpenAI bills as completion tokens when it rejects them.
 *
 * The price is the highest among the offerings the request may be routed to, for the highest
 * token class the line can incur (ceiling-rates.ts, docs/pricing.md).
 */
import {
  prepareAnthropicBody,
  STREAMED,
  UNSTREAMED,
} from '../../providers/anthropic/prepare-anthropic-body.ts'
import {
  imageInputTokens,
  limitsOf,
  type ModelEntry,
  type Offering,
} from '../catalog/catalog-file.ts'
import {
  prepareOpenAIBody,
  prepareOpenAIStreamBody,
} from '../../providers/openai/prepare-openai-body.ts'
import { requestedOutputTokens, TOOLS_PROMPT } from '../../providers/output-limit.ts'
import { holdsUnsized } from '../../providers/unsized-content.ts'
import type { ChatBody, EmbeddingsBody } from '../schemas/requests.ts'
import type Decimal from 'decimal.js'
import { Money } from '../money/decimal.ts'
import { ceilingRates, type CeilingFacts, type CeilingRates } from './ceiling-rates.ts'
import type { ModelLimits } from '../../providers/types.ts'

const PER_MESSAGE = 4
const REPLY_PRIMING = 3
const MILLION = new Money(1_000_000)

const bytes = (text: string) => Buffer.byteLength(text, 'utf8')

/** Where a request may be sent: the offering and its provider's kind (which adapter builds the body). */
export interface UpstreamTarget {
  kind: 'openai' | 'anthropic'
  offering: Pick<Offering, 'upstream_model' | 'max_tokens_param'>
}

/** What a data URL keeps of itself without its payload: the media type, which Anthropic is sent. */
const DATA_URL_HEAD = /^data:[^;,]+;base64,/

/**
 * The body with every image part's URL emptied (a data URL keeps its `data:<type>;base64,`
 * head, so the translation keeps its shape), and how many image parts it has. Copies only the
 * messages that hold an image.
 */
export function withoutImagePayloads(body: Record<string, unknown>): {
  body: Record<string, unknown>
  images: number
} {
  const messages = body.messages
  if (!Array.isArray(messages)) return { body, images: 0 }
  let images = 0
  let copied: unknown[] | null = null
  messages.forEach((message, m) => {
    const content = (message as { content?: unknown } | null)?.content
    if (!Array.isArray(content)) return
    let parts: unknown[] | null = null
    content.forEach((part, p) => {
      if ((part as { type?: unknown } | null)?.type !== 'image_url') return
      images++
      const image = (part as { image_url?: { url?: unknown } }).image_url
      const url =
        typeof image?.url === 'string' ? (DATA_URL_HEAD.exec(image.url)?.[0] ?? '') : image?.url
      parts ??= [...content]
      parts[p] = { ...(part as object), image_url: { ...image, url } }
    })
    if (parts) {
      copied ??= [...messages]
      copied[m] = { ...(message as object), content: parts }
    }
  })
  return { body: copied ? { ...body, messages: copied } : body, images }
}

/**
 * The body a target's adapter sends, serialized as it sends it; null when it sends nothing.
 * `limits`: the model's, within which Anthropic is sent an output limit when the body sets none.
 */
export function upstreamBodyText(
  body: Record<string, unknown>,
  target: UpstreamTarget,
  limits: ModelLimits,
): string | null {
  const stream = body.stream === true
  // What the upstream request carries for this offering (src/upstream/upstreams.ts, requestFor).
  const offering = {
    model: target.offering.upstream_model,
    maxTokensParam: target.offering.max_tokens_param,
    modelLimits: limits,
  }
  if (target.kind === 'openai') {
    const sent = stream
      ? prepareOpenAIStreamBody(body, offering)
      : prepareOpenAIBody(body, offering)
    return JSON.stringify(sent)
  }
  const converted = prepareAnthropicBody('chat', body, offering, stream ? STREAMED : UNSTREAMED)
  return converted.ok ? JSON.stringify(converted.body) : null
}

/** Targets sharing an adapter kind, model id and limit name build the same body: measure it once. */
function distinctTargets(targets: readonly UpstreamTarget[]): readonly UpstreamTarget[] {
  if (targets.length < 2) return targets
  const seen = new Set<string>()
  return targets.filter((target) => {
    const { upstream_model: model, max_tokens_param: limitName = '' } = target.offering
    const key = `${target.kind}\u0000${model}\u0000${limitName}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

/** `targets`: every offering the request may be sent to (an empty list measures the body as it is). */
export function chatInputBound(
  body: ChatBody,
  model: Pick<ModelEntry, 'image_input_tokens' | 'max_output_tokens' | 'context_tokens'>,
  targets: readonly UpstreamTarget[],
): number {
  const { body: text, images } = withoutImagePayloads(body)
  let largest = targets.length === 0 ? bytes(JSON.stringify(text)) : 0
  for (const target of distinctTargets(targets)) {
    const sent = upstreamBodyText(text, target, limitsOf(model))
    if (sent !== null) largest = Math.max(largest, bytes(sent))
  }
  let tokens = largest + REPLY_PRIMING + PER_MESSAGE * body.messages.length
  tokens += images * imageInputTokens(model)
  const functions = (body as { functions?: unknown }).functions
  const nonEmpty = (list: unknown) => Array.isArray(list) && list.length > 0
  if (nonEmpty(body.tools) || nonEmpty(functions)) tokens += TOOLS_PROMPT
  // Content the provider reads itself (a document by URL, a stored file, a PDF) may fill the
  // whole window, whatever its JSON's length; the caller pays what the provider reports.
  if (holdsUnsized(body.messages)) tokens = Math.max(tokens, model.context_tokens)
  return tokens
}

/**
 * Every upstream is sent the body's limit, or where it sets none may use the model's own (an
 * Anthropic upstream, which requires one, is sent it: providers/prepare-for-offering.ts).
 */
export function chatOutputBound(
  body: ChatBody,
  model: Pick<ModelEntry, 'max_output_tokens'>,
): number {
  let perChoice = requestedOutputTokens(body) ?? model.max_output_tokens
  const prediction = (body as { prediction?: unknown }).prediction
  if (prediction !== undefined && prediction !== null)
    perChoice += bytes(JSON.stringify(prediction))
  return perChoice * (body.n ?? 1)
}

export function embeddingsInputBound(body: EmbeddingsBody): number {
  const input = body.input
  if (typeof input === 'string') return bytes(input)
  let tokens = 0
  for (const item of input) {
    if (typeof item === 'string') tokens += bytes(item)
    else if (typeof item === 'number') tokens += 1
    else tokens += item.length
  }
  return tokens
}

/**
 * The highest input and output price among offerings, per million tokens, for a line with these
 * facts (its prompt bound and 1-hour TTL: ceiling-rates.ts); without them, the base tier's.
 */
export function highestPrices(offerings: readonly Offering[], facts?: CeilingFacts) {
  const { input, output } = ceilingRates(offerings, facts)
  return { input, output }
}

/** Exact price of a token count at one set of per-million prices. */
export function priceOf(
  tokens: { input: number; output: number },
  prices: { input: Decimal.Value; output: Decimal.Value },
): Decimal {
  return new Money(tokens.input)
    .times(prices.input)
    .plus(new Money(tokens.output).times(prices.output))
    .div(MILLION)
}

/**
 * Sums token bounds per set of ceiling rates, pricing each group once at the end: a batch of
 * 50,000 lines costs a handful of decimal operations instead of 100,000.
 */
export class CeilingTally {
  private groups = new Map<CeilingRates, { input: number; output: number }>()

  /** `rates`: the line's ceiling rates (ceilingRates, one object per routing and tier choice). */
  add(rates: CeilingRates, input: number, output: number) {
    const group = this.groups.get(rates)
    if (group) {
      group.input += input
      group.output += output
    } else this.groups.set(rates, { input, output })
  }

  /**
   * Exact, not rounded: the exact sums of a file's parts add up to the file's. The caller rounds
   * the file's total up to the micro-dollar.
   */
  exactTotal(): Decimal {
    let sum = new Money(0)
    for (const [rates, tokens] of this.groups) sum = sum.plus(priceOf(tokens, rates))
    return sum
  }
}
