/**
 * The bounds on a `response_format` JSON Schema (docs/structured-outputs.md), checked before it is compiled: its
 * size, its properties, its nesting, its enum values and its definitions. Each is cheap to count
 * and caps the work compiling can need; together they keep one tenant's schema from costing the
 * instance more than an ordinary one. A schema within them can still be slow to judge (references
 * that branch at every level): that is what the time budget of src/schemas/schema-checks.ts is for.
 *
 * The walk is iterative (an explicit stack), so no schema, however deep, can overflow it.
 */
import { DATA_KEYWORDS, MAP_KEYWORDS } from './schema-keywords.ts'

export const SCHEMA_BOUNDS = {
  /** Serialized, in UTF-8 bytes. */
  bytes: 64 * 1024,
  /** Keys of every `properties` object, summed. */
  properties: 1000,
  /** Subschemas inside subschemas: the root is level 0, `properties.a` level 1, and so on. */
  nesting: 10,
  /** Values of every `enum` array, summed. */
  enumValues: 1000,
  /** Keys of every `$defs` and `definitions` object, summed. */
  definitions: 100,
} as const

export type SchemaBound = keyof typeof SCHEMA_BOUNDS

export interface BoundProblem {
  bound: SchemaBound
  message: string
  fix: string
}

const number = (n: number) => n.toLocaleString('en-US')

/**
 * The first bound `schema` passes, or null. `text` is its JSON text (`JSON.stringify(schema)`),
 * which the caller has at hand: its length is the first bound, checked before anything is walked.
 */
export function schemaBoundProblem(schema: unknown, text: string): BoundProblem | null {
  const bytes = text.length > SCHEMA_BOUNDS.bytes / 3 ? Buffer.byteLength(text, 'utf8') : 0
  if (bytes > SCHEMA_BOUNDS.bytes) {
    return {
      bound: 'bytes',
      message: `is ${number(bytes)} bytes serialized, past the bound of 64 KiB (${SCHEMA_BOUNDS.bytes} bytes)`,
      fix: `send a schema of at most 64 KiB (${SCHEMA_BOUNDS.bytes} bytes): move long descriptions into the prompt and share repeated parts through $defs`,
    }
  }
  let properties = 0
  let enumValues = 0
  let definitions = 0
  const stack: { node: unknown; level: number }[] = [{ node: schema, level: 0 }]
  while (stack.length > 0) {
    const { node, level } = stack.pop()!
    if (typeof node !== 'object' || node === null) continue
    if (Array.isArray(node)) {
      // An array of schemas (anyOf, prefixItems…) is no level of its own.
      for (const item of node) stack.push({ node: item, level })
      continue
    }
    if (level > SCHEMA_BOUNDS.nesting) {
      return {
        bound: 'nesting',
        message: `nests subschemas more than ${SCHEMA_BOUNDS.nesting} levels deep, past the bound of ${SCHEMA_BOUNDS.nesting} levels of nesting`,
        fix: `flatten the schema to at most ${SCHEMA_BOUNDS.nesting} levels of nesting: define deep parts once under $defs and refer to them with $ref`,
      }
    }
    for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
      if (key === 'enum' && Array.isArray(value)) enumValues += value.length
      if (DATA_KEYWORDS.has(key)) continue
      if (MAP_KEYWORDS.has(key) && typeof value === 'object' && value !== null) {
        const names = Object.keys(value)
        if (key === 'properties') properties += names.length
        if (key === '$defs' || key === 'definitions') definitions += names.length
        for (const name of names)
          stack.push({ node: (value as Record<string, unknown>)[name], level: level + 1 })
      } else if (typeof value === 'object' && value !== null) {
        stack.push({ node: value, level: level + 1 })
      }
    }
    if (properties > SCHEMA_BOUNDS.properties) {
      return {
        bound: 'properties',
        message: `has more than ${SCHEMA_BOUNDS.properties} properties in all, past the bound of ${number(SCHEMA_BOUNDS.properties)} properties`,
        fix: `keep the schema to at most ${SCHEMA_BOUNDS.properties} properties in all (every "properties" object counted): split the request into several lines with smaller schemas`,
      }
    }
    if (enumValues > SCHEMA_BOUNDS.enumValues) {
      return {
        bound: 'enumValues',
        message: `has more than ${SCHEMA_BOUNDS.enumValues} enum values in all, past the bound of ${number(SCHEMA_BOUNDS.enumValues)} enum values`,
        fix: `keep the schema to at most ${SCHEMA_BOUNDS.enumValues} enum values in all: use a string with a pattern, or check long lists of choices after the answer`,
      }
    }
    if (definitions > SCHEMA_BOUNDS.definitions) {
      return {
        bound: 'definitions',
        message: `has more than ${SCHEMA_BOUNDS.definitions} $defs (definitions included), past the bound of ${SCHEMA_BOUNDS.definitions} $defs`,
        fix: `keep the schema to at most ${SCHEMA_BOUNDS.definitions} entries under $defs and definitions together: merge definitions that are alike`,
      }
    }
  }
  return null
}
