/**
 * Forced tool calls, as each API answers them. A request that offers tools and forces a call
 * (chat completions' and the Responses API's `tool_choice` "required" or a named function,
 * Anthropic's `{"type":"any"}` or `{"type":"tool"}`) is answered with one call: "required" and
 * "any" call the first tool offered, a named choice that tool. Its arguments are an instance of
 * the tool's parameters schema (structured-reply.ts), strings the ordinary reply's text, as
 * spaced JSON so that their words stand in for completion tokens like any reply's, cut at max
 * tokens like one. "auto", "none", no choice, or a choice naming no tool offered: no forced call,
 * and the request gets the ordinary text reply (the real APIs refuse the last with a 400; the
 * simulator stays lenient so a request that worked before still works).
 */
import type { Reply } from './reply.ts'
import { cutAtWords, instanceOf, spaced } from './structured-reply.ts'

/** The tool a request forces a call to: its name and its parameters' JSON schema. */
export interface ForcedTool {
  name: string
  parameters: unknown
  /** Forced by its name, not by "required"/"any": OpenAI then ends the choice with `stop`. */
  named: boolean
}

/** One forced call, as every dialect renders it. */
export interface ToolCall {
  name: string
  /** The arguments as JSON text, as a reply: its words are the call's completion tokens. */
  arguments: Reply
  /** The arguments as a value (Anthropic's `input`); {} once cut, when the text is no JSON. */
  input: Record<string, unknown>
}

type Fields = Record<string, unknown>

function objectsIn(list: unknown): Fields[] {
  if (!Array.isArray(list)) return []
  return list.filter((item): item is Fields => typeof item === 'object' && item !== null)
}

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The tool named among those offered, or the first one when `name` is null. */
function pick(tools: Omit<ForcedTool, 'named'>[], name: string | null): ForcedTool | null {
  const tool = name === null ? tools[0] : tools.find((offered) => offered.name === name)
  return tool ? { ...tool, named: name !== null } : null
}

/**
 * Chat completions: tools `{type:"function",function:{name,parameters}}`; `tool_choice`
 * "required" or `{type:"function",function:{name}}`.
 */
export function chatForcedTool(tools: unknown, choice: unknown): ForcedTool | null {
  const functions = objectsIn(tools).flatMap((tool) => {
    const f = tool.function as Fields | undefined
    if (tool.type !== 'function' || typeof f?.name !== 'string') return []
    return [{ name: f.name, parameters: f.parameters }]
  })
  if (choice === 'required') return pick(functions, null)
  const named = choice as { type?: unknown; function?: { name?: unknown } } | null | undefined
  if (named?.type !== 'function' || typeof named.function?.name !== 'string') return null
  return pick(functions, named.function.name)
}

/** Anthropic Messages: custom tools `{name,input_schema}`; `tool_choice` any or tool by name. */
export function messagesForcedTool(tools: unknown, choice: unknown): ForcedTool | null {
  // Server tools (web search, code execution…) carry their own type and no input_schema.
  const custom = objectsIn(tools).flatMap((tool) => {
    if (typeof tool.name !== 'string' || (tool.type !== undefined && tool.type !== 'custom'))
      return []
    return [{ name: tool.name, parameters: tool.input_schema }]
  })
  const forced = choice as { type?: unknown; name?: unknown } | null | undefined
  if (forced?.type === 'any') return pick(custom, null)
  if (forced?.type !== 'tool' || typeof forced.name !== 'string') return null
  return pick(custom, forced.name)
}

/**
 * The Responses API: flat tools `{type:"function",name,parameters}`; `tool_choice` "required" or
 * `{type:"function",name}`.
 */
export function responsesForcedTool(tools: unknown, choice: unknown): ForcedTool | null {
  const functions = objectsIn(tools).flatMap((tool) => {
    if (tool.type !== 'function' || typeof tool.name !== 'string') return []
    return [{ name: tool.name, parameters: tool.parameters }]
  })
  if (choice === 'required') return pick(functions, null)
  const named = choice as { type?: unknown; name?: unknown } | null | undefined
  if (named?.type !== 'function' || typeof named.name !== 'string') return null
  return pick(functions, named.name)
}

/**
 * How a chat server names its tool calls: OpenAI's `call_…`, or `functions.<name>:<n>` as Kimi K2
 * on vLLM does, n counting the calls made earlier in the conversation.
 */
export type ToolCallIds = 'openai' | 'functions'

/** `functions.<name>:<n>`: n the number of tool calls the conversation's messages already hold. */
export function functionsCallId(name: string, messages: readonly unknown[]): string {
  let earlier = 0
  for (const message of objectsIn(messages)) {
    if (Array.isArray(message.tool_calls)) earlier += message.tool_calls.length
  }
  return `functions.${name}:${earlier}`
}

/** The call to `tool`: arguments built from its schema, strings `plain`, cut at maxTokens. */
export function forcedCall(tool: ForcedTool, plain: string, maxTokens: number | null): ToolCall {
  const schema = tool.parameters ?? { type: 'object', properties: {} }
  const built = instanceOf(schema, schema, plain, 0)
  // Arguments are always an object, as every API sends them, whatever the schema says.
  const input = isObject(built) ? built : {}
  const args = cutAtWords(spaced(JSON.stringify(input)), maxTokens)
  return { name: tool.name, arguments: args, input: args.end === 'length' ? {} : input }
}
