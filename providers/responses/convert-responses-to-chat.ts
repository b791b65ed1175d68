/**
 * A Responses API request → the chat.completions body the engine validates, prices and routes
 * (docs/clients/responses.md), for the common subset: `input` (text, or message items with text and image parts, and the
 * function_call / function_call_output items of a tool loop), `instructions`,
 * `max_output_tokens`, `temperature`, `top_p`, `text.format` (json_schema, json_object, text),
 * function `tools`, `tool_choice`, `metadata`, and the gateway's `provider` routing object. Any
 * other field is refused, naming it; `store: true`, `previous_response_id`, `conversation`,
 * `background: true` and `item_reference` input items are refused because the gateway stores no
 * response.
 * `service_tier` is carried into the chat body, whose validation refuses a tier other than the
 * default (src/ingest/service-tier.ts), passed through or not.
 */

import { providerToolRefusal, RESPONSES_CLIENT_TOOLS, unsizedPart } from '../unsized-content.ts'

export type ResponsesConversion =
  | { ok: true; body: Record<string, unknown> }
  /** `outside`: a valid Responses request, outside the subset translated; else one refused as it is. */
  | { ok: false; message: string; param: string; outside: boolean }

/** The fields translated. `stream` is read by the route; `store: false` changes nothing. */
export const RESPONSES_FIELDS = new Set([
  'model',
  'input',
  'instructions',
  'max_output_tokens',
  'temperature',
  'top_p',
  'text',
  'tools',
  'tool_choice',
  'metadata',
  'parallel_tool_calls',
  // Carried into the chat body, whose validation refuses all but the default tier.
  'service_tier',
  'stream',
  'store',
  'previous_response_id',
  // The gateway's routing object (docs/routing.md), as on a chat call.
  'provider',
])

/**
 * Fields outside the subset sent at their default, which asks for nothing: taken and left out, as
 * a client that sends back what a Response shows (`"truncation": "disabled"`, `"background":
 * false`) expects. Any other value of them is refused like any field outside the subset.
 */
const AT_DEFAULT = new Map<string, (value: unknown) => boolean>([
  ['background', (value) => value === false],
  ['truncation', (value) => value === 'disabled'],
  ['top_logprobs', (value) => value === 0],
  ['include', (value) => Array.isArray(value) && value.length === 0],
  [
    'reasoning',
    (value) => typeof value === 'object' && value !== null && Object.keys(value).length === 0,
  ],
])

/** The fields a refusal lists as supported: store only as false, previous_response_id never. */
const SUPPORTED_TEXT = [...RESPONSES_FIELDS]
  .filter((name) => name !== 'previous_response_id')
  .map((name) => (name === 'store' ? 'store (false)' : name))
  .join(', ')

/** OpenAI's bounds on `metadata`: a map of strings, echoed in the Response. */
const METADATA = { pairs: 16, keyChars: 64, valueChars: 512 }

/** Refuses a `metadata` OpenAI would not take. */
function checkMetadata(metadata: unknown): void {
  if (metadata === undefined || metadata === null) return
  const wanted = `must be an object of at most ${METADATA.pairs} string values, keys up to ${METADATA.keyChars} characters and values up to ${METADATA.valueChars}`
  if (typeof metadata !== 'object' || Array.isArray(metadata)) throw new Refusal(wanted, 'metadata')
  const entries = Object.entries(metadata)
  if (entries.length > METADATA.pairs) throw new Refusal(wanted, 'metadata')
  for (const [key, value] of entries)
    if (
      key.length > METADATA.keyChars ||
      typeof value !== 'string' ||
      value.length > METADATA.valueChars
    )
      throw new Refusal(wanted, `metadata.${key.slice(0, METADATA.keyChars)}`)
}

/**
 * `lenient`: the call is passed through to a provider that serves the Responses API, and the chat
 * body only prices and holds it. Fields outside the subset are left out of it, and input it
 * cannot translate counts as its JSON text, so the bound stays an upper bound.
 */
export interface ConvertOptions {
  lenient?: boolean
}

class Refusal extends Error {
  constructor(
    message: string,
    readonly param: string,
    /** The request is valid Responses, but outside the subset translated. */
    readonly outside = false,
  ) {
    super(message)
  }
}

type Item = Record<string, unknown>

const NOTHING_STORED =
  'this gateway stores no responses, so there is nothing to continue from; send the whole conversation in input'

