/**
 * The catalog's model names nearest to one it does not know, for "did you mean": the same name
 * in other letter case (`GPT-4o-mini`), else names a typo or two away (`gpt-5-nan`,
 * `claude-haiku-4.5`). Asked only for an unknown model, and remembered per name, so a file of
 * 50,000 lines that all misspell one model measures it once.
 */
import type { Endpoint } from '../../providers/types.ts'
import type { Catalog } from './catalog.ts'

/** At most this many suggestions, the nearest first. */
const MAX_SUGGESTIONS = 3
/** A name longer than any model id is no typo of one: it is not measured. */
const MAX_NAME_LENGTH = 200
/** Names remembered per catalog before the memory starts over. */
const MAX_REMEMBERED = 512

const remembered = new WeakMap<Catalog, Map<string, string[]>>()

/**
 * The ids or aliases nearest to `name` (one per model, as the catalog spells it), or none when
 * nothing is near: a case-insensitive match, else at most one edit (two for a name of ten or
 * more characters), a swap of two neighbours counting as one.
 */
export function nearModelNames(catalog: Catalog, name: string, endpoint: Endpoint): string[] {
  if (name.length > MAX_NAME_LENGTH) return []
  let memory = remembered.get(catalog)
  if (!memory) remembered.set(catalog, (memory = new Map()))
  const key = `${endpoint} ${name}`
  let near = memory.get(key)
  if (!near) {
    if (memory.size >= MAX_REMEMBERED) memory.clear()
    near = measure(catalog, name.toLowerCase(), endpoint)
    memory.set(key, near)
  }
  return near
}

function measure(catalog: Catalog, wanted: string, endpoint: Endpoint): string[] {
  const most = wanted.length >= 10 ? 2 : 1
  const found: { name: string; distance: number }[] = []
  // Only models that serve the endpoint and can run here, as the examples are.
  for (const model of catalog.models) {
    if (!model.endpoints.includes(endpoint) || catalog.usable(model).length === 0) continue
    let best: { name: string; distance: number } | null = null
    for (const name of [model.id, ...model.aliases]) {
      const distance = wanted === name.toLowerCase() ? 0 : editDistance(wanted, name, most)
      if (distance <= most && (!best || distance < best.distance)) best = { name, distance }
    }
    if (best) found.push(best)
  }
  if (found.length === 0) return []
  // Only the nearest: a same-letters match alone, not beside its typos.
  const nearest = Math.min(...found.map((f) => f.distance))
  return found
    .filter((f) => f.distance === nearest)
    .slice(0, MAX_SUGGESTIONS)
    .map((f) => f.name)
}

/**
 * Edits from `a` (lower case) to `b` lower-cased, a swap of neighbours being one (optimal string
 * alignment), or `most + 1` as soon as it must be more than `most`.
 */
export function editDistance(a: string, b: string, most: number): number {
  const over = most + 1
  if (Math.abs(a.length - b.length) > most) return over
  const lower = b.toLowerCase()
  let before = new Array<number>(lower.length + 1)
  let previous = Array.from({ length: lower.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = new Array<number>(lower.length + 1)
    current[0] = i
    let rowMin = i
    for (let j = 1; j <= lower.length; j++) {
      const cost = a[i - 1] === lower[j - 1] ? 0 : 1
      let cell = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === lower[j - 2] && a[i - 2] === lower[j - 1])
        cell = Math.min(cell, before[j - 2]! + 1)
      current[j] = cell
      if (cell < rowMin) rowMin = cell
    }
    if (rowMin > most) return over
    before = previous
    previous = current
  }
  return Math.min(previous[lower.length]!, over)
}
