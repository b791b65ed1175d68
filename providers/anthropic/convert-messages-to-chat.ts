/**
 * An Anthropic Messages API request → the chat.completions body the engine validates, prices and
 * routes (docs/clients/anthropic-sdk.md), the inverse of providers/anthropic/convert-to-anthropic-messages.ts.
 *
 * Mapped: `system` (text or text blocks) → a system message first; user/assistant turns with
 * text and image blocks; assistant tool_use blocks → tool_calls; user tool_result blocks → tool
 * messages; max_tokens; stop_sequences → stop; temperature, top_p; tools (input_schema →
 * parameters) and tool_choice (any → required, disable_parallel_tool_use →
 * parallel_tool_calls false); metadata.user_id → user; output_config.format (Anthropic's
 * structured outputs, a JSON schema) → response_format json_schema, so the answer is judged as
 * any structured line's is; `cache_control` on system, text and image
 * blocks and on tools, where the chat form keeps it (docs/pricing.md: the ceiling reads its ttl);
 * a 1-hour one where it has no place (top level, tool_use, tool_result, other blocks), which
 * Anthropic's offerings are still sent, is carried on the last message's last part.
 * A field outside this subset is refused, naming it, rather than dropped: the caller would
 * otherwise get an answer that ignored it.
 */

import {
  anthropicBlockUnsized,
  anthropicServerTool,
  providerToolRefusal,
  unsizedPart,
  UNSIZED,
} from '../unsized-content.ts'
/**
 * Where one chat message came from in the Messages request, so a refusal of the chat body can
 * name the caller's own field (messages-path.ts): its path, and its parts' and tool calls'.
 */
export interface MessageOrigin {
  path: string
  parts?: string[]
  toolCalls?: string[]
}

export type ChatConversion =
  | { ok: true; body: Record<string, unknown>; origins: MessageOrigin[] }
  /** `outside`: a valid Messages request, outside the subset translated; else an invalid one. */
  | { ok: false; message: string; param: string; outside: boolean }

/** The Messages fields translated; `stream` is read by the route. */
const KNOWN = new Set([
  'model',
  'messages',
  'system',
  'max_tokens',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'tools',
  'tool_choice',
  'metadata',
  'output_config',
  // The gateway's routing object (docs/routing.md), as on a chat call.
  'provider',
])

class Refusal extends Error {
  constructor(
    message: string,
    readonly param: string,
    /** The request is valid Messages, but outside the subset translated. */
    readonly outside = false,
  ) {
    super(message)
  }
}

type Block = Record<string, unknown>

function blocksOf(content: unknown, where: string): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  if (!Array.isArray(content))
    throw new Refusal('must be a string or an array of content blocks', where)
  return content.map((block, index) => {
    if (typeof block !== 'object' || block === null || Array.isArray(block))
      throw new Refusal('must be a content block object', `${where}[${index}]`)
    return block as Block
  })
}

/** `part` with the block's cache_control, when it has one. */
function cached(part: Block, block: Block): Block {
  return block.cache_control === undefined ? part : { ...part, cache_control: block.cache_control }
}

const asksOneHour = (item: unknown) =>
  (item as { cache_control?: { ttl?: unknown } } | null)?.cache_control?.ttl === '1h'
const listOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : [])
/** The blocks whose cache_control the chat form keeps (cached). */
const KEPT_CACHE = new Set<unknown>(['text', 'image'])

/**
 * Whether the request asks a 1-hour cache where the chat form keeps no cache_control: on itself
 * (Anthropic's automatic caching), or on a message block other than text and image (tool_use,
 * tool_result and what it holds, documents, …). Anthropic's offerings are sent the request as
 * it came and bill those writes at the 1-hour rate, so the ceiling has to see them.
 */
function oneHourLeftOut(body: Block): boolean {
  if (asksOneHour(body)) return true
  return listOf(body.messages).some((message) =>
    listOf((message as Block | null)?.content).some((block) => {
      const b = block as Block | null
      if (KEPT_CACHE.has(b?.type)) return false
      return asksOneHour(b) || listOf(b?.content).some(asksOneHour)
    }),
  )
}

/**
 * The last part of the last message with content asks the 1-hour cache, where the ceiling reads
 * it (docs/pricing.md); a string becomes one text part, as a cached one is sent.
 */
function carryOneHour(messages: Block[]): void {
  const hasContent = (m: Block) =>
    (typeof m.content === 'string' && m.content !== '') ||
    (Array.isArray(m.content) && m.content.length > 0)
  const at = messages.findLastIndex(hasContent)
  if (at < 0) return
  const content = messages[at].content
  const parts =
    typeof content === 'string' ? [{ type: 'text', text: content }] : [...(content as Block[])]
  parts[parts.length - 1] = {
    ...parts[parts.length - 1],
    cache_control: { type: 'ephemeral', ttl: '1h' },
  }
  messages[at] = { ...messages[at], content: parts }
}