/**
 * Refusals that hold whatever the offering: the gateway keeps nothing to refer back to or fetch
 * later (`conversation` is OpenAI's stored one, `background` needs `store: true`). Like every
 * refusal here, the message reads after the field's name (the live 400 and the issue put it first).
 */
export function storageRefusal(body: Record<string, unknown>): ResponsesConversion | null {
  const refused = (param: string, message: string): ResponsesConversion => ({
    ok: false,
    param,
    outside: false,
    message,
  })
  const present = (name: string) => body[name] !== undefined && body[name] !== null
  if (present('store') && typeof body.store !== 'boolean')
    return refused('store', 'must be a boolean: set it to false or leave it out')
  if (body.store === true)
    return refused(
      'store',
      `true is not supported: ${NOTHING_STORED} (set store to false or leave it out)`,
    )
  if (present('previous_response_id'))
    return refused('previous_response_id', `is not supported: ${NOTHING_STORED}`)
  if (present('conversation')) return refused('conversation', `is not supported: ${NOTHING_STORED}`)
  const reference = Array.isArray(body.input)
    ? body.input.findIndex((item) => (item as Item | null)?.type === 'item_reference')
    : -1
  if (reference !== -1)
    return refused(
      `input[${reference}]`,
      // The Vercel AI SDK's Responses provider sends the model's earlier turns as references
      // unless told the responses are not stored.
      'is an item_reference, an item of an earlier response named by its id: this gateway stores no responses, so there is nothing to look it up in; send the item itself (the Vercel AI SDK does with providerOptions: { openai: { store: false } }, or use openai.chat(model))',
    )
  if (body.background === true)
    return refused(
      'background',
      'true is not supported: this gateway stores no responses, so there is none to fetch later; leave it out and wait for the answer, or send the requests as a batch (POST /v1/batches)',
    )
  return null
}

/** A text part's text: an earlier assistant turn's refusal part is what that turn said. */
function partText(part: { type?: unknown; text?: unknown; refusal?: unknown }, assistant: boolean) {
  if (part?.type === 'input_text' || part?.type === 'output_text') return part.text
  if (assistant && part?.type === 'refusal') return part.refusal
  return undefined
}

/**
 * The text of a message's content. `assistant`: an earlier answer, whose parts are output_text
 * and refusal (OpenAI's own answers hold both), each carried as that turn's text.
 */
function textOf(content: unknown, where: string, lenient: boolean, assistant = false): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) {
    if (lenient) return JSON.stringify(content ?? '')
    throw new Refusal('must be text or an array of text parts', where)
  }
  return content
    .map((part: { type?: unknown; text?: unknown; refusal?: unknown }, index) => {
      const text = partText(part, assistant)
      if (typeof text === 'string') return text
      if (lenient) return JSON.stringify(part)
      throw new Refusal(
        `part type ${JSON.stringify(part?.type)} is not supported here; send ${assistant ? 'output_text or refusal' : 'input_text'} parts`,
        `${where}[${index}]`,
        true,
      )
    })
    .join('')
}

/**
 * A user message's content: its text, or chat's parts when it holds images (`input_image` →
 * `image_url`, which chat offerings take, Anthropic's through their translation). An image named
 * by `file_id` is refused: no file is kept here to read it from. Passed through (`lenient`), the
 * parts only price the call, so every image counts as one there, by file_id too.
 */
function userContentOf(content: unknown, where: string, lenient: boolean): unknown {
  const parts =
    Array.isArray(content) &&
    content.some((part) => part?.type === 'input_image' || (lenient && part?.type === 'input_file'))
  if (!parts) return textOf(content, where, lenient)
  return (content as Item[]).map((part, index) => {
    const at = `${where}[${index}]`
    // Passed through, a file OpenAI reads itself (by URL, id or data) is not sized by its bytes:
    // priced as the model's whole context window (providers/unsized-content.ts).
    if (part?.type === 'input_file') return unsizedPart(part)
    if (part?.type === 'input_image') {
      const url =
        typeof part.image_url === 'string' && part.image_url !== ''
          ? part.image_url
          : lenient
            ? 'image'
            : null
      if (url === null)
        throw new Refusal(
          'must give image_url, a URL or a data: URL; an image by file_id is not supported here, as no file is kept',
          `${at}.image_url`,
          true,
        )
      const detail = typeof part.detail === 'string' ? { detail: part.detail } : {}
      return { type: 'image_url', image_url: { url, ...detail } }
    }
    if (
      (part?.type === 'input_text' || part?.type === 'output_text') &&
      typeof part.text === 'string'
    )
      return { type: 'text', text: part.text }
    if (lenient) return { type: 'text', text: JSON.stringify(part) }
    throw new Refusal(
      `part type ${JSON.stringify(part?.type)} is not supported here; send input_text or input_image parts`,
      at,
      true,
    )
  })
}

