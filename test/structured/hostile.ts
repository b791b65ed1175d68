/** Hostile schemas and a /healthz watcher, for the tests of docs/structured-outputs.md (issue 23 item 1). */

/**
 * Issue 23's bomb: `levels` definitions, each an anyOf of two references to the level below, the
 * last a number; the root is that chain or a string. Judging a string walks 2^levels branches
 * before the root's second branch takes it.
 */
export function bombSchema(levels: number) {
  const $defs: Record<string, unknown> = {}
  for (let i = 0; i < levels; i++) {
    $defs[`l${i}`] = { anyOf: [{ $ref: `#/$defs/l${i + 1}` }, { $ref: `#/$defs/l${i + 1}` }] }
  }
  $defs[`l${levels}`] = { type: 'number' }
  return { $defs, anyOf: [{ $ref: '#/$defs/l0' }, { type: 'string' }] }
}

/**
 * A compile bomb within every bound of SPEC §19 (about 60 KiB): one definition, an anyOf of
 * `branches` schemas nothing matches, referred to by each of `items` prefixItems. Ajv spends
 * seconds generating and compiling its code.
 */
export function compileBombSchema(branches = 3000, items = 1400) {
  return {
    type: 'array',
    $defs: { b: { anyOf: Array.from({ length: branches }, () => ({ not: {} })) } },
    prefixItems: Array.from({ length: items }, () => ({ $ref: '#/$defs/b' })),
  }
}

export const schemaFormat = (schema: unknown) => ({
  type: 'json_schema',
  json_schema: { name: 'hostile', schema, strict: true },
})

/**
 * Asks /healthz one request after another until stopped; `stop` resolves with the slowest answer's
 * time (ms), Infinity if one failed. Bounded: at most 2,000 requests, and it stops by itself then.
 */
export function watchHealth(url: string) {
  let running = true
  let worst = 0
  const loop = (async () => {
    for (let i = 0; running && i < 2000; i++) {
      const started = performance.now()
      // A refused connection or another status counts as never answered.
      const ok = await fetch(`${url}/healthz`)
        .then(async (response) => (await response.arrayBuffer(), response.status === 200))
        .catch(() => false)
      worst = Math.max(worst, ok ? performance.now() - started : Infinity)
      await Bun.sleep(20)
    }
  })()
  return {
    async stop() {
      running = false
      await loop
      return worst
    },
  }
}
