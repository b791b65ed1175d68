/**
 * How deep a parsed JSON value nests. JSON.parse takes 100,000 nested arrays in its stride, but
 * JSON.stringify overflows the stack somewhere past 20,000 levels, and every request body is
 * stringified again (ceilings, upstream calls, idempotency hashes). No real request nests
 * anywhere near this limit.
 */
export const MAX_JSON_DEPTH = 1000

/** True when `value` has objects or arrays nested more than `max` levels deep. Iterative. */
export function nestsDeeperThan(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  const stack: { node: object; depth: number }[] = []
  if (typeof value === 'object' && value !== null) stack.push({ node: value, depth: 1 })
  while (stack.length > 0) {
    const { node, depth } = stack.pop()!
    if (depth > max) return true
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === 'object' && child !== null) stack.push({ node: child, depth: depth + 1 })
    }
  }
  return false
}