/** The system prompt: one string, or text parts when a block asks to be cached. */
function systemOf(system: unknown): string | Block[] {
  const blocks = blocksOf(system, 'system')
  if (!blocks.some((block) => block.cache_control !== undefined)) return textOf(system, 'system')
  return blocks.map((block, index) => {
    if (block.type !== 'text' || typeof block.text !== 'string')
      throw new Refusal('only text blocks are accepted here', `system[${index}]`, true)
    return cached({ type: 'text', text: block.text }, block)
  })
}

/**
 * The text of `content`. `lenient`: passed through, a block of another kind (a tool result's
 * image or document, which Anthropic takes) counts as its JSON text, as blocks the chat form
 * lacks do elsewhere.
 */
function textOf(content: unknown, where: string, lenient = false): string {
  return blocksOf(content, where)
    .map((block, index) => {
      if (lenient && block.type !== 'text') return JSON.stringify(block)
      if (block.type !== 'text' || typeof block.text !== 'string')
        throw new Refusal('only text blocks are accepted here', `${where}[${index}]`, true)
      return block.text
    })
    .join('')
}

/**
 * An image block as chat's image part. Passed through (`lenient`), the part only prices the call:
 * an image by another source (Anthropic's Files API, `{"type": "file", "file_id"}`) counts as an
 * image there too, as the Responses API's image by file_id does.
 */
function imagePart(block: Block, where: string, lenient: boolean): Block {
  const source = (block.source ?? {}) as Record<string, unknown>
  if (source.type === 'base64' && typeof source.data === 'string')
    return {
      type: 'image_url',
      image_url: { url: `data:${String(source.media_type)};base64,${source.data}` },
    }
  if (source.type === 'url' && typeof source.url === 'string')
    return { type: 'image_url', image_url: { url: source.url } }
  if (lenient) return { type: 'image_url', image_url: { url: 'image' } }
  if (source.type === 'file')
    throw new Refusal(
      'is an image by file_id, which only a model with an Anthropic offering reads (no file is kept here); send a base64 or url source',
      `${where}.source`,
      true,
    )
  throw new Refusal('an image needs a base64 or url source', `${where}.source`)
}

const THINKING = new Set(['thinking', 'redacted_thinking'])

/** A turn's chat messages, each beside where it came from. */
function convertTurn(
  message: unknown,
  index: number,
  lenient: boolean,
  origins: MessageOrigin[],
): Block[] {
  const where = `messages[${index}]`
  const m = (message ?? {}) as Record<string, unknown>
  if (m.role !== 'user' && m.role !== 'assistant')
    throw new Refusal('must be "user" or "assistant"', `${where}.role`)
  const parts: Block[] = []
  const toolCalls: Block[] = []
  const toolResults: Block[] = []
  const from = { parts: [] as string[], toolCalls: [] as string[], toolResults: [] as string[] }
  blocksOf(m.content, `${where}.content`).forEach((block, at) => {
    const path = `${where}.content[${at}]`
    switch (block.type) {
      case 'text':
        if (typeof block.text !== 'string') throw new Refusal('must be a string', `${path}.text`)
        parts.push(cached({ type: 'text', text: block.text }, block))
        from.parts.push(path)
        break
      case 'image':
        parts.push(cached(imagePart(block, path, lenient), block))
        from.parts.push(path)
        break
      case 'tool_use':
        if (m.role !== 'assistant') throw new Refusal('tool_use belongs to assistant turns', path)
        toolCalls.push({
          id: block.id,
          type: 'function',
          function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
        })
        from.toolCalls.push(path)
        break
      case 'tool_result':
        if (m.role !== 'user') throw new Refusal('tool_result belongs to user turns', path)
        toolResults.push({
          role: 'tool',
          tool_call_id: block.tool_use_id,
          content:
            block.content === undefined ? '' : textOf(block.content, `${path}.content`, lenient),
        })
        from.toolResults.push(path)
        break
      default:
        // An earlier answer's thinking is read back only by the model that wrote it; chat has no
        // place for it, and the answer it led to is in the turn: left out, the conversation goes
        // on elsewhere.
        if (!lenient && m.role === 'assistant' && THINKING.has(block.type as string)) break
        // Passed through, a block the chat form lacks (thinking, text documents, …) counts as its
        // text; one Anthropic reads itself (a document by URL or file id, a PDF) as the model's
        // whole context window (providers/unsized-content.ts).
        if (lenient) {
          if (anthropicBlockUnsized(block)) parts.push(unsizedPart(block))
          else parts.push({ type: 'text', text: JSON.stringify(block) })
          from.parts.push(path)
          break
        }
        throw new Refusal(
          `content block type ${JSON.stringify(block.type)} is not supported here; send text, image, tool_use or tool_result blocks`,
          `${path}.type`,
          true,
        )
    }
  })
  // A lone text part goes as a plain string, the form every chat server accepts (unless cached).
  const plain =
    parts.length === 1 && parts[0].type === 'text' && !parts[0].cache_control && !parts[0][UNSIZED]
  const content = plain ? parts[0].text : parts.length ? parts : null
  origins.push(...from.toolResults.map((path) => ({ path })))
  const turnOrigin = { path: where, parts: from.parts, toolCalls: from.toolCalls }
  if (m.role === 'assistant') {
    const turn: Block = { role: 'assistant', content: content ?? '' }
    if (toolCalls.length) turn.tool_calls = toolCalls
    origins.push(turnOrigin)
    return [turn]
  }
  if (content !== null) origins.push(turnOrigin)
  return content === null ? toolResults : [...toolResults, { role: 'user', content }]
}

