/**
 * Structured answers, as a vLLM replica with guided decoding gives them: a request with
 * `response_format` (OpenAI chat), `text.format` (OpenAI's Responses API) or
 * `output_config.format` (Anthropic) is answered with JSON — an
 * instance of its schema built from the schema itself, or `{"reply": …}` for json_object — cut
 * at max_tokens like any reply. A test steers what comes back: the `structuredAnswers` option for
 * every request, or a marker in the last user message for that request alone:
 * - `valid` (default): JSON valid for the schema;
 * - `not_json`: prose before the JSON, which no JSON parser accepts;
 * - `off_schema`: JSON of the wrong shape (an array where the schema wants an object, else an
 *   object).
 * Markers: `[sim:valid]`, `[sim:not_json]`, `[sim:off_schema]`; and `[sim:answer]`, whose answer is
 * the rest of the message after the marker, as it is (a test's chosen content: `[sim:answer]"x"`).
 */
import { countWords, type MessageText, type Reply } from './reply.ts'

export type StructuredAnswers = 'valid' | 'not_json' | 'off_schema'

const MARKER = /\[sim:(valid|not_json|off_schema)\]/

/** The mode a request asks for by its marker, else the simulator's. */
export function structuredMode(
  messages: readonly MessageText[],
  fallback: StructuredAnswers,
): StructuredAnswers {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role !== 'user') continue
    const found = MARKER.exec(messages[i].text)
    return found ? (found[1] as StructuredAnswers) : fallback
  }
  return fallback
}

const ANSWER_MARKER = '[sim:answer]'

/** The content a request chose for its answer (`[sim:answer]` in its last user message), or null. */
function chosenAnswer(messages: readonly MessageText[]): string | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role !== 'user') continue
    const at = messages[i].text.indexOf(ANSWER_MARKER)
    return at < 0 ? null : messages[i].text.slice(at + ANSWER_MARKER.length)
  }
  return null
}

/** What a request asks its answer to be: a schema, any JSON object, or nothing structured. */
export type AnswerShape = { schema: unknown } | { object: true } | null

export function openaiAnswerShape(format: unknown): AnswerShape {
  const f = format as { type?: unknown; json_schema?: { schema?: unknown } } | null | undefined
  if (f?.type === 'json_schema') return { schema: f.json_schema?.schema ?? {} }
  if (f?.type === 'json_object') return { object: true }
  return null
}

/** The Responses API's `text.format`: the schema sits in the format itself. */
export function responsesAnswerShape(text: unknown): AnswerShape {
  const format = (text as { format?: { type?: unknown; schema?: unknown } } | null)?.format
  if (format?.type === 'json_schema') return { schema: format.schema ?? {} }
  if (format?.type === 'json_object') return { object: true }
  return null
}

export function anthropicAnswerShape(outputConfig: unknown): AnswerShape {
  const format = (outputConfig as { format?: { type?: unknown; schema?: unknown } } | null)?.format
  return format?.type === 'json_schema' ? { schema: format.schema ?? {} } : null
}

/**
 * The reply to a request that asks for structured output: the answer its last user message
 * chose (`[sim:answer]`), else JSON for its shape in the mode it asks for, built around the prose
 * `plain` makes.
 */
export function shapedReply(
  shape: Exclude<AnswerShape, null>,
  messages: readonly MessageText[],
  asked: { fallback: StructuredAnswers; maxTokens: number | null },
  plain: () => string,
): Reply {
  const chosen = chosenAnswer(messages)
  if (chosen !== null) {
    const words = chosen.split(/\s+/).filter(Boolean).length
    return { text: chosen, words, end: 'stop', stopSequence: null }
  }
  return structuredReply(shape, structuredMode(messages, asked.fallback), plain(), asked.maxTokens)
}

/** The structured reply for one choice; `plain` is the simulator's ordinary reply text. */
export function structuredReply(
  shape: Exclude<AnswerShape, null>,
  mode: StructuredAnswers,
  plain: string,
  maxTokens: number | null,
): Reply {
  const schema = 'schema' in shape ? shape.schema : { type: 'object' }
  let value: unknown = 'schema' in shape ? instanceOf(schema, schema, plain, 0) : { reply: plain }
  if (mode === 'off_schema') value = wantsObject(schema) ? ['off', 'schema'] : { off_schema: true }
  let text = spaced(JSON.stringify(value))
  if (mode === 'not_json') text = `Sure! Here is the JSON you asked for: ${text}`
  return cutAtWords(text, maxTokens)
}

/** `text` as a reply, cut after `maxTokens` words (ended by length) as a model would cut it. */
export function cutAtWords(text: string, maxTokens: number | null): Reply {
  if (maxTokens !== null && countWords(text) > maxTokens) {
    return {
      text: firstWords(text, maxTokens),
      words: maxTokens,
      end: 'length',
      stopSequence: null,
    }
  }
  return { text, words: countWords(text), end: 'stop', stopSequence: null }
}

