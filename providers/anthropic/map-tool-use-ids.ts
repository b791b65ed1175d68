/**
 * Tool-call ids as Anthropic takes them. Its tool_use ids must match ^[a-zA-Z0-9_-]+$, and a
 * conversation begun on another model carries that model's ids (`functions.get_weather:0`), which
 * Anthropic refuses. Each id is mapped deterministically, every character outside the pattern
 * replaced by `_`, and the same way wherever it appears in the request, so a tool_use and the
 * tool_result that answers it still pair up. An id already valid is kept; one whose mapping would
 * land on another id of the request is given a `_2`, `_3`, … suffix, so two calls stay two. An
 * answer translated to Anthropic's shape names its tool_use blocks the same way, so a client
 * that sends the conversation on to a Claude model sends ids Anthropic takes.
 */

const VALID_ID = /^[a-zA-Z0-9_-]+$/
const INVALID_CHARACTER = /[^a-zA-Z0-9_-]/g

/** Maps one request's tool-call ids; anything not a string is passed on as it is. */
export type ToolUseIdMap = (id: unknown) => unknown

/**
 * The map for a chat body's messages: its assistant tool_calls' ids and its tool_call_ids. A chat
 * answer's message is mapped by it too, so the ids /anthropic answers with are the ones the
 * next turn's request maps to themselves.
 */
export function mapToolUseIds(messages: readonly unknown[]): ToolUseIdMap {
  const ids: string[] = []
  for (const message of messages) {
    const m = (message ?? {}) as { tool_calls?: unknown; tool_call_id?: unknown }
    if (typeof m.tool_call_id === 'string') ids.push(m.tool_call_id)
    if (!Array.isArray(m.tool_calls)) continue
    for (const call of m.tool_calls as { id?: unknown }[]) {
      if (typeof call?.id === 'string') ids.push(call.id)
    }
  }
  if (ids.every((id) => VALID_ID.test(id))) return (id) => id
  // Valid ids keep their own name: a mapped one never takes it.
  const taken = new Set(ids.filter((id) => VALID_ID.test(id)))
  const mapped = new Map<string, string>()
  for (const id of ids) {
    if (!VALID_ID.test(id) && !mapped.has(id)) mapped.set(id, freeName(id, taken))
  }
  return (id) => (typeof id === 'string' ? (mapped.get(id) ?? id) : id)
}

/**
 * The map for a streamed answer, whose ids come one at a time: each named as mapToolUseIds names
 * it, the same name whenever it comes again. A valid id is kept unless an earlier mapped one took
 * its name (mapToolUseIds, seeing all ids first, would suffix the mapped one instead).
 */
export function streamedToolUseIds(): (id: string) => string {
  const taken = new Set<string>()
  const names = new Map<string, string>()
  return (id) => {
    let name = names.get(id)
    if (name === undefined) names.set(id, (name = freeName(id, taken)))
    return name
  }
}

/** `id` within the pattern, suffixed `_2`, `_3`, … past the names `taken`, which it joins. */
function freeName(id: string, taken: Set<string>): string {
  const base = id.replace(INVALID_CHARACTER, '_') || '_'
  let candidate = base
  for (let n = 2; taken.has(candidate); n++) candidate = `${base}_${n}`
  taken.add(candidate)
  return candidate
}
