/**
 * The JSON Schema keywords the gateway's own walks over a tenant's schema tell apart (its bounds,
 * its recursion, its patterns): one list, so the walks agree on what is a schema and what is data.
 */

/** Keywords whose values are data, not schemas: nothing under them is a keyword. */
export const DATA_KEYWORDS: ReadonlySet<string> = new Set(['enum', 'const', 'default', 'examples'])

/** Keywords whose value maps names (which may be any word, "enum" too) to schemas. */
export const MAP_KEYWORDS: ReadonlySet<string> = new Set([
  'properties',
  'patternProperties',
  'dependentSchemas',
  'dependencies',
  '$defs',
  'definitions',
])
