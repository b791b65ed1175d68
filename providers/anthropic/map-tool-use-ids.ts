/**
 * Tool-call ids as Anthropic takes them. Its tool_use ids must match ^[a-zA-Z0-9_-]+$, and a
 * conversation begun on another model carries that model's ids (`functions.get_weather:0`), which
 * Anthropic refuses. Each id is mapped deterministically, every character outside the pattern
 * replaced by `_`, and the same way wherever it appears in the request, so a tool_use and the
 * tool_result that answers it still pair up. An id already valid is kept; one whose mapping would
 * land on another id of the request is given a `_2`, `_3`, … suffix, so two calls stay two.
 */

const VALID_ID = /^[a-zA-Z0-9_-]+$/
const INVALID_CHARACTER = /[^a-zA-Z0-9_-]/g

/** Maps one request's tool-call ids; anything not a string is passed on as it is. */
export type ToolUseIdMap = (id: unknown) => unknown

/** The map for a chat body's messages: its assistant tool_calls' ids and its tool_call_ids. */
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
    if (VALID_ID.test(id) || mapped.has(id)) continue
    const base = id.replace(INVALID_CHARACTER, '_') || '_'
    let candidate = base
    for (let n = 2; taken.has(candidate); n++) candidate = `${base}_${n}`
    taken.add(candidate)
    mapped.set(id, candidate)
  }
  return (id) => (typeof id === 'string' ? (mapped.get(id) ?? id) : id)
}
