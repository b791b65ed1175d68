/**
 * An OpenAI chat.completions body → an Anthropic Messages API body.
 *
 * Mapped: system/developer messages → `system`; user/assistant content (text, image_url);
 * assistant tool_calls → tool_use blocks, their ids made ones Anthropic takes (map-tool-use-ids.ts);
 * tool messages → tool_result blocks; consecutive turns of one role merged, as Anthropic
 * alternates roles; stop → stop_sequences; the output limit,
 * read as the cost ceiling reads it, else the model's own within its context window
 * (providers/output-limit.ts, unsetOutputLimit; Anthropic requires one); temperature, top_p; tools and tool_choice; user →
 * metadata.user_id; response_format json_schema → output_config.format (Anthropic's JSON outputs; json_object has no counterpart,
 * as they take a schema, and is refused). Parameters with no
 * Anthropic meaning are left out; the catalog lists them as unsupported so ingest refuses them
 * before they get here.
 *
 * What OpenAI takes and Anthropic refuses is made into what Anthropic takes, meaning the same:
 * Anthropic refuses an empty or whitespace-only text block and a message with no content (but an
 * optional final assistant one), so such text parts are left out, and so is a user or assistant
 * message left with nothing (an assistant message with empty content said nothing; Anthropic
 * merges the turns on either side). A final assistant message (a prefill) cannot end with
 * whitespace: its trailing whitespace is trimmed. A body left with no message at all has no
 * faithful translation: ingest refuses it (src/ingest/untranslated-fields.ts), here it is a
 * ConversionError. tool_choice goes only with tools, and disable_parallel_tool_use only on a
 * tool_choice that allows a tool (auto, any, tool), as Anthropic takes them.
 */

import { requestedOutputTokens, unsetOutputLimit } from '../output-limit.ts'
import type { ModelLimits } from '../types.ts'
import { mapToolUseIds, type ToolUseIdMap } from './map-tool-use-ids.ts'

export type AnthropicRequestConversion =
  { ok: true; body: Record<string, unknown> } | { ok: false; message: string }

type Block = Record<string, unknown>
type Role = 'user' | 'assistant'

class ConversionError extends Error {}

/** A part's `cache_control` (docs/pricing.md), passed on as Anthropic takes it. */
function withCache(block: Block, part: unknown): Block {
  const cache = (part as { cache_control?: unknown } | null)?.cache_control
  return cache === undefined ? block : { ...block, cache_control: cache }
}

/**
 * Text Anthropic refuses as a message's only text: empty or whitespace only ("text content
 * blocks must contain non-whitespace text"). An empty block it refuses anywhere.
 */
function blank(text: unknown): boolean {
  // \s is the whitespace trim() takes off; searching past it copies nothing.
  return typeof text === 'string' && !/\S/.test(text)
}

/** The text parts of a system or tool message, whose parts are joined into one text. */
function textParts(content: unknown, where: string): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  if (content === null || content === undefined) return []
  if (!Array.isArray(content)) throw new ConversionError(`${where}: content must be text`)
  return content.map((part: { type?: unknown; text?: unknown }) => {
    if (part?.type !== 'text' || typeof part.text !== 'string') {
      throw new ConversionError(`${where}: only text parts are allowed here`)
    }
    return withCache({ type: 'text', text: part.text }, part)
  })
}

function textOf(content: unknown, where: string): string {
  return textParts(content, where)
    .map((block) => block.text)
    .join('')
}

function imageBlock(url: unknown, where: string): Block {
  if (typeof url !== 'string') throw new ConversionError(`${where}: image_url.url is missing`)
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  if (data) return { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } }
  return { type: 'image', source: { type: 'url', url } }
}

/**
 * A user or assistant message's content as blocks. Empty text parts are left out, and whitespace
 * ones too when the message has no other text (beside other text Anthropic takes them, and they
 * keep the words around them apart).
 */
function contentBlocks(content: unknown, where: string): Block[] {
  if (typeof content === 'string') return blank(content) ? [] : [{ type: 'text', text: content }]
  if (content === null || content === undefined) return []
  if (!Array.isArray(content))
    throw new ConversionError(`${where}: content must be a string or parts`)
  const blocks: Block[] = []
  content.forEach((part: Record<string, unknown>, index) => {
    if (part?.type === 'text' && typeof part.text === 'string') {
      if (part.text !== '') blocks.push(withCache({ type: 'text', text: part.text }, part))
      // Left out, an empty part's cache breakpoint moves to what comes before it.
      else if (part.cache_control !== undefined && blocks.length > 0)
        blocks.push(withCache(blocks.pop()!, part))
    } else if (part?.type === 'image_url') {
      blocks.push(
        withCache(imageBlock((part.image_url as { url?: unknown } | undefined)?.url, where), part),
      )
    } else {
      throw new ConversionError(
        `${where}.content[${index}]: part type "${String(part?.type)}" is not supported by Anthropic`,
      )
    }
  })
  const texts = blocks.filter((block) => block.type === 'text')
  if (texts.length > 0 && texts.every((block) => blank(block.text)))
    return blocks.filter((block) => block.type !== 'text')
  return blocks
}