function convertTools(tools: unknown, lenient: boolean): Block[] {
  if (!Array.isArray(tools)) throw new Refusal('must be an array of tools', 'tools')
  return tools.map((tool: Record<string, unknown>, index) => {
    // A server tool (web search, code execution, …) runs at Anthropic and is billed per call
    // there, at a price the catalog does not have: refused whatever the offering.
    if (tool !== null && typeof tool === 'object' && anthropicServerTool(tool))
      throw new Refusal(
        providerToolRefusal(tool.type, '{"name", "description", "input_schema"}'),
        `tools[${index}].type`,
      )
    // An Anthropic-defined tool the caller runs (bash, text editor, …): passed through, Anthropic
    // is sent it; in the chat body that only prices the call it counts as its JSON text.
    if (tool?.type !== undefined && tool.type !== 'custom') {
      if (lenient) {
        const name = typeof tool.name === 'string' ? tool.name : `tool_${index}`
        const fn = { name, parameters: { type: 'object' }, description: JSON.stringify(tool) }
        return { type: 'function', function: fn }
      }
      throw new Refusal(
        `is ${JSON.stringify(tool.type).slice(0, 80)}, a tool that only a model with an Anthropic offering takes; this model's offerings take function tools ({"name", "input_schema"}) only`,
        `tools[${index}].type`,
        true,
      )
    }
    if (typeof tool?.name !== 'string')
      throw new Refusal('a tool needs a name and an input_schema', `tools[${index}]`)
    const fn: Block = { name: tool.name, parameters: tool.input_schema ?? { type: 'object' } }
    if (typeof tool.description === 'string') fn.description = tool.description
    return cached({ type: 'function', function: fn }, tool)
  })
}

function convertToolChoice(choice: Record<string, unknown>, out: Record<string, unknown>) {
  if (choice.type === 'auto') out.tool_choice = 'auto'
  else if (choice.type === 'any') out.tool_choice = 'required'
  else if (choice.type === 'none') out.tool_choice = 'none'
  else if (choice.type === 'tool')
    out.tool_choice = { type: 'function', function: { name: choice.name } }
  else throw new Refusal('must be auto, any, tool or none', 'tool_choice.type')
  if (choice.disable_parallel_tool_use === true) out.parallel_tool_calls = false
}

/** Chat completions take at most 4 stop sequences (OpenAI's limit); Anthropic takes more. */
const CHAT_STOP_LIMIT = 4

/**
 * stop_sequences → stop. Passed through, the chat body only prices the call and Anthropic judges
 * the list: one longer than chat allows is left out of it rather than refused in chat's name.
 */
function stopOf(sequences: unknown, out: Record<string, unknown>, lenient: boolean) {
  if (!Array.isArray(sequences) || sequences.some((item) => typeof item !== 'string'))
    throw new Refusal('must be an array of strings', 'stop_sequences')
  if (sequences.length <= CHAT_STOP_LIMIT) out.stop = sequences
  else if (!lenient)
    throw new Refusal(
      `has ${sequences.length} items, and this model's offerings, which take chat completions, take at most ${CHAT_STOP_LIMIT} (a model with an Anthropic offering takes more); send at most ${CHAT_STOP_LIMIT}`,
      'stop_sequences',
      true,
    )
}

/** The name chat's json_schema requires; Anthropic's format has none. */
const FORMAT_NAME = 'output'

/**
 * output_config.format → response_format. Anthropic's format has no name, and no `strict`: left
 * unset, as chat's strict mode refuses schemas Anthropic takes (one without
 * additionalProperties: false). Passed through (`lenient`), Anthropic judges the object and its
 * effort; a well-formed schema still goes into the chat body, so the answer is judged the same.
 */
