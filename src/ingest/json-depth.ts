/**
 * How deep a parsed JSON value nests. JSON.parse takes 100,000 nested arrays in its stride, but
 * JSON.stringify overflows the stack somewhere past 20,000 levels, and every request body is
 * stringified again (ceilings, upstream calls, idempotency hashes). No real request nests
 * anywhere near this limit.
 */
export const MAX_JSON_DEPTH = 1000

/**
 * True when `value` has objects or arrays nested more than `max` levels deep. Recursive, but
 * never more than `max` frames deep. A few hundred nanoseconds for a typical request body.
 */
export function nestsDeeperThan(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  if (typeof value !== 'object' || value === null) return false
  if (max === 0) return true
  if (Array.isArray(value)) {
    for (const child of value) if (nestsDeeperThan(child, max - 1)) return true
    return false
  }
  for (const key in value) {
    if (nestsDeeperThan((value as Record<string, unknown>)[key], max - 1)) return true
  }
  return false
}