function toolUseBlocks(toolCalls: unknown, where: string, toolId: ToolUseIdMap): Block[] {
  if (!Array.isArray(toolCalls)) return []
  return toolCalls.map(
    (call: { id?: unknown; function?: { name?: unknown; arguments?: unknown } }) => {
      const text = String(call.function?.arguments ?? '')
      let input: unknown = {}
      // Empty arguments are a call without any, as OpenAI takes them (and models write them).
      if (!blank(text)) {
        try {
          input = JSON.parse(text)
        } catch {
          throw new ConversionError(`${where}: tool call arguments are not valid JSON`)
        }
      }
      return { type: 'tool_use', id: toolId(call.id), name: call.function?.name, input }
    },
  )
}

/**
 * A final assistant message is a prefill, which Anthropic refuses ending in whitespace ("final
 * assistant content cannot end with trailing whitespace"): trimmed, as the Vercel AI SDK does.
 */
function trimPrefill(turns: { role: Role; content: Block[] }[]): void {
  const last = turns[turns.length - 1]
  if (last?.role !== 'assistant') return
  while (last.content.at(-1)?.type === 'text') {
    const block = last.content.at(-1)!
    block.text = (block.text as string).trimEnd()
    if (block.text !== '') return
    last.content.pop()
  }
  if (last.content.length === 0) turns.pop()
}

function convertMessages(messages: readonly unknown[]): {
  system: Block[][]
  turns: { role: Role; content: Block[] }[]
} {
  const system: Block[][] = []
  const turns: { role: Role; content: Block[] }[] = []
  const toolId = mapToolUseIds(messages)
  // A message left with nothing is left out; the turns on either side merge, as Anthropic does.
  const push = (role: Role, content: Block[]) => {
    if (content.length === 0) return
    const last = turns[turns.length - 1]
    if (last && last.role === role) last.content.push(...content)
    else turns.push({ role, content })
  }
  messages.forEach((message, index) => {
    const where = `messages[${index}]`
    const m = (message ?? {}) as Record<string, unknown>
    switch (m.role) {
      case 'system':
      case 'developer': {
        // Joined into one text (systemOf): left out when that says nothing.
        const parts = textParts(m.content, where)
        if (!blank(parts.map((part) => part.text).join(''))) system.push(parts)
        break
      }
      case 'user':
        push('user', contentBlocks(m.content, where))
        break
      case 'assistant':
        push('assistant', [
          ...contentBlocks(m.content, where),
          ...toolUseBlocks(m.tool_calls, where, toolId),
        ])
        break
      case 'tool': {
        // A blank result goes without content, as Anthropic takes a result that has none.
        const text = textOf(m.content, where)
        const result: Block = { type: 'tool_result', tool_use_id: toolId(m.tool_call_id) }
        push('user', [blank(text) ? result : { ...result, content: text }])
        break
      }
      default:
        throw new ConversionError(
          `${where}: role "${String(m.role)}" is not supported by Anthropic`,
        )
    }
  })
  trimPrefill(turns)
  return { system, turns }
}

/**
 * Whether a chat body's messages leave Anthropic no message to send: only system messages, or
 * only messages with empty content. Anthropic refuses an empty `messages`, and nothing the body
 * says would fill it. False for messages the translation refuses for another reason.
 */
export function leavesNoAnthropicMessage(messages: readonly unknown[]): boolean {
  // Nearly every body, at no cost: a tool result, or a user or assistant text, is always sent.
  for (const message of messages) {
    const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown }
    if (role === 'tool') return false
    if ((role === 'user' || role === 'assistant') && typeof content === 'string' && !blank(content))
      return false
  }
  try {
    return convertMessages(messages).turns.length === 0
  } catch (error) {
    if (error instanceof ConversionError) return false
    throw error
  }
}

function convertTools(tools: unknown): Block[] | undefined {
  if (!Array.isArray(tools)) return undefined
  return tools.map((tool: { function?: Record<string, unknown> }) =>
    withCache(
      {
        name: tool.function?.name,
        ...(tool.function?.description !== undefined
          ? { description: tool.function.description }
          : {}),
        input_schema: tool.function?.parameters ?? { type: 'object', properties: {} },
      },
      tool,
    ),
  )
}

/**
 * Anthropic takes tool_choice only beside tools, and disable_parallel_tool_use only on a choice
 * that lets the model call one (auto, any, tool): with no tools, or with `none`, calling tools
 * in parallel is moot, and `parallel_tool_calls: false` sends nothing.
 */
function convertToolChoice(choice: unknown, parallel: unknown, tools: boolean): Block | undefined {
  // A call the model must make, with no tool to make it with: OpenAI refuses it too.
  if (!tools && (choice === 'required' || (typeof choice === 'object' && choice !== null)))
    throw new ConversionError(
      'tool_choice asks for a tool call, but the request gives no tools; add tools or remove tool_choice',
    )
  if (!tools) return undefined
  let converted: Block | undefined
  if (choice === 'auto') converted = { type: 'auto' }
  else if (choice === 'required') converted = { type: 'any' }
  else if (choice === 'none') return { type: 'none' }
  else if (typeof choice === 'object' && choice !== null) {
    converted = { type: 'tool', name: (choice as { function?: { name?: unknown } }).function?.name }
  }
  if (parallel === false)
    converted = { ...(converted ?? { type: 'auto' }), disable_parallel_tool_use: true }
  return converted
}