/** A space after each `:` and `,` between JSON tokens, so words stand in for tokens. */
export function spaced(json: string): string {
  let out = ''
  let inString = false
  for (let i = 0; i < json.length; i++) {
    const c = json[i]
    out += c
    if (inString) {
      if (c === '\\') out += json[++i]
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === ':' || c === ',') out += ' '
  }
  return out
}

function firstWords(text: string, count: number): string {
  let seen = 0
  for (const match of text.matchAll(/\S+/g)) {
    if (++seen === count) return text.slice(0, match.index + match[0].length)
  }
  return count <= 0 ? '' : text
}

type Schema = Record<string, unknown>

function wantsObject(schema: unknown): boolean {
  const s = schema as Schema | null
  return s?.type === 'object' || (typeof s?.properties === 'object' && s?.type === undefined)
}

/** Follows a local `$ref` (`#`, `#/…` pointers) inside `root`. */
function dereference(root: unknown, reference: string): unknown {
  if (reference === '#') return root
  if (!reference.startsWith('#/')) return {}
  let node: unknown = root
  for (const raw of reference.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~')
    node = (node as Schema | null)?.[key]
  }
  return node ?? {}
}

/** Deeper than this, arrays get no more items than they must (a recursive schema ends). */
const MAX_DEPTH = 4
/** A schema that requires itself has no finite instance: given up on (null) this deep. */
const GIVE_UP_DEPTH = 32

/**
 * Schema nodes one instance may visit: `allOf` branches that `$ref` the same definitions twice
 * double at every level, and a caller's schema must not hold the simulator (and a demo's gateway,
 * which shares its process) for 2^N steps. Past it, what is left is filled in as null.
 */
const MAX_NODES = 10_000
/** The longest string a minLength pads to (a longer one makes the instance invalid, not huge). */
const MAX_STRING = 65_536

interface Build {
  root: unknown
  text: string
  left: number
}

/** A small instance of `schema` (`$ref`s resolved in `root`); strings are the reply's text. */
export function instanceOf(schema: unknown, root: unknown, text: string, depth: number): unknown {
  return build(schema, { root, text, left: MAX_NODES }, depth)
}

function build(schema: unknown, at: Build, depth: number): unknown {
  const { root, text } = at
  if (typeof schema !== 'object' || schema === null) return text
  if (--at.left < 0) return null
  const s = schema as Schema
  if (typeof s.$ref === 'string') {
    if (depth > GIVE_UP_DEPTH) return null
    return build(dereference(root, s.$ref), at, depth + 1)
  }
  if ('const' in s) return s.const
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0]
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = s[key]
    if (Array.isArray(branches) && branches.length > 0) {
      return build(branches[0], at, depth)
    }
  }
  if (Array.isArray(s.allOf) && s.allOf.length > 0) {
    const parts = s.allOf.map((part) => build(part, at, depth))
    if (parts.every((p) => typeof p === 'object' && p !== null && !Array.isArray(p))) {
      return Object.assign({}, ...parts)
    }
    return parts[0]
  }
  const types = Array.isArray(s.type) ? s.type : [s.type]
  const type =
    types.find((t) => typeof t === 'string' && t !== 'null') ??
    (s.properties ? 'object' : s.items || s.prefixItems ? 'array' : types[0])
  switch (type) {
    case 'object': {
      const properties = (s.properties ?? {}) as Record<string, unknown>
      const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : [])
      const value: Record<string, unknown> = {}
      for (const [name, sub] of Object.entries(properties)) {
        if (required.has(name) || depth < 1) value[name] = build(sub, at, depth + 1)
      }
      return value
    }
    case 'array': {
      const min = typeof s.minItems === 'number' ? s.minItems : 0
      const max = typeof s.maxItems === 'number' ? s.maxItems : Math.max(min, 1)
      // Within the nodes left: a minItems of a billion must not be a billion items.
      const count = Math.min(Math.max(min, depth < MAX_DEPTH ? 1 : 0), max, Math.max(0, at.left))
      const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : []
      return Array.from({ length: count }, (_, i) =>
        build(prefix[i] ?? s.items ?? {}, at, depth + 1),
      )
    }
    case 'integer':
    case 'number': {
      let n = 1
      if (typeof s.minimum === 'number' && n < s.minimum) n = Math.ceil(s.minimum)
      if (typeof s.exclusiveMinimum === 'number' && n <= s.exclusiveMinimum) {
        n = Math.floor(s.exclusiveMinimum) + 1
      }
      if (typeof s.maximum === 'number' && n > s.maximum) n = Math.floor(s.maximum)
      return n
    }
    case 'boolean':
      return true
    case 'null':
      return null
    default: {
      let value = text
      if (typeof s.minLength === 'number')
        value = value.padEnd(Math.min(s.minLength, MAX_STRING), '.')
      if (typeof s.maxLength === 'number') value = value.slice(0, s.maxLength)
      return value
    }
  }
}
