/**
 * A field of the chat body a Messages request translates to (convert-messages-to-chat.ts), named
 * as the caller's own field: a refusal of the chat body (its validation, a schema past its
 * bounds) names `messages[2].content[1].tool_use_id`, what the caller sent, not
 * `messages.3.tool_call_id`, which it never did. The chat message's index is not the caller's
 * (the system prompt is a message of its own in chat, a tool_result one of its own), so the
 * conversion's origins say where each came from.
 */
import type { MessageOrigin } from './convert-messages-to-chat.ts'

/** The chat fields of a tool call, a tool and a tool message, as Messages names them. */
const CALL_FIELDS: Record<string, string> = {
  'function.name': 'name',
  'function.arguments': 'input',
  id: 'id',
}
const TOOL_FIELDS: Record<string, string> = {
  'function.name': 'name',
  'function.description': 'description',
  'function.parameters': 'input_schema',
}
const TOP_FIELDS: Record<string, string> = {
  max_completion_tokens: 'max_tokens',
  stop: 'stop_sequences',
  user: 'metadata.user_id',
  parallel_tool_calls: 'tool_choice.disable_parallel_tool_use',
  'tool_choice.function.name': 'tool_choice.name',
  'tool_choice.function': 'tool_choice',
  'response_format.json_schema.schema': 'output_config.format.schema',
  'response_format.json_schema': 'output_config.format',
  response_format: 'output_config.format',
}

/** A path's segments, from zod's dotted form (`messages.3.content`) or the bracketed one. */
const segmentsOf = (path: string) => path.split(/\.|\[(\d+)\]/).filter((part) => part)

/** `rest` (segments after a prefix) by `fields`: the longest named prefix of it, else none. */
function named(base: string, rest: string[], fields: Record<string, string>): string {
  for (let length = rest.length; length > 0; length--) {
    const field = fields[rest.slice(0, length).join('.')]
    if (field !== undefined) return `${base}.${field}`
  }
  return base
}

/** A path under `messages[k]` of the chat body, as the Messages request's field it came from. */
function messagePath(rest: string[], origin: MessageOrigin): string {
  const [field, at, ...more] = rest
  const index = Number(at)
  if (field === 'content' && origin.parts) {
    // A lone text part went as a plain string: the content is that part.
    const part =
      at === undefined && origin.parts.length === 1 ? origin.parts[0] : origin.parts[index]
    if (part === undefined) return origin.path
    return more[0] === 'text' ? `${part}.text` : more.length ? `${part}.source` : part
  }
  if (field === 'tool_calls' && origin.toolCalls?.[index] !== undefined)
    return named(origin.toolCalls[index], more, CALL_FIELDS)
  if (field === 'tool_call_id') return `${origin.path}.tool_use_id`
  if (field === 'content' || field === 'role') return `${origin.path}.${field}`
  return origin.path
}

/** `path`, a field of the chat body, as the field of the Messages request it came from. */
export function messagesPath(path: string, origins: readonly MessageOrigin[]): string {
  const segments = segmentsOf(path)
  const [root, at, ...rest] = segments
  if (root === 'messages' && at !== undefined) {
    const origin = origins[Number(at)]
    return origin ? messagePath(rest, origin) : 'messages'
  }
  if (root === 'tools' && at !== undefined) return named(`tools[${at}]`, rest, TOOL_FIELDS)
  // Another field keeps its name unless Messages calls it otherwise.
  return named('', segments, TOP_FIELDS).slice(1) || path
}

/** The paths the chat body's refusals name: a root field, then `.name`, `.3` or `[3]` steps. */
const CHAT_PATH =
  /\b(?:messages|tools|tool_choice|response_format|max_completion_tokens|parallel_tool_calls)(?:\.\w+|\[\d+\])*/g

/** Text about the translated chat body, with the fields it names as the caller's own. */
export const inMessagesNames = (text: string, origins: readonly MessageOrigin[]) =>
  text
    .replace(CHAT_PATH, (path) => messagesPath(path, origins))
    // Where a message names the schema by chat's place for it, it is output_config.format's `schema`.
    .replace(/\bjson_schema\.schema\b/g, 'schema')
    .replace(/\/v1\/chat\/completions\b/g, '/anthropic/v1/messages')

/** The Messages request's names for its chat body's fields, in text and as a path. */
export const messagesNames = (origins: readonly MessageOrigin[]) => ({
  text: (text: string) => inMessagesNames(text, origins),
  param: (param: string) => messagesPath(param, origins),
})