/** `input`, or `instructions` given as items (`field`), as chat messages. */
function convertInput(input: unknown, lenient: boolean, field = 'input'): Item[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }]
  if (!Array.isArray(input) || input.length === 0)
    throw new Refusal('must be text or a non-empty array of input items', field)
  const messages: Item[] = []
  input.forEach((item: Item, index) => {
    const where = `${field}[${index}]`
    if (typeof item !== 'object' || item === null || Array.isArray(item))
      throw new Refusal(
        'must be an input item object, such as {"role": "user", "content": "…"}',
        where,
      )
    const type = item.type ?? 'message'
    if (type === 'message') {
      const role = item.role
      if (role !== 'user' && role !== 'assistant' && role !== 'system' && role !== 'developer')
        throw new Refusal('must be user, assistant, system or developer', `${where}.role`)
      // A developer message is the Responses API's system message; chat-only servers do not all
      // take the role (a Qwen chat template refuses it), every one takes `system`.
      const content =
        role === 'user'
          ? userContentOf(item.content, `${where}.content`, lenient)
          : textOf(item.content, `${where}.content`, lenient, role === 'assistant')
      messages.push({ role: role === 'developer' ? 'system' : role, content })
    } else if (type === 'function_call') {
      const call = {
        id: item.call_id,
        type: 'function',
        function: { name: item.name, arguments: item.arguments },
      }
      const last = messages.at(-1)
      // Consecutive calls of one turn are one assistant message, as chat writes them.
      if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) last.tool_calls.push(call)
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] })
    } else if (type === 'function_call_output') {
      // Text, or a list of content parts whose text parts are the result (other parts refused;
      // passed through, a file among them marks the output unsized).
      const output = Array.isArray(item.output)
        ? lenient && item.output.some((part) => part?.type === 'input_file')
          ? [unsizedPart(item.output)]
          : textOf(item.output, `${where}.output`, lenient)
        : typeof item.output === 'string'
          ? item.output
          : JSON.stringify(item.output)
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: output })
    } else if (type === 'reasoning' && !lenient) {
      // An earlier turn's reasoning (encrypted, or its summary) is read back only by the model
      // that wrote it; chat has no place for it, and the answer it led to is in the conversation.
      // So a conversation begun on a reasoning model goes on here without it.
    } else if (lenient) {
      messages.push({ role: 'user', content: JSON.stringify(item) })
    } else {
      throw new Refusal(
        `item type ${JSON.stringify(type)} is not supported here; send message, function_call or function_call_output items`,
        `${where}.type`,
        true,
      )
    }
  })
  return messages
}

/**
 * `instructions`: text is a system message; OpenAI also takes a list of input items there, each
 * kept as its message. Never dropped without a word: anything else is refused.
 */
function instructionMessages(instructions: unknown, lenient: boolean): Item[] {
  if (instructions === undefined || instructions === null) return []
  if (typeof instructions === 'string') return [{ role: 'system', content: instructions }]
  if (Array.isArray(instructions) && instructions.length > 0)
    return convertInput(instructions, lenient, 'instructions')
  throw new Refusal('must be text or a non-empty array of input items', 'instructions')
}

function convertFormat(text: unknown, out: Record<string, unknown>, lenient: boolean) {
  if (typeof text !== 'object' || text === null) throw new Refusal('must be an object', 'text')
  for (const name of Object.keys(text))
    if (name !== 'format' && !lenient)
      throw new Refusal('is not supported here; send only text.format', `text.${name}`, true)
  const format = (text as { format?: Record<string, unknown> }).format
  if (format === undefined || format === null || format.type === 'text') return
  if (format.type === 'json_object') out.response_format = { type: 'json_object' }
  else if (format.type === 'json_schema') {
    const schema: Item = { name: format.name ?? 'response', schema: format.schema }
    if (format.strict !== undefined) schema.strict = format.strict
    if (format.description !== undefined) schema.description = format.description
    out.response_format = { type: 'json_schema', json_schema: schema }
  } else if (!lenient)
    throw new Refusal('must be text, json_object or json_schema', 'text.format.type')
}