function formatOf(config: unknown, out: Record<string, unknown>, lenient: boolean) {
  if (config === null) return
  if (typeof config !== 'object' || Array.isArray(config)) {
    if (lenient) return
    throw new Refusal(
      'must be an object: {"format": {"type": "json_schema", "schema"}}',
      'output_config',
    )
  }
  const { format, ...rest } = config as Record<string, unknown>
  for (const [name, value] of Object.entries(rest))
    if (!lenient && value !== null && value !== undefined)
      throw new Refusal(
        `is not supported for this model's offerings, which take chat completions (a model with an Anthropic offering takes it as sent); remove it, keeping output_config.format`,
        `output_config.${name}`,
        true,
      )
  if (format === undefined || format === null) return
  const { type, schema } = format as { type?: unknown; schema?: unknown }
  const object = typeof schema === 'object' && schema !== null && !Array.isArray(schema)
  if (type === 'json_schema' && object)
    out.response_format = { type: 'json_schema', json_schema: { name: FORMAT_NAME, schema } }
  else if (lenient) return
  else if (type !== 'json_schema')
    throw new Refusal('must be "json_schema"', 'output_config.format.type')
  else throw new Refusal('must be a JSON Schema object', 'output_config.format.schema')
}

/**
 * `params` as the caller sent them; the engine's own validation checks what comes out.
 * `lenient`: the request is passed through to Anthropic (docs/clients/anthropic-sdk.md) and the chat body only prices
 * and holds it: fields outside the subset are left out, blocks it lacks count as their JSON text.
 */
export function convertMessagesToChat(
  params: unknown,
  options: { lenient?: boolean } = {},
): ChatConversion {
  const lenient = options.lenient === true
  try {
    if (typeof params !== 'object' || params === null || Array.isArray(params))
      throw new Refusal('must be a JSON object: a Messages API request', '')
    const body = params as Record<string, unknown>
    for (const name of Object.keys(body))
      if (!KNOWN.has(name) && !lenient)
        throw new Refusal(
          `is not supported for this model's offerings, which take chat completions (a model with an Anthropic offering takes it as sent); remove it (supported: ${[...KNOWN].join(', ')})`,
          name,
          true,
        )
    if (Array.isArray(body.mcp_servers) && body.mcp_servers.length > 0)
      throw new Refusal(
        "is not supported: Anthropic would call these servers' tools itself, and the gateway can neither size what they bring into the prompt nor price their calls; send their tools as function tools that your code runs",
        'mcp_servers',
      )
    if (!Array.isArray(body.messages) || body.messages.length === 0)
      throw new Refusal('must be a non-empty array of messages', 'messages')
    if (typeof body.max_tokens !== 'number')
      throw new Refusal('is required: the most tokens the answer may have', 'max_tokens')
    const messages: Block[] = []
    const origins: MessageOrigin[] = []
    if (body.system !== undefined) {
      const system = systemOf(body.system)
      messages.push({ role: 'system', content: system })
      const parts = Array.isArray(system) ? system.map((_, at) => `system[${at}]`) : undefined
      origins.push({ path: 'system', parts })
    }
    body.messages.forEach((message, index) =>
      messages.push(...convertTurn(message, index, lenient, origins)),
    )
    const out: Record<string, unknown> = {
      model: body.model,
      messages,
      max_tokens: body.max_tokens,
    }
    if (body.stop_sequences !== undefined) stopOf(body.stop_sequences, out, lenient)
    if (body.temperature !== undefined) out.temperature = body.temperature
    if (body.top_p !== undefined) out.top_p = body.top_p
    if (body.tools !== undefined) out.tools = convertTools(body.tools, lenient)
    if (typeof body.tool_choice === 'object' && body.tool_choice !== null)
      convertToolChoice(body.tool_choice as Record<string, unknown>, out)
    const user = (body.metadata as { user_id?: unknown } | null | undefined)?.user_id
    if (typeof user === 'string') out.user = user
    if (body.output_config !== undefined) formatOf(body.output_config, out, lenient)
    if (body.provider !== undefined) out.provider = body.provider
    // Carried as sent, so the chat validation refuses a stream that is not a boolean ("true" in
    // quotes would otherwise get a whole message where the caller waits for events).
    if (body.stream !== undefined && body.stream !== null) out.stream = body.stream
    if (oneHourLeftOut(body)) carryOneHour(messages)
    return { ok: true, body: out, origins }
  } catch (error) {
    if (error instanceof Refusal)
      return { ok: false, message: error.message, param: error.param, outside: error.outside }
    throw error
  }
}
