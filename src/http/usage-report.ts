/**
 * GET /v1/usage (docs/operations.md): the query read and checked, and the account's usage rows grouped by
 * day, model or provider. Pure: the route and the dashboard's usage page both use it.
 */
import { z } from 'zod'
import { badRequest } from '../errors.ts'
import { Money, usd, ZERO } from '../money/decimal.ts'
import type { UsageRow } from '../store/store.ts'
import type { UsageBucketObject } from '../schemas/native-objects.ts'

export const MAX_USAGE_DAYS = 400
export const GROUPINGS = ['day', 'model', 'provider'] as const
export type Grouping = (typeof GROUPINGS)[number]

export interface UsageQuery {
  from: string
  to: string
  groupBy: Grouping
}

const DAY_MS = 86_400_000
const DATE = /^\d{4}-\d{2}-\d{2}$/

/** A YYYY-MM-DD that is a real calendar date, as Unix ms of its UTC midnight; null otherwise. */
export function dayMs(text: string): number | null {
  if (!DATE.test(text)) return null
  const ms = Date.parse(`${text}T00:00:00Z`)
  return Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== text ? null : ms
}

export const dayText = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/**
 * The query's fields as GET /openapi.json publishes them, from the same rule and groupings;
 * readUsageQuery below is the check, with a message that names today's date in its fix.
 */
export const usageQueryFields = z.object({
  from: z.string().regex(DATE).describe('the first UTC day, YYYY-MM-DD'),
  to: z
    .string()
    .regex(DATE)
    .describe(`the last UTC day, inclusive; at most ${MAX_USAGE_DAYS} days from \`from\``),
  group_by: z.enum(GROUPINGS).default('day'),
})

/** The query's `from`, `to` (UTC dates, `to` inclusive) and `group_by` (default day), or a 400. */
export function readUsageQuery(params: URLSearchParams, todayMs = Date.now()): UsageQuery {
  const today = dayText(todayMs)
  for (const name of ['from', 'to'] as const) {
    const value = params.get(name)
    if (value === null)
      throw badRequest(
        `query parameter ${name} is required; send a UTC date such as ${name}=${today}`,
        name,
      )
    if (dayMs(value) === null)
      throw badRequest(
        `query parameter ${name} must be a date as YYYY-MM-DD (UTC); got ${JSON.stringify(value.slice(0, 32))}, send for example ${name}=${today}`,
        name,
      )
  }
  const from = params.get('from')!
  const to = params.get('to')!
  const days = (dayMs(to)! - dayMs(from)!) / DAY_MS + 1
  if (days < 1)
    throw badRequest(`query parameter to (${to}) is before from (${from}); swap them`, 'to')
  if (days > MAX_USAGE_DAYS)
    throw badRequest(
      `the range from ${from} to ${to} is ${days} days, more than ${MAX_USAGE_DAYS}; ask for at most ${MAX_USAGE_DAYS} days at a time (to = from + ${MAX_USAGE_DAYS - 1} days at the most)`,
      'to',
    )
  const groupBy = params.get('group_by') ?? 'day'
  if (!(GROUPINGS as readonly string[]).includes(groupBy))
    throw badRequest(
      `query parameter group_by must be day, model or provider; got ${JSON.stringify(groupBy.slice(0, 32))}`,
      'group_by',
    )
  return { from, to, groupBy: groupBy as Grouping }
}

/** One row of the answer: the grouping's key, the others absent (native-objects.ts). */
export type UsageBucket = UsageBucketObject

interface Sum {
  lines: number
  liveCalls: number
  input: number
  cached: number
  output: number
  cost: Money
  first: Money
}

const emptySum = (): Sum => ({
  lines: 0,
  liveCalls: 0,
  input: 0,
  cached: 0,
  output: 0,
  cost: ZERO,
  first: ZERO,
})

function addTo(sum: Sum, row: UsageRow) {
  sum.lines += row.lines
  sum.liveCalls += row.liveCalls
  sum.input += row.inputTokens
  sum.cached += row.cachedInputTokens
  sum.output += row.outputTokens
  sum.cost = sum.cost.plus(row.costUsd)
  sum.first = sum.first.plus(row.firstOfferingCostUsd)
}

/**
 * The rows summed per group: by day every day of the range (a day without use has zeros, so a
 * chart has no holes), by model or provider those that were used, by name.
 */
export function groupUsage(rows: readonly UsageRow[], query: UsageQuery) {
  const sums = new Map<string, Sum>()
  if (query.groupBy === 'day')
    for (let ms = dayMs(query.from)!; ms <= dayMs(query.to)!; ms += DAY_MS)
      sums.set(dayText(ms), emptySum())
  for (const row of rows) {
    const key = query.groupBy === 'day' ? row.day : row[query.groupBy]
    if (!sums.has(key)) sums.set(key, emptySum())
    addTo(sums.get(key)!, row)
  }
  const keys = [...sums.keys()]
  if (query.groupBy !== 'day') keys.sort()
  return keys.map((key) => ({ key, sum: sums.get(key)! }))
}

export function renderUsage(rows: readonly UsageRow[], query: UsageQuery) {
  const keyName = query.groupBy === 'day' ? 'start' : query.groupBy
  const data: UsageBucket[] = groupUsage(rows, query).map(({ key, sum }) => ({
    [keyName]: key,
    lines: sum.lines,
    live_calls: sum.liveCalls,
    input_tokens: sum.input,
    cached_input_tokens: sum.cached,
    output_tokens: sum.output,
    cost_usd: usd(sum.cost),
  }))
  return { object: 'list' as const, data }
}

/** What the rows cost, and what they would have on each model's first listed offering. */
export function routingSaving(rows: readonly UsageRow[]) {
  const sum = emptySum()
  for (const row of rows) addTo(sum, row)
  return { costUsd: sum.cost, firstOfferingCostUsd: sum.first, savedUsd: sum.first.minus(sum.cost) }
}