function convertTools(tools: unknown, lenient: boolean): Item[] {
  if (!Array.isArray(tools)) throw new Refusal('must be an array of tools', 'tools')
  return tools.map((tool: Item, index) => {
    // The provider's own tools (web search, file search, code interpreter, …) run and are billed
    // per call at OpenAI, at a price the catalog does not have: refused whatever the offering.
    if (typeof tool?.type === 'string' && !RESPONSES_CLIENT_TOOLS.has(tool.type))
      throw new Refusal(
        providerToolRefusal(tool?.type, '{"type": "function", "name", "parameters"}'),
        `tools[${index}].type`,
      )
    // Another tool the caller runs, passed through: in the chat body that only prices the call,
    // it counts as its JSON text.
    if (lenient && tool?.type !== 'function') {
      const name = typeof tool?.name === 'string' ? tool.name : `tool_${index}`
      const fn = { name, parameters: { type: 'object' }, description: JSON.stringify(tool) }
      return { type: 'function', function: fn }
    }
    if (tool?.type !== 'function')
      throw new Refusal(
        `tool type ${JSON.stringify(tool?.type)} is not supported here; send function tools`,
        `tools[${index}].type`,
        true,
      )
    const fn: Item = { name: tool.name, parameters: tool.parameters ?? { type: 'object' } }
    if (tool.description !== undefined && tool.description !== null)
      fn.description = tool.description
    if (typeof tool.strict === 'boolean') fn.strict = tool.strict
    return { type: 'function', function: fn }
  })
}

function convertToolChoice(choice: unknown): unknown {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice
  const named = choice as { type?: unknown; name?: unknown } | null
  if (named?.type === 'function' && typeof named.name === 'string')
    return { type: 'function', function: { name: named.name } }
  throw new Refusal('must be auto, none, required or {"type": "function", "name"}', 'tool_choice')
}

/** `body` as the caller sent it, known to be an object. */
export function convertResponsesToChat(
  body: Record<string, unknown>,
  options: ConvertOptions = {},
): ResponsesConversion {
  const lenient = options.lenient === true
  const stored = storageRefusal(body)
  if (stored) return stored
  try {
    for (const [name, value] of Object.entries(body))
      if (
        !lenient &&
        !RESPONSES_FIELDS.has(name) &&
        value !== null &&
        value !== undefined &&
        !AT_DEFAULT.get(name)?.(value)
      )
        throw new Refusal(
          `is not supported for this model's offerings, which take chat completions; remove it (supported: ${SUPPORTED_TEXT})`,
          name,
          true,
        )
    checkMetadata(body.metadata)
    const messages = [
      ...instructionMessages(body.instructions, lenient),
      ...convertInput(body.input, lenient),
    ]
    const out: Record<string, unknown> = { model: body.model, messages }
    const set = (from: string, to: string) => {
      if (body[from] !== undefined && body[from] !== null) out[to] = body[from]
    }
    set('max_output_tokens', 'max_tokens')
    set('temperature', 'temperature')
    set('top_p', 'top_p')
    set('parallel_tool_calls', 'parallel_tool_calls')
    set('service_tier', 'service_tier')
    set('provider', 'provider')
    if (body.text !== undefined && body.text !== null) convertFormat(body.text, out, lenient)
    if (body.tools !== undefined && body.tools !== null)
      out.tools = convertTools(body.tools, lenient)
    if (Array.isArray(out.tools) && out.tools.length === 0) delete out.tools
    // Passed through, tool_choice may name the provider's own tools: only the upstream reads it.
    if (body.tool_choice !== undefined && body.tool_choice !== null && !lenient)
      out.tool_choice = convertToolChoice(body.tool_choice)
    // Carried as sent, so the chat validation refuses a stream that is not a boolean ("true" in
    // quotes would otherwise get a whole answer where the caller waits for events).
    set('stream', 'stream')
    return { ok: true, body: out }
  } catch (error) {
    if (error instanceof Refusal)
      return { ok: false, message: error.message, param: error.param, outside: error.outside }
    throw error
  }
}