/** OpenAI's response_format → Anthropic's output_config.format; undefined for plain text. */
function convertResponseFormat(format: unknown): Block | undefined {
  const type = (format as { type?: unknown } | null | undefined)?.type
  if (type === undefined || type === 'text') return undefined
  if (type === 'json_schema') {
    const schema = (format as { json_schema?: { schema?: unknown } }).json_schema?.schema
    return { type: 'json_schema', schema }
  }
  throw new ConversionError(
    `response_format ${String(type)} is not supported by Anthropic, whose JSON outputs take a schema; use json_schema`,
  )
}

/**
 * The system messages as one string, joined as before; as text blocks when a part asks to be
 * cached, each message's parts joined into one block carrying the last cache_control among them.
 */
function systemOf(messages: Block[][]): string | Block[] {
  const blocks = messages.map((parts) => {
    const cache = parts.findLast((part) => part.cache_control !== undefined)?.cache_control
    const block: Block = { type: 'text', text: parts.map((part) => part.text).join('') }
    return cache === undefined ? block : { ...block, cache_control: cache }
  })
  if (!blocks.some((block) => block.cache_control !== undefined))
    return blocks.map((block) => block.text).join('\n\n')
  return blocks
}

/**
 * The chat fields convertToAnthropicMessages carries over (or refuses, as `n` above 1), and those
 * whose loss changes no answer: `service_tier` (a tier Anthropic has not is refused before,
 * docs/pricing.md), OpenAI's own storage and cache hints (`store`, `metadata`,
 * `prompt_cache_key`, `safety_identifier`). Any other would be dropped on the way, so a body that
 * may go to Anthropic is refused it instead (src/ingest/untranslated-fields.ts). `provider` is
 * the gateway's routing, never sent.
 */
export const TRANSLATED_CHAT_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'stop',
  'temperature',
  'top_p',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'user',
  'response_format',
  'stream',
  'stream_options',
  'n',
  'provider',
  'service_tier',
  'store',
  'metadata',
  'prompt_cache_key',
  'safety_identifier',
])

/** `limits`: the model's, within which a body that sets no output limit is sent one. */
export function convertToAnthropicMessages(
  body: Record<string, unknown>,
  limits?: ModelLimits,
): AnthropicRequestConversion {
  try {
    if (!Array.isArray(body.messages)) throw new ConversionError('messages must be an array')
    if (typeof body.n === 'number' && body.n > 1) {
      throw new ConversionError('n above 1 is not supported by Anthropic')
    }
    const { system, turns } = convertMessages(body.messages)
    if (turns.length === 0) {
      throw new ConversionError(
        'messages: no user or assistant message with content is left for Anthropic, which needs one; add a user message with text',
      )
    }
    const requested = requestedOutputTokens(body)
    const out: Record<string, unknown> = {
      model: body.model,
      // Where the body names none, set below once the prompt is known; here for the key order.
      max_tokens: requested ?? 0,
      messages: turns.map(({ role, content }) => ({
        role,
        // A lone text block goes as a plain string, the form Anthropic's own examples use
        // (unless it asks to be cached: only a block carries cache_control).
        content:
          content.length === 1 && content[0].type === 'text' && !content[0].cache_control
            ? content[0].text
            : content,
      })),
    }
    if (system.length > 0) out.system = systemOf(system)
    if (typeof body.stop === 'string') out.stop_sequences = [body.stop]
    else if (Array.isArray(body.stop)) out.stop_sequences = body.stop
    // At 1, the default of both, each is left out: Claude's newer models refuse the two together,
    // and older clients send `top_p: 1` beside the temperature they mean.
    if (typeof body.temperature === 'number' && body.temperature !== 1)
      out.temperature = body.temperature
    if (typeof body.top_p === 'number' && body.top_p !== 1) out.top_p = body.top_p
    const tools = convertTools(body.tools)
    // An empty list offers no tool, as none does.
    if (tools && tools.length > 0) out.tools = tools
    const toolChoice = convertToolChoice(body.tool_choice, body.parallel_tool_calls, !!out.tools)
    if (toolChoice) out.tool_choice = toolChoice
    if (typeof body.user === 'string') out.metadata = { user_id: body.user }
    const format = convertResponseFormat(body.response_format)
    if (format) out.output_config = { format }
    if (requested === undefined) {
      const prompt = Buffer.byteLength(JSON.stringify(out), 'utf8')
      out.max_tokens = unsetOutputLimit(prompt, out.tools !== undefined, limits)
    }
    return { ok: true, body: out }
  } catch (error) {
    if (error instanceof ConversionError) return { ok: false, message: error.message }
    throw error
  }
}
