/**
 * The pessimistic cost ceiling (SPEC §5). Input tokens are bounded by UTF-8 bytes: every
 * byte-level BPE token covers at least one byte, so a text of B bytes is at most B tokens; each
 * message adds at most 4 tokens of role and separators, and a reply is primed with 3 more
 * (OpenAI's published chat overhead). Output is max_tokens (or the model's limit) × n. The price
 * is the highest among the offerings the request may be routed to.
 */
import type { ModelEntry, Offering } from '../../providers/catalog.ts'
import type { ChatBody, EmbeddingsBody } from '../schemas/requests.ts'
import type Decimal from 'decimal.js'
import { Money } from './decimal.ts'

const PER_MESSAGE = 4
const REPLY_PRIMING = 3
/** An image part's bound: OpenAI bills a high-detail 2048×4096 image at 1,105 tokens; Anthropic at most ~1,600. */
const PER_IMAGE = 2_000
const MILLION = new Money(1_000_000)

const bytes = (text: string) => Buffer.byteLength(text, 'utf8')

export function chatInputBound(body: ChatBody): number {
  let tokens = REPLY_PRIMING
  for (const message of body.messages) {
    tokens += PER_MESSAGE
    const content = (message as { content?: unknown }).content
    if (typeof content === 'string') tokens += bytes(content)
    else if (Array.isArray(content)) {
      for (const part of content) tokens += part.type === 'text' ? bytes(part.text) : PER_IMAGE
    }
    const name = (message as { name?: unknown }).name
    if (typeof name === 'string') tokens += bytes(name)
    const toolCalls = (message as { tool_calls?: unknown }).tool_calls
    if (toolCalls) tokens += bytes(JSON.stringify(toolCalls))
  }
  // Tool definitions and schemas are sent to the model as text too.
  if (body.tools) tokens += bytes(JSON.stringify(body.tools))
  if (body.response_format) tokens += bytes(JSON.stringify(body.response_format))
  return tokens
}

export function chatOutputBound(body: ChatBody, model: ModelEntry): number {
  const perChoice = body.max_completion_tokens ?? body.max_tokens ?? model.max_output_tokens
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

/** The highest input and output price among offerings, per million tokens. */
export function highestPrices(offerings: readonly Offering[]) {
  let input = new Money(0)
  let output = new Money(0)
  for (const offering of offerings) {
    input = Money.max(input, offering.input_usd_per_mtok)
    output = Money.max(output, offering.output_usd_per_mtok)
  }
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
 * Sums token bounds per set of offerings, pricing each group once at the end: a batch of
 * 50,000 lines costs a handful of decimal operations instead of 100,000.
 */
export class CeilingTally {
  private groups = new Map<readonly Offering[], { input: number; output: number }>()

  add(offerings: readonly Offering[], input: number, output: number) {
    const group = this.groups.get(offerings)
    if (group) {
      group.input += input
      group.output += output
    } else this.groups.set(offerings, { input, output })
  }

  /**
   * Exact, not rounded: the exact sums of a file's parts add up to the file's. The caller rounds
   * the file's total up to the micro-dollar.
   */
  exactTotal(): Decimal {
    let sum = new Money(0)
    for (const [offerings, tokens] of this.groups) sum = sum.plus(priceOf(tokens, highestPrices(offerings)))
    return sum
  }
}
